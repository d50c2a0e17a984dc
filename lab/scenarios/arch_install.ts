import {
  assertFile,
  assertPackage,
  assertUnit,
  run,
  type Scenario,
  waitFor,
  writeFile,
} from "../lib/scenario.ts";
import { ARCH_LIKE_CONFIG } from "../lib/host.ts";
import { CARRIED_RUNTIME, packageFileName } from "../lib/host_builds.ts";
import { assertLaunched, assertServiceSaid, CURRENT, STATE, unmaskPodman } from "./_ship.ts";
import {
  assertBashCompletes,
  assertManPages,
  assertSignaturesRequired,
  tamperedPackageRefused,
} from "./_distro.ts";

/** The host installed as a user installs it on Arch, and started by systemd through the launcher. */
export const scenario: Scenario = {
  name: "arch-install",
  summary: "pacman -S nox-mesh-host from the lab repository (no deno: it carries its own), " +
    "systemctl enable --now: the launcher runs the host on its runtime under the Arch " +
    "permission set; with no identity it " +
    "applies the shipped bundle; known-good written, failures cleared, rollback copy kept; " +
    "pacman requires signatures (lab packager key) and refuses a tampered package; licence, " +
    "man pages and bash completion installed and working",
  machines: {
    // The shipped bundle runs a container (scenario substrate shows it in detail).
    arch: {
      flavour: "systemd",
      hostFrom: "pacman",
      containers: true,
      files: { [ARCH_LIKE_CONFIG.path]: ARCH_LIKE_CONFIG.text },
    },
  },
  steps: [
    assertSignaturesRequired("arch"),
    run("arch", ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"]),
    assertPackage("arch", "nox-mesh-host", { version: `${CURRENT}-1` }),
    // It carries its runtime: no deno package is pulled (the lab repository offers none).
    assertPackage("arch", "deno", { absent: true }),
    assertFile("arch", CARRIED_RUNTIME, { type: "file" }),
    assertFile("arch", "/usr/lib/nox-mesh-host/deno.LICENSE", { type: "file" }),
    run("arch", ["nox-mesh-host", "version"], { stdoutIncludes: `nox-mesh-host ${CURRENT}\n` }),
    run("arch", ["nox-mesh-host", "version", "--json"], { stdoutIncludes: `"form":"bundled"` }),
    assertFile("arch", "/usr/share/licenses/nox-mesh-host/LICENSE", { type: "file" }),
    assertManPages("arch", {
      "nox-mesh-host": "/usr/share/man/man8/nox-mesh-host.8.gz",
      "nox-mesh-host-launch": "/usr/share/man/man8/nox-mesh-host-launch.8.gz",
      "host.json": "/usr/share/man/man5/host.json.5.gz",
      "nox-mesh-host-declaration": "/usr/share/man/man5/nox-mesh-host-declaration.5.gz",
    }),
    assertBashCompletes("arch"),
    // As if an earlier start had failed twice: only the host's first reconcile clears it.
    writeFile("arch", `${STATE}/failures`, "2\n"),
    unmaskPodman("arch"),
    run("arch", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    assertUnit("arch", "nox-mesh-host", { enabled: true, running: true }),
    waitFor(assertFile("arch", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 60),
    assertFile("arch", `${STATE}/failures`, { absent: true }),
    assertLaunched("arch"),
    assertServiceSaid("arch", "not enrolled: holding the machine to the store (or the bundle)"),
    assertServiceSaid("arch", `run: ${CURRENT} completed a reconcile: recorded as known-good`),
    run("arch", ["nox-mesh-host", "status"], {
      stdoutIncludes: "/usr/share/nox-mesh-host/substrate.lock",
    }),
    assertFile("arch", `${STATE}/rollback/${CURRENT}/${packageFileName("current")}`, {
      type: "file",
    }),
    assertServiceSaid("arch", `kept the package file of nox-mesh-host ${CURRENT}`, 1),
    // Last: it changes the lab repository.
    tamperedPackageRefused("arch"),
  ],
};
