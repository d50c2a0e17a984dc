/**
 * Content by reference over the link (DESIGN.md §19, §20): the mesh's object store on a
 * real nats-server (the stand-in control plane puts objects), read by a node with its
 * own key on its own subject and answered by the control plane, only for the objects
 * its declaration names: fetch, cache, tampered object and missing object refused, and
 * the node can read but never write or delete objects, nor read the stream itself.
 */
import assert from "node:assert/strict";
import { posix } from "node:path";
import { connect, type NatsConnection, nkeyAuthenticator } from "@nats-io/transport-node";
import { brokerTls } from "../src/link/connection.ts";
import { caTrust } from "../src/link/trust.ts";
import { objectStoreSource } from "../src/link/object_source.ts";
import {
  CONTENT_STREAM,
  CONTENT_SUBJECTS,
  OBJECT_READS,
  subjectsOf,
} from "../src/link/subjects.ts";
import { ContentCache, contentResolver, type ContentSource } from "../src/store/content.ts";
import { sha256Hex } from "../src/declaration/canonical.ts";
import { runHost, type Scratch, scratch } from "./_helpers.ts";
import { type Mesh, spawnHost, startMesh, until } from "./_mesh.ts";

const BYTES = new Uint8Array(5 * 1024 * 1024 + 123).map((_, i) => (i * 131 + (i >> 9)) & 0xff);

async function enrol(mesh: Mesh, node: string, s: Scratch): Promise<void> {
  const run = await runHost(["enrol", "--token", "-"], {
    env: s.env,
    stdin: await mesh.control.mintToken(node),
  });
  assert.equal(run.code, 0, run.stderr);
}

/** A connection as the node enrolled in `s` (its own key, its own inbox). */
async function connectAs(mesh: Mesh, node: string, s: Scratch): Promise<NatsConnection> {
  const state = await mesh.control.state();
  const seed = (await Deno.readTextFile(posix.join(s.stateDir, "node.nk"))).trim();
  return await connect({
    servers: state.url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    inboxPrefix: subjectsOf(node).inboxPrefix,
    tls: brokerTls({ url: state.url, trust: caTrust(state.caPem) }),
    reconnect: false,
  });
}

/**
 * The control plane declares files by these digests to `node` (a node reads exactly the
 * objects its declaration names); no host runs here, so nothing is applied.
 */
async function declareObjects(mesh: Mesh, node: string, objects: [string, number][]) {
  await mesh.control.declare(node, {
    version: 1,
    resources: objects.map(([contentSha256, size], i) => ({
      type: "file",
      id: `f${i}`,
      path: `/srv/f${i}`,
      contentSha256,
      size,
      mode: "0644",
      owner: "root",
      group: "root",
    })),
  });
}

const sourceOver = (nc: NatsConnection, node: string): ContentSource =>
  objectStoreSource(node, (subject, body) => nc.request(subject, body, { timeout: 10_000 }));

Deno.test("a node fetches an object by digest from the mesh's object store; the cache serves it next", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrol(mesh, "node-a", s);
  const sha = await mesh.control.putContent(BYTES);
  assert.equal(sha, await sha256Hex(BYTES));
  const missing = "cd".repeat(32);
  await declareObjects(mesh, "node-a", [[sha, BYTES.length], [missing, 10]]);
  const nc = await connectAs(mesh, "node-a", s);
  try {
    const resolve = contentResolver(new ContentCache(s.stateDir), [sourceOver(nc, "node-a")]);
    assert.deepEqual(await resolve(sha, BYTES.length, "/srv/big.bin"), BYTES);
    assert.deepEqual(await Deno.readFile(`${s.stateDir}/content/${sha}`), BYTES);
    // Cached: a source that fails is never asked.
    const failing: ContentSource = {
      name: "nothing",
      get: () => Promise.reject(new Error("asked")),
    };
    const cached = contentResolver(new ContentCache(s.stateDir), [failing]);
    assert.deepEqual(await cached(sha, BYTES.length, "/srv/big.bin"), BYTES);

    // A missing object: no source holds it, and the error names the file and the store.
    assert.equal(await sourceOver(nc, "node-a").get(missing, 10), null);
    await assert.rejects(
      resolve(missing, 10, "/srv/gone.bin"),
      /the content of \/srv\/gone\.bin \(sha256 cdcd.*, 10 bytes\) is in none of its sources: the mesh's object store/,
    );
    // Declared with another size: refused without reading its chunks.
    await assert.rejects(
      resolve(sha, BYTES.length + 1, "/srv/big.bin"),
      /from the mesh's object store .* is not what was declared: not \d+ bytes/,
    );
  } finally {
    await nc.close();
  }
});

