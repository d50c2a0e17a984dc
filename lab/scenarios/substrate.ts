// Seed 001, stage 2: one host raises the substrate alone. A fresh Arch-like machine with
// no mesh installs the host package; the host, with no identity, applies the bundle the
// package ships (packaging/arch/substrate.lock): the container runtime package, its
// service, the image the package carries (an action loads it), a container from it.
import {
  apply,
  assertFile,
  assertPackage,
  assertUnit,
  fail,
  run,
  type Scenario,
  type Step,
  waitFor,
} from "../lib/scenario.ts";
import { ARCH_LIKE_CONFIG } from "../lib/host.ts";
import { PODMAN_STAND_IN } from "../lib/repo.ts";
import { IMAGE_DIR, IMAGE_FILE, IMAGE_NAME, pauseImage } from "../../packaging/image.ts";
import {
  assertHostContainer,
  assertLaunched,
  assertServiceSaid,
  CURRENT,
  STATE,
  unmaskPodman,
} from "./_ship.ts";

const IMAGE = `${IMAGE_NAME}@${(await pauseImage()).digest}`;
const CONTAINER = "nox-mesh-pause";
const SHIPPED = new URL("../../packaging/arch/substrate.lock", import.meta.url);
/** A digest no image has: the broken bundle's verify can never pass. */
const NOWHERE = `${IMAGE_NAME}@sha256:${"0".repeat(64)}`;
const BROKEN_FILE = "/srv/broken-substrate.lock";

/** A copy of the shipped bundle whose action's verify names an image that never exists. */
function writeBrokenBundle(machine: string): Step {
  return {
    title: `write ${BROKEN_FILE} on ${machine}: the shipped bundle, its action's verify ` +
      "pinned to a digest no image has",
    async run(ctx) {
      const bundle = JSON.parse(await Deno.readTextFile(SHIPPED));
      const action = bundle.resources.find((r: { type: string }) => r.type === "action");
      if (!action || action.verify.at(-1) !== IMAGE) fail(`an action verifying ${IMAGE}`, "none");
      action.verify = [...action.verify.slice(0, -1), NOWHERE];
      await ctx.machine(machine).writeFile(BROKEN_FILE, JSON.stringify(bundle, null, 2), "0644");
    },
  };
}

/** The first node of a mesh, alone: the package brings the substrate up by itself. */
export const scenario: Scenario = {
  name: "substrate",
  summary: "a fresh Arch-like machine, no mesh: pacman -S nox-mesh-host and enable --now raise " +
    "the shipped bundle alone (podman package, podman.socket, the carried image loaded by an " +
    "action and verified, a container from it); a restart changes nothing; a bundle whose " +
    "verify keeps failing fails the apply and says so",
  machines: {
    // Arch-like: the subject is the Arch package's bundle, whose podman comes from pacman.
    fresh: {
      flavour: "systemd",
      hostFrom: "pacman",
      containers: true,
      files: { [ARCH_LIKE_CONFIG.path]: ARCH_LIKE_CONFIG.text },
    },
  },
  steps: [
    // Nothing of the substrate is there yet.
    assertPackage("fresh", "podman", { absent: true }),
    run("fresh", ["podman", "image", "exists", IMAGE], { code: 1 }),
    run("fresh", ["podman", "container", "exists", CONTAINER], { code: 1 }),
    unmaskPodman("fresh"),
    assertUnit("fresh", "podman.socket", { enabled: false, running: false }),
    run("fresh", ["pacman", "-Sy", "--noconfirm", "--noprogressbar", "nox-mesh-host"]),
    assertFile("fresh", `${IMAGE_DIR}/${IMAGE_FILE}`, { type: "file", mode: "0644" }),
    run("fresh", ["systemctl", "enable", "--now", "nox-mesh-host"]),
    waitFor(assertFile("fresh", `${STATE}/known-good`, { content: `${CURRENT}\n` }), 120),
    assertLaunched("fresh"),
    assertServiceSaid("fresh", "not enrolled: holding the machine to the store (or the bundle)"),
    assertServiceSaid("fresh", "converged: 4 changed, 0 unchanged, 0 removed, 0 failed", 1),
    run("fresh", ["nox-mesh-host", "status"], {
      stdoutIncludes: "bundle /usr/share/nox-mesh-host/substrate.lock",
    }),
    assertPackage("fresh", "podman", { version: PODMAN_STAND_IN.version }),
    assertFile("fresh", PODMAN_STAND_IN.marker, { type: "file" }),
    assertUnit("fresh", "podman.socket", { enabled: true, running: true }),
    run("fresh", ["podman", "image", "exists", IMAGE]),
    assertHostContainer(CONTAINER, IMAGE, "fresh", "record"),
    // The second start: the same bundle against the machine it made changes nothing.
    run("fresh", ["systemctl", "restart", "nox-mesh-host"]),
    waitFor(
      assertServiceSaid("fresh", "converged: 0 changed, 4 unchanged, 0 removed, 0 failed", 1),
      90,
    ),
    assertServiceSaid("fresh", "converged: 4 changed", 1),
    assertHostContainer(CONTAINER, IMAGE, "fresh", "same"),
    // A verify that still fails after its run fails the apply, naming the action and why.
    writeBrokenBundle("fresh"),
    apply("fresh", BROKEN_FILE, {
      bundle: true,
      outcome: "failed",
      failed: 1,
      errorIncludes: `verify \`/usr/bin/podman image exists ${NOWHERE}\` exited 1`,
    }),
  ],
};
