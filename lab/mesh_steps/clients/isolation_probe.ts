// Runs INSIDE a lab machine (bundled by lab/mesh_steps/link_steps.ts), never in the host's own
// namespace. Usage: isolation_probe.js URL CA_FILE STATE_DIR OWN_NODE OTHER_NODE
// Connects as OWN_NODE with its own key and JWT (node.nk and node.jwt in STATE_DIR) and tries
// what the broker must refuse: the other node's catch-up, its last declaration by direct get
// (both forms), its live declarations (where the stream republishes them, and the stream's
// subject), its objects (on its subject, and from the object store itself), publishing its
// report and heartbeat, and the JetStream API (streams, consumers). Prints one JSON line: each
// attempt "ok" or the broker's refusal. It also sends messages whose reply subject points
// elsewhere: its own catch-up answered into the other node's push subject (which the broker
// routes: the other node must drop it) and into the stream's purge, and its own report and
// heartbeat with `$JS.API.STREAM.PURGE.MESH_DECL` as reply (the step then checks from the
// control plane that nothing changed, and that the other node applied and reported nothing).
import { connect } from "@nats-io/transport-node";
import { brokerTls, jwtAuth } from "../../../src/link/connection.ts";
import { caTrust } from "../../../src/link/trust.ts";
import { declarationGet, subjectsOf } from "../../../src/link/subjects.ts";

const [url, caFile, stateDir, own, other] = Deno.args;
const seed = new TextEncoder().encode((await Deno.readTextFile(`${stateDir}/node.nk`)).trim());
const jwt = (await Deno.readTextFile(`${stateDir}/node.jwt`)).trim();
const nc = await connect({
  servers: url,
  authenticator: jwtAuth(jwt, seed),
  inboxPrefix: subjectsOf(own).inboxPrefix,
  tls: brokerTls({ url, trust: caTrust(await Deno.readTextFile(caFile)) }),
  reconnect: false,
});
const errors: string[] = [];
(async () => {
  for await (const s of nc.status()) if (s.type === "error") errors.push(String(s.error.message));
})();
const outcome = async (work: () => Promise<unknown>) => {
  try {
    await work();
    return "ok";
  } catch (error) {
    return String((error as Error).message);
  }
};
const ask = (subject: string, body: string | Uint8Array = new Uint8Array(0)) =>
  outcome(() => nc.request(subject, body, { timeout: 5000 }));
const result: Record<string, string> = {};
result.ownCatchUp = await ask(subjectsOf(own).catchUp);
result.otherCatchUp = await ask(subjectsOf(other).catchUp);
result.otherDirectGet = await ask(declarationGet(other));
result.bodyDirectGet = await ask(
  "$JS.API.DIRECT.GET.MESH_DECL",
  JSON.stringify({ last_by_subj: subjectsOf(other).declaration }),
);
const zeros = "0".repeat(64);
result.otherObjects = await ask(`mesh.node.${other}.obj.${zeros}.meta`);
result.objectStore = await ask(`$JS.API.DIRECT.GET.MESH_OBJ.mesh.obj.${zeros}.meta`);
const subscribed = async (subject: string) => {
  const sub = nc.subscribe(subject);
  await nc.flush();
  return sub.isClosed() ? String(await sub.closed) : "ok";
};
result.otherSubscribe = await subscribed(subjectsOf(other).declaration);
result.otherPushSubscribe = await subscribed(subjectsOf(other).push);
const jetStreamApi = [
  "$JS.API.INFO",
  "$JS.API.STREAM.INFO.MESH_DECL",
  "$JS.API.STREAM.PURGE.MESH_DECL",
  "$JS.API.STREAM.DELETE.MESH_REPORT",
  "$JS.API.STREAM.MSG.GET.MESH_DECL",
  "$JS.API.CONSUMER.CREATE.MESH_DECL",
  `$JS.API.CONSUMER.CREATE.MESH_DECL.probe.${subjectsOf(other).declaration}`,
  `$JS.API.CONSUMER.DURABLE.CREATE.MESH_DECL.${own}`,
  "$JS.API.CONSUMER.LIST.MESH_DECL",
];
const refused: string[] = [];
for (const subject of jetStreamApi) {
  const said = await ask(
    subject,
    JSON.stringify({
      stream_name: "MESH_DECL",
      config: {
        deliver_subject: subjectsOf(other).push,
        filter_subject: subjectsOf(other).declaration,
      },
    }),
  );
  refused.push(/Permissions Violation/.test(said) ? "" : `${subject}: ${said}`);
}
result.jetStreamApi = refused.filter(Boolean).join("; ") ||
  `Permissions Violation for all ${jetStreamApi.length}`;
nc.publish(subjectsOf(other).report, JSON.stringify({ kind: "apply", forged: true }));
nc.publish(subjectsOf(other).heartbeat, JSON.stringify({ kind: "heartbeat", forged: true }));
await nc.flush();
await new Promise((resolve) => setTimeout(resolve, 500));
result.otherPublish = errors.filter((e) => /Publish/.test(e)).join("; ") || "ok";
for (const reply of [subjectsOf(other).push, "$JS.API.STREAM.PURGE.MESH_DECL"]) {
  nc.publish(subjectsOf(own).catchUp, new Uint8Array(0), { reply });
}
for (const subject of [subjectsOf(own).report, subjectsOf(own).heartbeat]) {
  for (const reply of ["$JS.API.STREAM.PURGE.MESH_DECL", subjectsOf(other).push]) {
    nc.publish(subject, JSON.stringify({ kind: "probe", abuse: "purge" }), { reply });
  }
}
await nc.flush();
result.replyAbuses = "sent";
console.log(JSON.stringify(result));
await nc.close();
