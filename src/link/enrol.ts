/**
 * Enrolment (`enrol --token -` or `--token-file F`): check the token, make this node's own NKey pair
 * (the seed is written 0600 and never leaves the machine), ask the control plane
 * over TLS under the mesh's CA, using the token's one-time join key, to admit the
 * new public key, prove the admission by connecting with the node's own key,
 * and only then record the identity in the store.
 *
 * Enrolment request (on mesh.enrol.<node>.<join public key>, as the join key, which
 * the broker lets publish there and nowhere else: the subject names the token spent):
 *   { "v": 1, "node": N, "publicKey": "U…" (the node's new user key),
 *     "sig": base64url(sign(enrolStatement)) }
 * Answer: { "ok": true } or { "ok": false, "error": "why" }.
 */
import { createUser, fromSeed } from "@nats-io/nkeys";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Engine } from "../engine/mod.ts";
import { CONNECTION_TIMING, type ConnectionTiming, openAny } from "./connection.ts";
import { classifyLinkError, LinkError } from "./errors.ts";
import {
  brokerList,
  type Identity,
  readIdentity,
  seedPath,
  writeIdentity,
  writeSeed,
} from "./identity.ts";
import { enrolSubject, joinInboxPrefix, subjectsOf } from "./subjects.ts";
import { type BrokerEntry, decodeToken } from "./token.ts";
import type { TrustList } from "./trust.ts";
import { base64url } from "./_base64url.ts";

/** What the new key signs, so the control plane knows the requester holds it. */
export function enrolStatement(node: string, publicKey: string): string {
  return `nox-mesh-host enrol v1 ${node} ${publicKey}`;
}

/**
 * An enrolment request, as the control plane receives it. Which token it spends is
 * the join key in its subject (`enrolSubject`), never a field of the request.
 */
export interface EnrolRequest {
  v: 1;
  node: string;
  /** The node's new public key: an NKey user key (`U…`). */
  publicKey: string;
  /** base64url signature of enrolStatement(node, publicKey) by the new key. */
  sig: string;
}

/** How to enrol. */
export interface EnrolOptions {
  now?: Date;
  /** Replace an existing identity (a new key; the old one stops working once the broker drops it). */
  replace?: boolean;
  /** How long to wait for the control plane's answer (ms). */
  requestTimeoutMs?: number;
  /** How long the broker may take to start accepting the new key (ms). */
  admitWaitMs?: number;
  /** How long a refused join key is tried again before the token counts as refused (ms). */
  joinRetryMs?: number;
  timing?: ConnectionTiming;
  log?: (line: string) => void;
}

/** Enrol this node with a token; returns the identity now in the store. */
export async function enrol(
  host: Engine,
  tokenText: string,
  options: EnrolOptions = {},
): Promise<Identity> {
  const token = decodeToken(tokenText, options.now);
  const existing = readIdentity(host.store);
  if (existing && !options.replace) {
    throw new LinkError(
      "enrol",
      "node",
      `this node is already enrolled as "${existing.node}" (key ${existing.publicKey}) with ${
        brokerList(existing)
      }`,
      { hint: "a token is used once; to enrol again anyway (a new key), add --replace" },
    );
  }
  const brokers: BrokerEntry[] = token.brokers.map((url) => ({ url }));
  const trust: TrustList = { serial: 0, cas: [{ pem: token.ca }] };
  const timing = options.timing ?? CONNECTION_TIMING;
  const log = options.log ?? (() => {});

  const pair = createUser();
  const seed = pair.getSeed();
  const publicKey = pair.getPublicKey();
  const finalSeedFile = seedPath(host.config.stateDir);
  const pendingSeedFile = `${finalSeedFile}.pending`;
  await Deno.mkdir(host.config.stateDir, { recursive: true, mode: 0o700 });
  await writeSeed(pendingSeedFile, seed);

  const join = fromSeed(new TextEncoder().encode(token.join));
  log(`connecting to ${brokerList({ brokers })} with the token's one-time key`);
  const { nc, url } = await openWithJoinKey(brokers, trust, join, token.node, {
    timing,
    log,
    windowMs: options.joinRetryMs ?? JOIN_RETRY_MS,
  });
  let answer: { ok?: boolean; error?: string };
  try {
    const request: EnrolRequest = {
      v: 1,
      node: token.node,
      publicKey,
      sig: base64url(pair.sign(new TextEncoder().encode(enrolStatement(token.node, publicKey)))),
    };
    const subject = enrolSubject(token.node, join.getPublicKey());
    const reply = await nc.request(subject, JSON.stringify(request), {
      timeout: options.requestTimeoutMs ?? 20_000,
    });
    answer = JSON.parse(reply.string());
  } catch (error) {
    const e = error as { name?: string; message?: string; cause?: { name?: string } };
    if (
      /no responders/i.test(`${e.message} ${e.cause?.name}`) ||
      /timeout/i.test(`${e.name} ${e.message}`)
    ) {
      throw new LinkError(
        "enrol",
        "broker",
        `no control plane answered the enrolment request on ${url} (${e.message})`,
        {
          hint:
            "the broker is up but the control plane's enrolment service is not; try again later",
          cause: error,
        },
      );
    }
    throw classifyLinkError(error, { url });
  } finally {
    await nc.close().catch(() => {});
  }
  if (answer?.ok !== true) {
    throw new LinkError(
      "enrol",
      "broker",
      `the control plane refused to enrol "${token.node}": ${answer?.error ?? "no reason given"}`,
      { hint: "mint a new token" },
    );
  }
  await Deno.rename(pendingSeedFile, finalSeedFile);
  log(`admitted; checking that the broker accepts this node's own key ${publicKey}`);
  await proveAdmission(
    brokers,
    trust,
    { seed, publicKey, node: token.node },
    options.admitWaitMs ?? 20_000,
    timing,
  );

  const identity: Identity = {
    node: token.node,
    brokers,
    ca: token.ca,
    trust,
    seedFile: finalSeedFile,
    publicKey,
    enrolledAt: new Date().toISOString(),
    signer: token.signer,
  };
  writeIdentity(host.store, identity);
  return identity;
}