Deno.test("an object a replica does not hold yet at the first ask (404) is asked for again and fetched", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrol(mesh, "node-c", s);
  const first = BYTES.subarray(0, 300_000);
  const firstSha = await sha256Hex(first);
  const second = BYTES.subarray(1, 300_001);
  const secondSha = await sha256Hex(second);
  await declareObjects(mesh, "node-c", [[firstSha, first.length], [secondSha, second.length]]);
  const nc = await connectAs(mesh, "node-c", s);
  try {
    await mesh.control.putContent(new TextEncoder().encode("the store exists"));
    // The real broker answers 404 (the object is not there); the object arrives
    // before the next ask, as a lagging replica catches up.
    const lagging = (retryMs: number[], bytes: Uint8Array) => {
      let arrived: Promise<string> | undefined;
      return objectStoreSource("node-c", async (subject, body) => {
        const reply = await nc.request(subject, body, { timeout: 10_000 });
        if (reply.headers?.code === 404) arrived ??= mesh.control.putContent(bytes);
        await arrived;
        return reply;
      }, retryMs);
    };
    // Compared by digest: a failed deepEqual of 300 kB would take minutes to print.
    const digestOf = async (got: Uint8Array | null | symbol) =>
      got instanceof Uint8Array ? await sha256Hex(got) : String(got);
    assert.equal(
      await digestOf(await lagging([50, 50], first).get(firstSha, first.length)),
      firstSha,
    );
    // The same first answer without a second ask: missing.
    assert.equal(await lagging([], second).get(secondSha, second.length), null);
    assert.equal(
      await digestOf(await sourceOver(nc, "node-c").get(secondSha, second.length)),
      secondSha,
    );
  } finally {
    await nc.close();
  }
});

/** SIGSTOP `pid` and wait until every thread of it is stopped (state T in /proc). */
async function stopped(pid: number): Promise<void> {
  Deno.kill(pid, "SIGSTOP");
  for (;;) {
    const states: string[] = [];
    for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
      const stat = await Deno.readTextFile(`/proc/${pid}/task/${task.name}/stat`).catch(() => "");
      states.push(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
    }
    if (states.every((state) => state === "T")) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

Deno.test("an answer that does not come in time is asked for again; answers lost every time fail with what to check", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrol(mesh, "node-d", s);
  const bytes = BYTES.subarray(0, 400_000);
  const sha = await mesh.control.putContent(bytes);
  await declareObjects(mesh, "node-d", [[sha, bytes.length]]);
  const nc = await connectAs(mesh, "node-d", s);
  try {
    // The broker stops answering (SIGSTOP) while chunk 1 is asked for, as an answer
    // lost while it reloads is never heard; the client times out for real.
    const losing = (lose: (subject: string) => boolean) => {
      const asked: string[] = [];
      const source = objectStoreSource("node-d", async (subject, body) => {
        asked.push(subject);
        if (!lose(subject)) return await nc.request(subject, body, { timeout: 10_000 });
        await stopped(mesh.broker.pid);
        try {
          return await nc.request(subject, body, { timeout: 300 });
        } finally {
          Deno.kill(mesh.broker.pid, "SIGCONT");
        }
      });
      return { source, asked };
    };
    const chunk1 = OBJECT_READS.chunk("node-d", sha, 1);
    let lost = 0;
    const once = losing((subject) => subject === chunk1 && lost++ < 2);
    const got = await once.source.get(sha, bytes.length);
    assert.ok(got instanceof Uint8Array);
    assert.equal(await sha256Hex(got), sha);
    assert.equal(once.asked.filter((x) => x === chunk1).length, 3, "chunk 1 asked three times");

    const never = losing((subject) => subject === chunk1);
    await assert.rejects(
      never.source.get(sha, bytes.length),
      new RegExp(
        `the object store did not answer the read of ${
          chunk1.replaceAll(".", "\\.").replaceAll("$", "\\$")
        } \\(asked 3 times; timeout\\): check that the broker is up`,
      ),
    );
    assert.equal(never.asked.filter((x) => x === chunk1).length, 3);
  } finally {
    await nc.close();
  }
});

Deno.test("a tampered object (other bytes under the declared digest) is refused and not cached", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrol(mesh, "node-a", s);
  const wanted = await sha256Hex(BYTES);
  const other = BYTES.slice();
  other[4096] ^= 0x55;
  await mesh.control.putContent(other, { name: wanted });
  await declareObjects(mesh, "node-a", [[wanted, BYTES.length]]);
  const nc = await connectAs(mesh, "node-a", s);
  try {
    const resolve = contentResolver(new ContentCache(s.stateDir), [sourceOver(nc, "node-a")]);
    await assert.rejects(
      resolve(wanted, BYTES.length, "/srv/app.bin"),
      /the content of \/srv\/app\.bin from the mesh's object store .* is not what was declared: its sha256 is [0-9a-f]{64}, the declaration names/,
    );
    assert.deepEqual(await new ContentCache(s.stateDir).digests(), []);
  } finally {
    await nc.close();
  }
});

