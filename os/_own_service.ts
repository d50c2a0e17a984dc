/** Service adapters refuse the host's own service, whatever the caller asks (defence in depth). */
import { HostError } from "../src/errors.ts";
import { PROGRAM } from "../src/version.ts";
import { refuseOption } from "./_run.ts";

/** A service adapter was asked to act on (or about) the host's own service. */
export class OwnServiceRefused extends HostError {
  constructor(name: string, manager: string) {
    super(
      "service.own-refused",
      `${manager} adapter refuses "${name}": it is the host's own service, which its ` +
        `installation owns and no declaration may manage`,
    );
  }
}

/** The host's own service names, without a ".service" suffix. */
export const OWN_SERVICES: readonly string[] = [PROGRAM];

/** Throw {@link OwnServiceRefused} when `name` is one of `own` (with or without ".service"). */
export function refuseOwn(name: string, own: readonly string[], manager: string): void {
  const base = name.endsWith(".service") ? name.slice(0, -".service".length) : name;
  if (own.includes(base)) throw new OwnServiceRefused(name, manager);
  refuseOption("service name", name);
}
