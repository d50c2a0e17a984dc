import { assertFails, fail, run, type Scenario, type Step, waitFor } from "../lib/scenario.ts";
import {
  assertApplies,
  assertLastApply,
  declare,
  enrol,
  HOST_UNIT_FILES,
  meshUp,
  putContent,
  startHost,
} from "../mesh_steps/link_steps.ts";

/** 5 MiB and a bit, not one repeated block. */
const BIG = new Uint8Array(5 * 1024 * 1024 + 17).map((_, i) => (i * 131 + (i >> 11)) & 0xff);
/** Other bytes of the same size, put under BIG's digest to stand for a tampered object. */
const TAMPERED = BIG.map((b, i) => i === 4096 ? b ^ 0x55 : b);
/** A small file whose object in the store is tampered before any node fetched it. */
const SMALL = new TextEncoder().encode("the genuine small file\n");
const FORGED = new TextEncoder().encode("the forged small file!\n");

const digests = { big: "", small: "" };

/** A file resource declared by digest. */
function byDigest(id: string, path: string, sha256: string, size: number) {
  return {
    type: "file",
    id,
    path,
    contentSha256: sha256,
    size,
    mode: "0644",
    owner: "root",
    group: "root",
  };
}

/** The control plane publishes files by digest to `node` (digests known once put). */
function declareByDigest(
  node: string,
  files: () => ReturnType<typeof byDigest>[],
  what: string,
): Step {
  return {
    title: `the control plane declares ${what} by digest to ${node}`,
    run: (ctx) => declare(node, { version: 1, resources: files() }).run(ctx),
  };
}

/** sha256sum of a file on a machine equals the digest `which` names. */
function assertDigest(machine: string, path: string, which: keyof typeof digests): Step {
  return {
    title: `assert ${path} on ${machine} has the declared SHA-256`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(["sha256sum", "--", path]);
      if (r.code !== 0) fail(`${path} to exist`, r.stderr.trim());
      const seen = r.stdout.trim().split(/\s+/)[0];
      if (seen !== digests[which]) fail(`sha256 ${digests[which]}`, seen);
    },
  };
}

/** The node keeps the content it fetched in its cache, named by digest. */
function assertCached(machine: string, which: keyof typeof digests): Step {
  return {
    title: `assert ${machine} cached the ${which} content by digest`,
    run: (ctx) =>
      run(machine, ["test", "-s", `/var/lib/mesh-host/content/${digests[which]}`]).run(ctx),
  };
}

const big = (path = "/srv/big.bin", id = "big") => byDigest(id, path, digests.big, BIG.length);

/** Content by reference through the mesh's object store (DESIGN.md §19). */
export const scenario: Scenario = {
  name: "content-ref",
  summary: "a 5 MiB file declared by digest reaches two nodes from the mesh's object store; a " +
    "tampered object is refused; a later apply of the same digest uses the node's cache",
  broker: true,
  machines: {
    alpha: { flavour: "systemd", host: true, files: HOST_UNIT_FILES },
    beta: { flavour: "systemd", host: true, files: HOST_UNIT_FILES },
  },
  steps: [
    meshUp(),
    putContent("a 5 MiB file", () => BIG, (d) => digests.big = d),
    enrol("alpha", "alpha"),
    enrol("beta", "beta"),
    startHost("alpha"),
    startHost("beta"),
    declareByDigest("alpha", () => [big()], "/srv/big.bin"),
    declareByDigest("beta", () => [big()], "/srv/big.bin"),
    waitFor(assertApplies("alpha", [1]), 90),
    waitFor(assertApplies("beta", [1]), 90),
    assertDigest("alpha", "/srv/big.bin", "big"),
    assertDigest("beta", "/srv/big.bin", "big"),
    assertCached("beta", "big"),
    // A tampered object: other bytes under the digest a declaration names.
    putContent("a small file", () => SMALL, (d) => digests.small = d),
    putContent(
      "forged bytes under the small file's digest",
      () => FORGED,
      () => {},
      () => digests.small,
    ),
    declareByDigest(
      "alpha",
      () => [big(), byDigest("small", "/srv/small.conf", digests.small, SMALL.length)],
      "/srv/big.bin and /srv/small.conf",
    ),
    waitFor(assertLastApply("alpha", 2, "failed", "is not what was declared"), 60),
    assertFails("alpha", ["test", "-e", "/srv/small.conf"]),
    // The big object is now replaced by forged bytes in the store: a second path with the
    // same digest converges all the same, so its bytes came from the node's cache.
    putContent(
      "forged bytes under the big file's digest",
      () => TAMPERED,
      () => {},
      () => digests.big,
    ),
    declareByDigest("beta", () => [big(), big("/srv/again.bin", "again")], "a second path"),
    waitFor(assertApplies("beta", [1, 2]), 60),
    assertDigest("beta", "/srv/again.bin", "big"),
  ],
};