Deno.test("a node can read the mesh's objects but never write, replace or delete them", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrol(mesh, "node-a", s);
  const sha = await mesh.control.putContent(BYTES.subarray(0, 1000));
  await declareObjects(mesh, "node-a", [[sha, 1000]]);
  const nc = await connectAs(mesh, "node-a", s);
  const errors: string[] = [];
  (async () => {
    for await (const st of nc.status()) if (st.type === "error") errors.push(String(st.error));
  })();
  try {
    for (
      const subject of [
        `$JS.API.STREAM.DELETE.${CONTENT_STREAM}`,
        `$JS.API.STREAM.PURGE.${CONTENT_STREAM}`,
        `$JS.API.STREAM.MSG.DELETE.${CONTENT_STREAM}`,
        `$JS.API.STREAM.UPDATE.${CONTENT_STREAM}`,
        `$JS.API.STREAM.CREATE.${CONTENT_STREAM}`,
        CONTENT_SUBJECTS.meta(sha),
        CONTENT_SUBJECTS.chunk(sha, 0),
        CONTENT_SUBJECTS.get(CONTENT_SUBJECTS.meta(sha)),
        CONTENT_SUBJECTS.get(CONTENT_SUBJECTS.chunk(sha, 0)),
      ]
    ) {
      await assert.rejects(
        nc.request(subject, JSON.stringify({ seq: 1 }), { timeout: 5000 }),
        /Permissions Violation for Publish/,
        subject,
      );
    }
    // A plain publish (no reply) of a replacement description is dropped by the broker too.
    nc.publish(CONTENT_SUBJECTS.meta(sha), JSON.stringify({ size: 1, nuid: "forged" }));
    await nc.flush();
    await until(
      "the broker's refusal of the forged description",
      () =>
        errors.some((e) => /Permissions Violation for Publish to "mesh\.obj\./.test(e)) ||
        undefined,
      10_000,
    );
  } finally {
    await nc.close();
  }
  // The object is intact: read again, as a node would.
  const again = await connectAs(mesh, "node-a", s);
  try {
    assert.deepEqual(await sourceOver(again, "node-a").get(sha, 1000), BYTES.subarray(0, 1000));
  } finally {
    await again.close();
  }
});

Deno.test("run: a declaration pushed over the link with a file by digest gets its bytes from the object store", async () => {
  await using mesh = await startMesh();
  await using s = await scratch();
  await enrol(mesh, "node-a", s);
  const sha = await mesh.control.putContent(BYTES);
  await using host = await spawnHost(["run", "--heartbeat-interval", "1"], s.env);
  await host.waitLog(/link: up to /);
  const target = `${s.root}/big.bin`;
  const resource = {
    type: "file",
    id: "big",
    path: target,
    contentSha256: sha,
    size: BYTES.length,
    mode: "0644",
    owner: "root",
    group: "root",
  };
  await mesh.control.declare("node-a", { version: 1, resources: [resource] });
  const report = await mesh.control.waitReport(
    "node-a",
    (r) => r.kind === "apply" && r.serial === 1,
  );
  assert.equal(report.outcome, "converged", JSON.stringify(report).slice(0, 1000));
  assert.deepEqual(await Deno.readFile(target), BYTES);
  assert.deepEqual(await new ContentCache(s.stateDir).digests(), [sha]);
});

