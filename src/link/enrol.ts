/**
 * Enrolment (`enrol --token -` or `--token-file F`): check the token, make this node's own NKey pair
 * (the seed is written 0600 and never leaves the machine), ask the control plane
 * over TLS under the mesh's CA, as the token's one-time join user (its seed and JWT), to
 * admit the new public key; the answer carries the node's own user JWT (NATS's operator
 * mode: what the broker lets this key do, minted by the control plane; nothing about the
 * node is in any server's configuration). The JWT is written beside the seed (0600), the
 * admission proved by connecting with the node's own key and JWT, and only then the
 * identity recorded in the store.
 *
 * Enrolment request (on mesh.enrol.<node>.<join public key>, as the join user, which
 * the broker lets publish there and nowhere else: the subject names the token spent):
 *   { "v": 1, "node": N, "publicKey": "U…" (the node's new user key),
 *     "sig": base64url(sign(enrolStatement)) }
 * Answer: { "ok": true, "jwt": "…" } or { "ok": false, "error": "why" }.
 */
import { createUser } from "@nats-io/nkeys";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Engine } from "../engine/mod.ts";
import { CONNECTION_TIMING, type ConnectionTiming, openAny } from "./connection.ts";
import { classifyLinkError, LinkError } from "./errors.ts";
import {
  brokerList,
  type Identity,
  jwtPath,
  readIdentity,
  seedPath,
  writeIdentity,
  writeSeed,
} from "./identity.ts";
import { enrolSubject, joinInboxPrefix, subjectsOf } from "./subjects.ts";
import { type BrokerEntry, decodeToken } from "./token.ts";
import type { TrustList } from "./trust.ts";
import { base64url } from "./_base64url.ts";
import { signerOf } from "./_nkeys.ts";

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
  /**
   * How long a join connection dropped in its handshake, or an enrolment request nobody
   * answered, is tried again before the enrolment fails (ms).
   */
  joinRetryMs?: number;
  timing?: ConnectionTiming;
  log?: (line: string) => void;
}

/** Enrol this node with a token; returns the identity now in the store. */
// Long because: enrolment's steps in their order (token, key, the broker's answer, the store
// written in one commit); splitting them would pass half an enrolment between functions.
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

  // A fresh random seed; its public key and signatures by the runtime (_nkeys.ts).
  const seed = createUser().getSeed();
  const signer = signerOf(seed);
  const publicKey = signer.publicKey;
  const finalSeedFile = seedPath(host.config.stateDir);
  const pendingSeedFile = `${finalSeedFile}.pending`;
  const jwtFile = jwtPath(host.config.stateDir);
  await Deno.mkdir(host.config.stateDir, { recursive: true, mode: 0o700 });
  await writeSeed(pendingSeedFile, seed);

  const join = { seed: new TextEncoder().encode(token.join), jwt: token.jwt };
  const joinKey = signerOf(join.seed).publicKey;
  const windowMs = options.joinRetryMs ?? JOIN_RETRY_MS;
  log(`connecting to ${brokerList({ brokers })} with the token's one-time key`);
  const { nc, url } = await openWithJoinKey(brokers, trust, { ...join, publicKey: joinKey }, {
    node: token.node,
    timing,
    log,
    windowMs,
  });
  let answer: { ok?: boolean; error?: string; jwt?: unknown };
  try {
    const request: EnrolRequest = {
      v: 1,
      node: token.node,
      publicKey,
      sig: base64url(signer.sign(new TextEncoder().encode(enrolStatement(token.node, publicKey)))),
    };
    answer = await ask(
      nc,
      enrolSubject(token.node, joinKey),
      JSON.stringify(request),
      { url, timeoutMs: options.requestTimeoutMs ?? 20_000, windowMs, log },
    );
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
  if (typeof answer.jwt !== "string" || !/^[\w-]+\.[\w-]+\.[\w-]+$/.test(answer.jwt)) {
    throw new LinkError(
      "enrol",
      "broker",
      `the control plane admitted "${token.node}" but sent no JWT for its key (an answer of ` +
        "a control plane from before operator mode?)",
      { hint: "enrol with a token of the mesh's current control plane" },
    );
  }
  const jwt = answer.jwt;
  await Deno.rename(pendingSeedFile, finalSeedFile);
  await writeSeed(jwtFile, new TextEncoder().encode(`${jwt}\n`));
  log(`admitted; checking that the broker accepts this node's own key ${publicKey}`);
  await proveAdmission(
    brokers,
    trust,
    { seed, jwt, publicKey, node: token.node },
    options.admitWaitMs ?? 20_000,
    timing,
  );

  const identity: Identity = {
    node: token.node,
    brokers,
    ca: token.ca,
    trust,
    seedFile: finalSeedFile,
    jwtFile,
    publicKey,
    enrolledAt: new Date().toISOString(),
    signer: token.signer,
  };
  writeIdentity(host.store, identity);
  return identity;
}

