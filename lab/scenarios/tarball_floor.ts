import { assertFile, assertUnit, run, type Scenario, type Step, waitFor } from "../lib/scenario.ts";
import { CHECKOUT } from "../lib/bundle.ts";
import { TARBALL_INSTALL } from "../lib/host.ts";
import { assertApplies, declare, enrol, meshUp } from "../mesh_steps/link_steps.ts";
import { files, srvFile } from "./_link.ts";
import { assertLaunched, CURRENT, STATE } from "./_ship.ts";
import { runtimePins } from "../../packaging/tarball/runtime.ts";

/** The README's tarball install lines, exactly as written (the block after its marker). */
export function readmeInstallLines(readme: string): string[] {
  const marker = readme.indexOf("<!-- tarball-install:");
  const block = marker === -1 ? null : /```sh\n([\s\S]*?)```/.exec(readme.slice(marker));
  if (!block) throw new Error("README.md has no tarball-install block after its marker");
  return block[1].trim().split("\n");
}

/** The README's lines, exactly as written. */
const README_LINES = readmeInstallLines(Deno.readTextFileSync(`${CHECKOUT}/README.md`));

const DENO = (await runtimePins()).version;

/** No deno anywhere on the machine: none on PATH, no file named deno outside the host's own. */
export function assertNoDeno(machine: string, when: string): Step {
  const own = TARBALL_INSTALL.deno;
  return run(machine, [
    "sh",
    "-c",
    'if command -v deno; then exit 1; fi; found=$(find / -xdev -name deno -type f ! -path "$1") ' +
    '&& [ -z "$found" ] || { echo "$found"; exit 1; }',
    `no deno ${when}`,
    own,
  ]);
}

/**
 * The README's install lines, run on a machine as written, the release's address put where
 * the lab serves the tarball (default /lab/tarball, this host's architecture's build).
 */
export function installFromReadme(m: string, release = "file:///lab/tarball"): Step[] {
  return README_LINES.map((line) =>
    line.replaceAll("https://<release>", release).replaceAll("<version>", CURRENT)
  ).map((line) => run(m, ["sh", "-c", `set -eu\n${line}`]));
}

/** Steps on one machine: the README's lines, then the host as its init starts it. */
function floor(m: string): Step[] {
  return [
    assertNoDeno(m, "before the install"),
    ...installFromReadme(m),
    assertNoDeno(m, "on PATH after the install"),
    assertUnit(m, "nox-mesh-host", { running: true, enabled: true }),
    waitFor(assertFile(m, `${STATE}/known-good`, { content: `${CURRENT}\n` }), 90),
    assertLaunched(m),
    run(m, ["nox-mesh-host", "version", "--json"], {
      stdoutIncludes: `"version":"${CURRENT}","form":"bundled","deno":"${DENO}"`,
    }),
    // With no mesh it holds the bundle it carries, found where the tarball put it.
    run(m, ["nox-mesh-host", "status"], {
      stdoutIncludes: "bundle /usr/local/share/nox-mesh-host/substrate.lock",
    }),
    waitFor(
      assertFile(m, `${STATE}/rollback/${CURRENT}/nox-mesh-host-${CURRENT}.tar.gz`, {
        type: "file",
      }),
      60,
    ),
  ];
}

/** The floor: the tarball alone, on machines with no deno and no package of the host. */
export const scenario: Scenario = {
  name: "tarball-floor",
  summary: "a systemd and an OpenRC machine with no deno anywhere get only the tarball: the " +
    "README's two lines (curl | tar -xz -C /usr/local, nox-mesh-host-install-init) install it; " +
    "the init runs the launcher, which runs the host on the runtime the tarball carries under " +
    "the tarball set; it applies its bundle, keeps a rollback copy, enrols and applies a " +
    "declaration the control plane signed and pushed",
  broker: true,
  machines: {
    sd: { flavour: "systemd", hostFrom: "tarball", deno: false },
    rc: { flavour: "openrc", hostFrom: "tarball", deno: false },
  },
  steps: [
    ...floor("sd"),
    ...floor("rc"),
    meshUp(),
    enrol("sd", "sd"),
    enrol("rc", "rc"),
    declare("sd", files(srvFile("floor", "/srv/floor", "pushed to a tarball node\n"))),
    declare("rc", files(srvFile("floor", "/srv/floor", "pushed to a tarball node\n"))),
    waitFor(assertFile("sd", "/srv/floor", { content: "pushed to a tarball node\n" }), 60),
    waitFor(assertFile("rc", "/srv/floor", { content: "pushed to a tarball node\n" }), 60),
    waitFor(assertApplies("sd", [1]), 30),
    waitFor(assertApplies("rc", [1]), 30),
  ],
};