Deno.test("a node reads only the objects its declaration names: node-a asks for node-b's object on its own subject, by node-b's subject, from the stream by digest and by sequence; each is refused", async () => {
  await using mesh = await startMesh();
  await using a = await scratch();
  await using b = await scratch();
  await enrol(mesh, "node-a", a);
  await enrol(mesh, "node-b", b);
  const secret = new TextEncoder().encode("node-b's private key, for node-b only\n");
  const shared = BYTES.subarray(0, 4000);
  const secretSha = await mesh.control.putContent(secret);
  const sharedSha = await mesh.control.putContent(shared);
  await declareObjects(mesh, "node-a", [[sharedSha, shared.length]]);
  await declareObjects(mesh, "node-b", [[secretSha, secret.length], [sharedSha, shared.length]]);
  const na = await connectAs(mesh, "node-a", a);
  const nb = await connectAs(mesh, "node-b", b);
  try {
    // node-b reads its own object; both read the one both are declared.
    assert.deepEqual(await sourceOver(nb, "node-b").get(secretSha, secret.length), secret);
    assert.deepEqual(await sourceOver(na, "node-a").get(sharedSha, shared.length), shared);
    assert.deepEqual(await sourceOver(nb, "node-b").get(sharedSha, shared.length), shared);

    // On its own subject: the control plane answers 403, its declaration names it not.
    for (
      const subject of [
        OBJECT_READS.meta("node-a", secretSha),
        OBJECT_READS.chunk("node-a", secretSha, 0),
      ]
    ) {
      const reply = await na.request(subject, "", { timeout: 5000 });
      assert.equal(reply.headers?.code, 403, subject);
      assert.match(
        reply.headers?.description ?? "",
        /the current declaration of node-a does not name object/,
      );
      assert.equal(reply.data.length, 0);
    }
    await assert.rejects(
      sourceOver(na, "node-a").get(secretSha, secret.length),
      /the control plane refused to give object [0-9a-f]{64} to this node: the current declaration of node-a does not name/,
    );
    // As node-b, and from the stream by digest: the broker refuses the publish.
    for (
      const subject of [
        OBJECT_READS.meta("node-b", secretSha),
        OBJECT_READS.chunk("node-b", secretSha, 0),
        CONTENT_SUBJECTS.get(CONTENT_SUBJECTS.meta(secretSha)),
        CONTENT_SUBJECTS.get(CONTENT_SUBJECTS.chunk(secretSha, 0)),
        `$JS.API.DIRECT.GET.${CONTENT_STREAM}.mesh.obj.${secretSha}.>`,
      ]
    ) {
      await assert.rejects(
        na.request(subject, "", { timeout: 5000 }),
        /Permissions Violation for Publish/,
        subject,
      );
    }
    // By sequence, walking the stream (the body form of the direct get), with and
    // without a subject filter, and the next-by-subject form: refused, whatever it names.
    const walked: string[] = [];
    for (let seq = 1; seq <= 12; seq++) {
      for (
        const body of [
          { seq },
          { seq, next_by_subj: "mesh.obj.>" },
          { last_by_subj: CONTENT_SUBJECTS.chunk(secretSha, 0) },
        ]
      ) {
        try {
          const reply = await na.request(
            `$JS.API.DIRECT.GET.${CONTENT_STREAM}`,
            JSON.stringify(body),
            { timeout: 5000 },
          );
          walked.push(`${JSON.stringify(body)} -> ${reply.headers?.code ?? 200} ${reply.string()}`);
        } catch (error) {
          assert.match(String(error), /Permissions Violation for Publish/);
        }
      }
    }
    assert.deepEqual(walked, [], "the broker answered node-a a direct get by sequence");
    // A body on its own read is ignored: the control plane answers the part the subject names.
    const bodied = await na.request(
      OBJECT_READS.chunk("node-a", secretSha, 0),
      JSON.stringify({ seq: 1 }),
      { timeout: 5000 },
    );
    assert.equal(bodied.headers?.code, 403);
    // Nor through the stream's other API subjects.
    for (const api of ["STREAM.MSG.GET", "STREAM.INFO", "CONSUMER.CREATE"]) {
      await assert.rejects(
        na.request(`$JS.API.${api}.${CONTENT_STREAM}`, JSON.stringify({ seq: 1 }), {
          timeout: 5000,
        }),
        /Permissions Violation for Publish/,
      );
    }

    // A later declaration that no longer names an object withdraws it, and one that
    // names a new object grants it: no server's configuration changes for either.
    const reloads = () =>
      Deno.readTextFile(posix.join(mesh.dir, "nats.log")).then((t) =>
        t.split("Reloaded server configuration").length
      );
    const before = await reloads();
    await declareObjects(mesh, "node-b", [[sharedSha, shared.length]]);
    await assert.rejects(
      sourceOver(nb, "node-b").get(secretSha, secret.length),
      /the control plane refused to give object/,
    );
    assert.deepEqual(await sourceOver(nb, "node-b").get(sharedSha, shared.length), shared);
    await declareObjects(mesh, "node-a", [[secretSha, secret.length]]);
    assert.deepEqual(await sourceOver(na, "node-a").get(secretSha, secret.length), secret);
    assert.equal(await reloads(), before, "no reload for what a declaration names");
  } finally {
    await na.close();
    await nb.close();
  }
});