/**
 * How long a join connection the broker dropped in its handshake, or an enrolment request
 * that nobody answered, is tried again. A refusal of the join user itself is final at
 * once: in operator mode the broker holds no join key in its configuration and never
 * reloads one (what version 4 tokens needed), so a refused join JWT is a used, expired or
 * revoked token. An enrolment request may find no responder for a moment (a site's leaf
 * connecting again after its scope changed for a new token), and a lost answer is asked
 * again (the control plane answers a second ask with the same key as the first).
 */
export const JOIN_RETRY_MS = 5_000;

/**
 * Connect as the token's join user to any of `brokers`. A refusal of the user is final;
 * a connection dropped in its handshake is tried again, on the next broker, after a
 * doubling pause with jitter (0.2 s, 0.4 s, 0.8 s, 1.6 s at most) until `windowMs` has
 * passed.
 */
async function openWithJoinKey(
  brokers: BrokerEntry[],
  trust: TrustList,
  join: { seed: Uint8Array; jwt: string; publicKey: string },
  options: {
    node: string;
    timing: ConnectionTiming;
    log: (line: string) => void;
    windowMs: number;
  },
): Promise<{ nc: NatsConnection; url: string }> {
  const started = Date.now();
  let first = 0;
  let url = brokers[0].url;
  for (let attempt = 1;; attempt++) {
    try {
      const opened = await openAny(brokers, trust, {
        seed: join.seed,
        jwt: join.jwt,
        publicKey: join.publicKey,
        inboxPrefix: joinInboxPrefix(join.publicKey),
        name: `${options.node} enrolment`,
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
      if (error instanceof LinkError && error.reason === "auth") {
        throw new LinkError(
          "auth",
          "broker",
          `the broker at ${url} refused the token's one-time key: the token was already used, ` +
            "has expired, or was revoked",
          { hint: "mint a new token", cause: error },
        );
      }
      if (!(error instanceof LinkError) || !momentary(error)) throw error;
      const step = Math.min(1600, 200 * 2 ** (attempt - 1));
      const pause = step / 2 + Math.random() * (step / 2);
      if (Date.now() - started + pause > options.windowMs) throw error;
      options.log(
        `${url} closed the connection in its handshake; trying again in ${
          (pause / 1000).toFixed(1)
        } s`,
      );
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/**
 * Ask the enrolment request and parse its answer. No responder (nobody listens yet:
 * a site's leaf reconnecting) is asked again after a pause, a timeout at once (the
 * control plane answers the same key's second ask as its first), while `windowMs` lasts
 * (at least two asks).
 */
async function ask(
  nc: NatsConnection,
  subject: string,
  body: string,
  options: { url: string; timeoutMs: number; windowMs: number; log: (line: string) => void },
): Promise<{ ok?: boolean; error?: string; jwt?: unknown }> {
  const started = Date.now();
  for (let asked = 1;; asked++) {
    try {
      const reply = await nc.request(subject, body, { timeout: options.timeoutMs });
      return JSON.parse(reply.string());
    } catch (error) {
      const e = error as { name?: string; message?: string; cause?: { name?: string } };
      const unanswered = /no responders/i.test(`${e.message} ${e.cause?.name}`);
      const late = /timeout/i.test(`${e.name} ${e.message}`);
      if (!unanswered && !late) throw classifyLinkError(error, { url: options.url });
      if (asked >= 2 && Date.now() - started > options.windowMs) {
        throw new LinkError(
          "enrol",
          "broker",
          `no control plane answered the enrolment request on ${options.url} (${e.message}; ` +
            `asked ${asked} times)`,
          {
            hint:
              "the broker is up but the control plane's enrolment service is not; try again later",
            cause: error,
          },
        );
      }
      options.log(
        `${options.url}: ${
          unanswered ? "no enrolment service answers yet" : "the enrolment answer did not come"
        }; asking again`,
      );
      if (unanswered) {
        await new Promise((resolve) => setTimeout(resolve, 500 + Math.random() * 500));
      }
    }
  }
}
/**
 * Whether a failure to connect with the join key may pass: a connection the broker
 * accepted and then dropped (EPIPE, ECONNRESET; a busy server).
 */
function momentary(error: LinkError): boolean {
  const cause = error.cause as { code?: string; cause?: { code?: string } } | undefined;
  const code = cause?.code ?? cause?.cause?.code;
  return error.reason === "tcp" && (code === "EPIPE" || code === "ECONNRESET");
}

/** Connect with the node's own key and JWT (a dropped or timed-out attempt is tried again). */
async function proveAdmission(
  brokers: BrokerEntry[],
  trust: TrustList,
  key: { seed: Uint8Array; jwt: string; publicKey: string; node: string },
  waitMs: number,
  timing: ConnectionTiming,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const { nc } = await openAny(brokers, trust, {
        seed: key.seed,
        jwt: key.jwt,
        publicKey: key.publicKey,
        inboxPrefix: subjectsOf(key.node).inboxPrefix,
        name: key.node,
      }, { timing });
      await nc.close();
      return;
    } catch (error) {
      // A dropped or slow attempt (a busy server) is tried again; a refused key, a
      // certificate or a name problem is final.
      const transient = error instanceof LinkError &&
        ["tcp", "closed", "timeout", "protocol"].includes(error.reason);
      if (!transient || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
