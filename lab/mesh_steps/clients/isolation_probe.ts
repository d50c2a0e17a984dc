// Runs INSIDE a lab machine (bundled by lab/mesh_steps/link_steps.ts), never in the host's own
// namespace. Usage: isolation_probe.js URL CA_FILE SEED_FILE OWN_NODE OTHER_NODE
// Connects as OWN_NODE with its own key and tries what the broker must refuse: the
// other node's last declaration (direct get, both forms), its live declarations (where
// its consumer delivers, and the stream's subject), publishing its report and heartbeat,
// acknowledging for its consumer, and the JetStream consumer API (making a consumer of
// either node's subject with a deliver subject of its choosing, reading, pulling from or
// deleting one). Prints one JSON line: each attempt "ok" or the
// broker's refusal. It also sends two messages whose reply subject points elsewhere:
// its own direct get answered into the other node's declaration subject, and its own
// report and heartbeat with `$JS.API.STREAM.PURGE.MESH_DECL` as reply (the step then
// checks from the control plane that nothing changed).
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
import { brokerTls } from "../../../src/link/connection.ts";
import { caTrust } from "../../../src/link/trust.ts";
import { subjectsOf } from "../../../src/link/subjects.ts";

const [url, caFile, seedFile, own, other] = Deno.args;
const seed = new TextEncoder().encode((await Deno.readTextFile(seedFile)).trim());
const nc = await connect({
  servers: url,
  authenticator: nkeyAuthenticator(seed),
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
const result: Record<string, string> = {};
result.ownDirectGet = await outcome(() =>
  nc.request(subjectsOf(own).directGet, new Uint8Array(0), { timeout: 5000 })
);
result.otherDirectGet = await outcome(() =>
  nc.request(subjectsOf(other).directGet, new Uint8Array(0), { timeout: 5000 })
);
result.bodyDirectGet = await outcome(() =>
  nc.request(
    "$JS.API.DIRECT.GET.MESH_DECL",
    JSON.stringify({ last_by_subj: subjectsOf(other).declaration }),
    { timeout: 5000 },
  )
);
const subscribed = async (subject: string) => {
  const sub = nc.subscribe(subject);
  await nc.flush();
  return sub.isClosed() ? String(await sub.closed) : "ok";
};
result.otherSubscribe = await subscribed(subjectsOf(other).declaration);
result.otherPushSubscribe = await subscribed(subjectsOf(other).push);
const consumerApi = [
  "$JS.API.CONSUMER.CREATE.MESH_DECL",
  `$JS.API.CONSUMER.CREATE.MESH_DECL.probe.${subjectsOf(own).declaration}`,
  `$JS.API.CONSUMER.CREATE.MESH_DECL.probe.${subjectsOf(other).declaration}`,
  `$JS.API.CONSUMER.DURABLE.CREATE.MESH_DECL.${own}`,
  `$JS.API.CONSUMER.INFO.MESH_DECL.${own}`,
  `$JS.API.CONSUMER.DELETE.MESH_DECL.${other}`,
  `$JS.API.CONSUMER.MSG.NEXT.MESH_DECL.${other}`,
  "$JS.API.CONSUMER.LIST.MESH_DECL",
  subjectsOf(other).ack.replace(">", "1.1.1.1.0"),
];
const refused: string[] = [];
for (const subject of consumerApi) {
  const said = await outcome(() =>
    nc.request(
      subject,
      JSON.stringify({
        stream_name: "MESH_DECL",
        config: {
          deliver_subject: "$JS.API.STREAM.PURGE.MESH_DECL",
          filter_subject: subjectsOf(other).declaration,
        },
      }),
      { timeout: 5000 },
    )
  );
  refused.push(/Permissions Violation/.test(said) ? "" : `${subject}: ${said}`);
}
result.consumerApi = refused.filter(Boolean).join("; ") ||
  `Permissions Violation for all ${consumerApi.length}`;
nc.publish(subjectsOf(other).report, JSON.stringify({ kind: "apply", forged: true }));
nc.publish(subjectsOf(other).heartbeat, JSON.stringify({ kind: "heartbeat", forged: true }));
await nc.flush();
await new Promise((resolve) => setTimeout(resolve, 500));
result.otherPublish = errors.filter((e) => /Publish/.test(e)).join("; ") || "ok";
nc.publish(subjectsOf(own).directGet, new Uint8Array(0), {
  reply: subjectsOf(other).declaration,
});
for (const subject of [subjectsOf(own).report, subjectsOf(own).heartbeat]) {
  nc.publish(subject, JSON.stringify({ kind: "probe", abuse: "purge" }), {
    reply: "$JS.API.STREAM.PURGE.MESH_DECL",
  });
}
await nc.flush();
result.replyAbuses = "sent";
console.log(JSON.stringify(result));
await nc.close();
