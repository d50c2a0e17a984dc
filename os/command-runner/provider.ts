/** The programs of `action` resources: everything about this provider (os/provider.ts). */
import type { ProviderDescriptor } from "../provider.ts";
import { commandRunner } from "./mod.ts";

/**
 * The action runner: always used. Its programs are the shipped bundle's actions (run[0],
 * verify[0]), which the build adds to allow-run from the bundle itself
 * (packaging/permissions.ts actionPrograms).
 */
export const PROVIDER: ProviderDescriptor<"commands"> = {
  folder: "command-runner",
  port: "commands",
  names: ["commands"],
  builds: ["every"],
  open: () => commandRunner(),
};