/**
 * How long a join key the broker refused is tried again. A broker refuses a good key for a
 * moment: nats-server (2.9.10, and the same code today) checks, on every reload of its
 * configuration, every connection it has accepted, and closes with "Authorization
 * Violation" those whose CONNECT has not arrived yet (still in their TLS handshake). A
 * control plane that reloads for each admission does so while other nodes are enrolling,
 * and a real one propagates a new join key to its servers with some delay as well. A key
 * the broker really does not hold (a used, expired or revoked token) is refused on every
 * try, and the enrolment then fails with the same words a few seconds later.
 */
export const JOIN_RETRY_MS = 5_000;

/**
 * Connect as the token's join key to any of `brokers`. An auth refusal is tried again,
 * on the next broker, after a doubling pause with jitter (0.2 s, 0.4 s, 0.8 s, 1.6 s at
 * most, each between half and all of it) until `windowMs` has passed; then it is final.
 */
async function openWithJoinKey(
  brokers: BrokerEntry[],
  trust: TrustList,
  join: ReturnType<typeof fromSeed>,
  node: string,
  options: { timing: ConnectionTiming; log: (line: string) => void; windowMs: number },
): Promise<{ nc: NatsConnection; url: string }> {
  const started = Date.now();
  let first = 0;
  let url = brokers[0].url;
  for (let attempt = 1;; attempt++) {
    try {
      const opened = await openAny(brokers, trust, {
        seed: join.getSeed(),
        publicKey: join.getPublicKey(),
        inboxPrefix: joinInboxPrefix(join.getPublicKey()),
        name: `${node} enrolment`,
      }, {
        timing: options.timing,
        first,
        stopOn: (error) => error.reason === "auth",
        onFailure: (at, error) => {
          url = at;
          first = (brokers.findIndex((b) => b.url === at) + 1) % brokers.length;
          if (brokers.length > 1 && error.reason !== "auth") {
            options.log(`cannot use ${at}: ${error.message}; trying the next broker`);
          }
        },
      });
      return { nc: opened.nc, url: brokers[opened.index].url };
    } catch (error) {
      if (!(error instanceof LinkError) || !momentary(error)) throw error;
      const step = Math.min(1600, 200 * 2 ** (attempt - 1));
      const pause = step / 2 + Math.random() * (step / 2);
      const spent = Date.now() - started;
      if (spent + pause > options.windowMs && error.reason !== "auth") throw error;
      if (spent + pause > options.windowMs) {
        throw new LinkError(
          "auth",
          "broker",
          `the broker at ${url} refused the token's one-time key: the token was already used, ` +
            `has expired, or was revoked (refused ${attempt} ${
              attempt === 1 ? "time" : "times"
            } in ${(spent / 1000).toFixed(1)} s)`,
          { hint: "mint a new token", cause: error },
        );
      }
      options.log(
        `${url} ${
          error.reason === "auth"
            ? "refused the token's one-time key (a broker refuses connections for a moment " +
              "while it reloads)"
            : "closed the connection in its handshake (a broker drops those while it reloads)"
        }; trying again in ${(pause / 1000).toFixed(1)} s`,
      );
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/**
 * Whether a failure to connect with the join key may pass: a refusal of the key, or a
 * connection the broker accepted and then dropped (EPIPE, ECONNRESET). nats-server
 * 2.9.10 drops, on each reload of its configuration, every connection still in its
 * handshake, and the client sees one or the other depending on the moment.
 */
function momentary(error: LinkError): boolean {
  if (error.reason === "auth") return true;
  const cause = error.cause as { code?: string; cause?: { code?: string } } | undefined;
  const code = cause?.code ?? cause?.cause?.code;
  return error.reason === "tcp" && (code === "EPIPE" || code === "ECONNRESET");
}

/** Connect with the node's own key, allowing the broker a moment to load the admission. */
async function proveAdmission(
  brokers: BrokerEntry[],
  trust: TrustList,
  key: { seed: Uint8Array; publicKey: string; node: string },
  waitMs: number,
  timing: ConnectionTiming,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const { nc } = await openAny(brokers, trust, {
        seed: key.seed,
        publicKey: key.publicKey,
        inboxPrefix: subjectsOf(key.node).inboxPrefix,
        name: key.node,
      }, { timing });
      await nc.close();
      return;
    } catch (error) {
      // The broker reloads its users around an enrolment: a refused or dropped attempt
      // is expected for a moment. Certificate and name problems are not.
      const transient = error instanceof LinkError &&
        ["auth", "tcp", "closed", "timeout", "protocol"].includes(error.reason);
      if (!transient || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
