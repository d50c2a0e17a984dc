/**
 * A deliberately broken host build for the lab (scenario arch-rollback): it
 * answers `version` like the host, so a package manager and the launcher see an
 * ordinary version, and crashes on every other command, as a bad release would
 * on start. Built with the host's own packaging and permission set.
 */
import { PROGRAM, VERSION } from "../../../src/version.ts";

if (Deno.args[0] === "version") {
  console.log(`${PROGRAM} ${VERSION}`);
} else {
  console.error(`${PROGRAM} ${VERSION} (lab: deliberately broken build): crashing on start`);
  Deno.exit(70);
}
