// A short-lived NATS client for lab checks. It runs INSIDE a lab machine or the broker's
// namespace (bundled by the lab, see probe.ts), never from the host's own namespace.
// Usage: nats_probe.js URL CA_FILE [FINGERPRINT256] — connects over TLS trusting only
// CA_FILE (and, given a fingerprint, pinning the server certificate), round-trips one
// message, prints one JSON line and exits 0; on failure prints the error and exits 1.
import { connect, type TlsOptions } from "@nats-io/transport-node";
import type { PeerCertificate } from "node:tls";

const [url, caFile, pin] = Deno.args;
if (!url || !caFile) {
  console.error("usage: nats_probe URL CA_FILE [FINGERPRINT256]");
  Deno.exit(64);
}
const started = Date.now();
try {
  const nc = await connect({
    servers: url,
    timeout: 3000,
    maxReconnectAttempts: 0,
    // node:tls honours checkServerIdentity (only after the CA verified the chain); the
    // client's type does not list it.
    tls: {
      ca: await Deno.readTextFile(caFile),
      checkServerIdentity: (_host: string, cert: PeerCertificate) =>
        pin && cert.fingerprint256 !== pin
          ? new Error(`server fingerprint ${cert.fingerprint256} is not the pinned ${pin}`)
          : undefined,
    } as TlsOptions,
  });
  const subject = `lab.probe.${crypto.randomUUID()}`;
  const sub = nc.subscribe(subject, { max: 1 });
  nc.publish(subject, "ping");
  for await (const msg of sub) {
    if (msg.string() !== "ping") throw new Error(`echo was ${msg.string()}`);
  }
  const rtt = await nc.rtt();
  console.log(
    JSON.stringify({
      ok: true,
      server: nc.info?.server_name,
      rttMs: rtt,
      ms: Date.now() - started,
    }),
  );
  await nc.close();
} catch (error) {
  console.log(JSON.stringify({ ok: false, error: String(error), ms: Date.now() - started }));
  Deno.exit(1);
}
