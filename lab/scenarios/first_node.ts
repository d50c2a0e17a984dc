// Seed 001: "The first node ... applies the bundle it carries, the control plane comes up on
// top of it, and from that moment it takes declarations like every other node. Its
// specialness is temporary and self-erasing." On a Debian machine the shipped bundle raises
// the substrate alone (podman, which Debian's image already has, podman.socket, the carried
// image loaded by an action, a container from it); the node enrols, and the control plane's first declaration carries the same
// substrate (all but the action, which only a bundle may run): nothing changes, the same
// container runs on, nothing is removed, the action is forgotten. A later declaration that
// drops them: the container the host made is removed, the package and the service are
// forgotten (left as they are), as the rules say.
import { assertPackage, assertUnit, fail, run, type Scenario, type Step } from "../lib/scenario.ts";
import { waitFor } from "../lib/scenario.ts";
import {
  assertApplies,
  enrol,
  HOST_UNIT_FILES,
  mesh,
  meshUp,
  startHost,
} from "../mesh_steps/link_steps.ts";
import { declare } from "../mesh_steps/link_steps.ts";
import { assertHostContainer, assertServiceSaid, unmaskPodman } from "./_ship.ts";

const SHIPPED = JSON.parse(
  await Deno.readTextFile(new URL("../../packaging/debian/substrate.lock", import.meta.url)),
) as { resources: Record<string, unknown>[] };
const CONTAINER = SHIPPED.resources.find((r) => r.type === "container")!;
const NAME = String(CONTAINER.name);
const IMAGE = String(CONTAINER.image);

/** The control plane's first declaration: the bundle's substrate, all but its action. */
const HANDOVER = {
  version: 1,
  resources: SHIPPED.resources.filter((r) => r.type !== "action"),
};
/** A later declaration: the substrate is no longer the mesh's business here. */
const DROPPED = { version: 1, resources: [] };

/** The node's last apply report for `serial`: these counts, and these outcomes by id. */
function assertReport(
  node: string,
  serial: number,
  counts: Record<string, number>,
  outcomes: Record<string, string>,
): Step {
  return {
    title: `assert ${node}'s report of serial ${serial}: ${JSON.stringify(counts)}, ` +
      Object.entries(outcomes).map(([id, o]) => `${id} ${o}`).join(", "),
    async run(ctx) {
      const reports = JSON.parse(await mesh(ctx, ["reports", node])) as Record<string, unknown>[];
      const report = reports.filter((r) => r.kind === "apply" && r.serial === serial).at(-1);
      if (!report) fail(`a report of serial ${serial}`, "none");
      const seen = Object.fromEntries(
        (report.results as { id: string; outcome: string }[]).map((r) => [r.id, r.outcome]),
      );
      const got = { counts: report.counts, outcomes: seen };
      const want = { counts, outcomes };
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        fail(JSON.stringify(want), JSON.stringify(got));
      }
    },
  };
}

/** The first node: no mesh, so it raises the substrate from its bundle; then it hands over. */
export const scenario: Scenario = {
  name: "first-node",
  summary: "a machine with no mesh raises the shipped substrate bundle alone (podman, the " +
    "carried image, a container); it enrols, and the control plane's first declaration of the " +
    "same substrate changes nothing (the same container, nothing removed, the action " +
    "forgotten); a declaration that drops it removes the container the host made and forgets " +
    "the package and the service",
  broker: true,
  machines: {
    first: {
      flavour: "systemd",
      host: true,
      containers: true,
      files: HOST_UNIT_FILES,
    },
  },
  steps: [
    unmaskPodman("first"),
    run("first", ["podman", "container", "exists", NAME], { code: 1 }),
    startHost("first"),
    waitFor(
      // podman is the Debian image's own: installed already, so unchanged.
      assertServiceSaid("first", "apply (start, bundle): converged: 3 changed, 1 unchanged", 1),
      120,
    ),
    run("first", ["nox-mesh-host", "status"], { stdoutIncludes: "not enrolled" }),
    assertPackage("first", "podman"),
    assertUnit("first", "podman.socket", { enabled: true, running: true }),
    assertHostContainer(NAME, IMAGE, "first", "record"),
    meshUp(),
    enrol("first", "first"),
    declare("first", HANDOVER),
    waitFor(assertApplies("first", [1]), 60),
    assertReport(
      "first",
      1,
      { changed: 0, unchanged: 3, removed: 0, forgotten: 1, failed: 0 },
      {
        "container-runtime": "unchanged",
        "container-runtime-service": "unchanged",
        "pause": "unchanged",
        "pause-image": "forgotten",
      },
    ),
    assertHostContainer(NAME, IMAGE, "first", "same"),
    run("first", ["nox-mesh-host", "status"], { stdoutIncludes: "link         up since" }),
    // From now on the substrate is the mesh's: a declaration that drops it releases it.
    declare("first", DROPPED),
    waitFor(assertApplies("first", [1, 2]), 60),
    assertReport(
      "first",
      2,
      { changed: 0, unchanged: 0, removed: 1, forgotten: 2, failed: 0 },
      {
        "pause": "removed",
        "container-runtime-service": "forgotten",
        "container-runtime": "forgotten",
      },
    ),
    run("first", ["podman", "container", "exists", NAME], { code: 1 }),
    assertPackage("first", "podman"),
    assertUnit("first", "podman.socket", { enabled: true, running: true }),
  ],
};
