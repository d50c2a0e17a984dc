/**
 * The stand-in control plane (tests and the lab only; never imported by src/).
 * It connects to the broker with its own key (no permission limits), keeps the
 * JetStream streams, mints one-time tokens, answers enrolment requests by
 * admitting the node's own public key with per-node permissions, publishes
 * declarations, and reads reports and heartbeats.
 */
import {
  connect,
  headers,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  nkeyAuthenticator,
  type Subscription,
  type TlsOptions,
} from "@nats-io/transport-node";
import type { PeerCertificate } from "node:tls";
import { createUser, fromPublic, type KeyPair } from "@nats-io/nkeys";
import {
  createSigningKey,
  isSignatureProblem,
  MAX_ROTATIONS,
  ROTATION_HEADER,
  rotationHeader,
  SIGNATURE_HEADER,
  signDeclaration,
  signingKeyFromSeed,
  signRotation,
  verifyDeclaration,
} from "../../src/link/signature.ts";
import { pinnedTls } from "../../src/link/connection.ts";
import { type EnrolRequest, enrolStatement } from "../../src/link/enrol.ts";
import {
  CONTENT_BUCKET,
  CONTENT_STREAM,
  CONTENT_SUBJECTS,
  DECLARATION_STREAM,
  MESSAGE_ID_HEADER,
  subjectsOf,
} from "../../src/link/subjects.ts";
import { encodeToken } from "../../src/link/token.ts";
import { unbase64url } from "../../src/link/_base64url.ts";
import {
  checkNodeName,
  type MeshState,
  readState,
  reloader,
  tokenBrokers,
  withState,
} from "./state.ts";

const DAY_NS = 24 * 3600 * 1e9;

/**
 * Streams the stand-in keeps: the last declaration per node, reports, the last
 * heartbeat and the last inventory per node. Reports and inventories are
 * acknowledged (the node keeps a report in its outbox until then) and
 * deduplicated by their `Nats-Msg-Id` within a day: nodes reach them through a
 * service import, whose reply subject is the broker's own mapping of the node's
 * inbox. The heartbeat stream never acknowledges (`no_ack`): it is fed by a
 * stream import, which carries the publisher's reply subject into CONTROL, and
 * an acknowledgement sent there to `$JS.API.STREAM.PURGE.MESH_DECL` would be a
 * purge made by JetStream itself (measured on nats-server 2.9.10).
 */
export const STREAMS = {
  [DECLARATION_STREAM]: { subjects: ["mesh.decl.*"], max_msgs_per_subject: 1, no_ack: false },
  MESH_REPORT: {
    subjects: ["mesh.node.*.report"],
    max_msgs_per_subject: 1000,
    no_ack: false,
    duplicate_window: DAY_NS,
  },
  MESH_BEAT: { subjects: ["mesh.node.*.heartbeat"], max_msgs_per_subject: 1, no_ack: true },
  MESH_INV: {
    subjects: ["mesh.node.*.inventory"],
    max_msgs_per_subject: 1,
    no_ack: false,
    duplicate_window: DAY_NS,
  },
} as const;

/** TLS for the control plane's own connection to a cluster: the CA, and any of the servers' pins. */
function clusterTls(ca: string, pins: string[]): TlsOptions {
  return {
    ca,
    checkServerIdentity: (_host: string, cert: PeerCertificate) =>
      pins.includes(cert.fingerprint256)
        ? undefined
        : new Error(`certificate ${cert.fingerprint256} is none of the cluster's pins`),
  } as TlsOptions;
}

/** A message the node sent, as the control plane reads it. */
export interface NodeMessage {
  node: string;
  kind: "report" | "heartbeat" | "inventory";
  seq?: number;
  body: Record<string, unknown>;
}

/** A connected stand-in control plane; close it when done. */
export class ControlPlane implements AsyncDisposable {
  readonly dir: string;
  readonly nc: NatsConnection;
  #enrolSub: Subscription | undefined;
  /** Every server loads the auth block as written now (coalesced, spaced; state.ts). */
  readonly #reload: () => Promise<void>;

  private constructor(dir: string, nc: NatsConnection) {
    this.dir = dir;
    this.nc = nc;
    this.#reload = reloader(dir);
  }

  /** Connect to the broker of mesh directory `dir` and make sure the streams exist. */
  static async open(dir: string): Promise<ControlPlane> {
    const state = await readState(dir);
    const nc = await connect({
      servers: state.controlUrls ?? state.controlUrl,
      name: "nox-mesh stand-in control plane",
      authenticator: nkeyAuthenticator(new TextEncoder().encode(state.control.seed)),
      tls: state.cluster
        ? clusterTls(state.caPem, state.cluster.map((s) => s.pin))
        : pinnedTls({ url: state.controlUrl, ca: state.caPem, pin: state.pin }),
      ignoreClusterUpdates: state.cluster !== undefined,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 5000,
    });
    const control = new ControlPlane(dir, nc);
    // A cluster keeps every stream on three servers: losing one loses nothing.
    const replicas = state.cluster ? Math.min(3, state.cluster.length) : 1;
    // A cluster that just started may still be electing its JetStream leader.
    for (let tries = 0;; tries++) {
      try {
        await control.#ensureStreams(replicas);
        break;
      } catch (error) {
        if (!state.cluster || tries >= 60) {
          await nc.close().catch(() => {});
          throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    return control;
  }

  async #ensureStreams(replicas: number): Promise<void> {
    for (const [name, config] of Object.entries(STREAMS)) {
      const info = await this.#api(`$JS.API.STREAM.INFO.${name}`, "");
      // An existing stream is brought to this configuration (a mesh made by an
      // older stand-in had unacknowledged, undeduplicated reports).
      const verb = info.error ? "CREATE" : "UPDATE";
      const made = await this.#api(
        `$JS.API.STREAM.${verb}.${name}`,
        JSON.stringify({
          name,
          ...config,
          storage: "file",
          num_replicas: replicas,
          allow_direct: true,
          max_age: 7 * 24 * 3600 * 1e9,
        }),
      );
      if (made.error) {
        throw new Error(
          `cannot ${verb.toLowerCase()} stream ${name}: ${JSON.stringify(made.error)}`,
        );
      }
    }
  }

  /** The mesh's object store (DESIGN.md §19): objects kept until deleted, read by direct get. */
  async #ensureContentStream(): Promise<void> {
    const info = await this.#api(`$JS.API.STREAM.INFO.${CONTENT_STREAM}`, "");
    if (!info.error) return;
    const made = await this.#api(
      `$JS.API.STREAM.CREATE.${CONTENT_STREAM}`,
      JSON.stringify({
        name: CONTENT_STREAM,
        subjects: [`$O.${CONTENT_BUCKET}.C.>`, `$O.${CONTENT_BUCKET}.M.>`],
        storage: "file",
        discard: "new",
        allow_rollup_hdrs: true,
        allow_direct: true,
      }),
    );
    if (made.error) {
      throw new Error(`cannot create stream ${CONTENT_STREAM}: ${JSON.stringify(made.error)}`);
    }
  }

  /**
   * Put bytes into the mesh's object store, named by their SHA-256 (hex), in the NATS
   * object store's layout (chunks, then a description that replaces the last one);
   * returns the digest. `name` stores them under another name (tests: a tampered object).
   */
  async putContent(bytes: Uint8Array, { name }: { name?: string } = {}): Promise<string> {
    await this.#ensureContentStream();
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
    const sha256 = digest.toHex();
    const nuid = crypto.randomUUID().replaceAll("-", "");
    const CHUNK = 128 * 1024;
    let chunks = 0;
    for (let at = 0; at < bytes.length; at += CHUNK) {
      await this.#jsPublish(CONTENT_SUBJECTS.chunks(nuid), bytes.subarray(at, at + CHUNK));
      chunks++;
    }
    const h = headers();
    h.set("Nats-Rollup", "sub");
    const meta = {
      name: name ?? sha256,
      bucket: CONTENT_BUCKET,
      nuid,
      size: bytes.length,
      chunks,
      mtime: new Date().toISOString(),
      digest: `SHA-256=${digest.toBase64({ alphabet: "base64url" })}`,
      options: { max_chunk_size: CHUNK },
    };
    await this.#jsPublish(CONTENT_SUBJECTS.meta(name ?? sha256), JSON.stringify(meta), h);
    return sha256;
  }

  async #jsPublish(subject: string, body: Uint8Array | string, h?: Msg["headers"]) {
    const ack = await this.nc.request(subject, body, { timeout: 10_000, headers: h });
    const answer = JSON.parse(ack.string());
    if (answer.error) {
      throw new Error(`the broker did not store ${subject}: ${JSON.stringify(answer.error)}`);
    }
  }

  async #api(
    subject: string,
    body: string,
  ): Promise<Record<string, unknown> & { error?: unknown }> {
    const reply = await this.nc.request(subject, body, { timeout: 10_000 });
    return JSON.parse(reply.string());
  }

  /**
   * Mint a one-time token for `node`: its join key is admitted (ask-to-enrol only) until
   * used or expired. `via`: the token names that site's leaf server, not the cluster.
   * Every server has loaded the join key when this returns.
   */
  async mintToken(node: string, ttlSeconds = 3600, via?: string): Promise<string> {
    return (await this.mintTokens([node], ttlSeconds, via))[node];
  }

  /** Mint a one-time token for each of `nodes` (one reload for all); node → token. */
  async mintTokens(
    nodes: string[],
    ttlSeconds = 3600,
    via?: string,
  ): Promise<Record<string, string>> {
    nodes.forEach(checkNodeName);
    const expires = new Date(Date.now() + ttlSeconds * 1000).toISOString();
    const joins = nodes.map((node) => ({ node, join: createUser() }));
    const state = await withState(this.dir, (s) => {
      for (const { node, join } of joins) {
        s.tokens[join.getPublicKey()] = { node, expires, mintedAt: new Date().toISOString() };
      }
      return s;
    });
    await this.#reload();
    const tokens: Record<string, string> = {};
    for (const { node, join } of joins) {
      tokens[node] = encodeToken({
        v: 3,
        node,
        brokers: tokenBrokers(state, via),
        ca: state.caPem,
        join: new TextDecoder().decode(join.getSeed()),
        signer: state.signer.publicKey,
        expires,
      });
    }
    return tokens;
  }

  /** Answer enrolment requests until close(). */
  serveEnrolments(log: (line: string) => void = () => {}): void {
    this.#enrolSub = this.nc.subscribe("mesh.enrol.*", {
      callback: (error, msg) => {
        if (error) return log(`enrolment subscription: ${error.message}`);
        this.#enrol(msg).then(
          (line) => log(line),
          (e) => log(`enrolment failed: ${(e as Error).message}`),
        );
      },
    });
  }

  async #enrol(msg: Msg): Promise<string> {
    const node = msg.subject.split(".")[2];
    const refuse = (why: string) => {
      msg.respond(JSON.stringify({ ok: false, error: why }));
      return `refused to enrol ${node}: ${why}`;
    };
    let request: EnrolRequest;
    try {
      request = JSON.parse(msg.string());
    } catch {
      return refuse("the request is not JSON");
    }
    if (request.node !== node) return refuse(`the request names ${request.node}, not ${node}`);
    try {
      const ok = fromPublic(request.publicKey).verify(
        new TextEncoder().encode(enrolStatement(node, request.publicKey)),
        unbase64url(request.sig),
      );
      if (!ok) return refuse("the signature does not match the public key");
    } catch {
      return refuse("the public key or signature is malformed");
    }
    // Admit the key and mark the token used in one locked step. The join key stays in
    // the auth block until the answer is out, then goes; one reload (shared with the
    // enrolments and mints of the moment: state.ts, reloader) loads both, so the node's
    // own key works (enrol.ts proves it, waiting for this reload) only once every
    // server has dropped the join key. A reload that falls between the two steps loads
    // the admission with the join key still there, which is harmless.
    const problem = await withState(this.dir, (s) => {
      const token = s.tokens[request.join];
      if (!token || token.node !== node) return "no such token for this node";
      if (token.usedAt) return `the token was already used at ${token.usedAt}`;
      if (Date.parse(token.expires) <= Date.now()) return `the token expired at ${token.expires}`;
      token.usedAt = new Date().toISOString();
      s.nodes[node] = {
        publicKey: request.publicKey,
        admittedAt: token.usedAt,
        serial: s.nodes[node]?.serial ?? 0,
      };
      return undefined;
    });
    if (problem) return refuse(problem);
    msg.respond(JSON.stringify({ ok: true }));
    await this.nc.flush();
    await withState(this.dir, (s) => {
      s.tokens[request.join].retired = true;
    });
    await this.#reload();
    return `enrolled ${node} with key ${request.publicKey}`;
  }

  /** Stop admitting `node`'s key (the broker then refuses it and drops its connection). */
  async revoke(node: string): Promise<void> {
    await withState(this.dir, (s) => {
      if (s.nodes[node]) s.nodes[node].revoked = true;
    });
    await this.#reload();
  }

  /** Admit a revoked node's key again. */
  async readmit(node: string): Promise<void> {
    await withState(this.dir, (s) => {
      if (s.nodes[node]) delete s.nodes[node].revoked;
    });
    await this.#reload();
  }

  /**
   * A function that gives the headers of a declaration to a node, signed with the
   * control plane's current key (the statement for that node, src/link/signature.ts)
   * and carrying its rotations; `notAfter` makes nodes refuse it after then. Reads
   * the key once: for publishing many (benchmarks), call it once and reuse it.
   *
   * @example
   * ```ts
   * const sign = await control.declarationSigner();
   * nc.publish(subjectsOf("n1").declaration, body, { headers: sign("n1", body) });
   * ```
   */
  async declarationSigner(): Promise<
    (node: string, body: Uint8Array, options?: SignOptions) => MsgHdrs
  > {
    const state = await this.state();
    const key = signingKeyFromSeed(state.signer.seed);
    // Nodes read the last MAX_ROTATIONS; one pinned to a key older than those enrols again.
    const rotations = (state.rotations ?? []).slice(-MAX_ROTATIONS);
    return (node, body, options = {}) => signedHeaders(key, rotations, node, body, options);
  }

  /**
   * Rotate the declaration signing key: a new key, and a rotation to it signed by
   * the current one (kept in mesh.json and sent with every declaration from now on;
   * the old key's seed is dropped). Tokens minted from now on pin the new key. With
   * `republish` (the default), every admitted node's last declaration is published
   * again under its next serial, signed by the new key, so each node switches at
   * once instead of with its next declaration: only one this control plane signed
   * (its signature verifies against the key rotated away from); anything else the
   * stream holds is never signed again (`skipped`).
   */
  async rotateKey(
    { republish = true }: { republish?: boolean } = {},
  ): Promise<
    { from: string; to: string; republished: Record<string, number>; skipped: string[] }
  > {
    const next = createSigningKey();
    const { from, to } = await withState(this.dir, (s) => {
      const current = signingKeyFromSeed(s.signer.seed);
      s.rotations = [...(s.rotations ?? []), signRotation(current, next.getPublicKey())];
      s.signer = {
        seed: new TextDecoder().decode(next.getSeed()),
        publicKey: next.getPublicKey(),
      };
      return { from: current.getPublicKey(), to: next.getPublicKey() };
    });
    const republished: Record<string, number> = {};
    const skipped: string[] = [];
    if (republish) {
      for (const node of Object.keys((await this.state()).nodes)) {
        const last = await this.lastDeclaration(node);
        if (!last) continue;
        const body = new TextEncoder().encode(last.body);
        const verified = verifyDeclaration(
          from,
          node,
          body,
          last.signature ?? undefined,
          last.rotation ?? undefined,
        );
        let declaration: Record<string, unknown> | undefined;
        try {
          declaration = isSignatureProblem(verified) ? undefined : JSON.parse(last.body);
        } catch { /* not JSON */ }
        if (typeof declaration !== "object" || declaration === null) {
          skipped.push(node); // not signed by this control plane, or not an object it made
          continue;
        }
        delete declaration.serial;
        const { serial } = await this.declare(node, declaration);
        if (serial !== null) republished[node] = serial;
      }
    }
    return { from, to, republished, skipped };
  }

  /**
   * Publish a declaration to `node` through JetStream (kept as its last one),
   * signed with the control plane's signing key (the statement for `node` over its
   * exact bytes, header `Mesh-Signature`, with the key's rotations in
   * `Mesh-Key-Rotation`). An object gets `node` (when absent) and the next serial
   * (unless it has one or `serial` is given); bytes are published as they are.
   * `notAfter` makes nodes refuse it after then. `signWith` signs with another key
   * instead, `null` sends no signature, `signature` and `rotation` send those header
   * values as they are (refusal tests).
   */
  async declare(
    node: string,
    declaration: Record<string, unknown> | Uint8Array,
    { serial, signWith, signature, rotation, notAfter }: {
      serial?: number;
      signWith?: KeyPair | null;
      signature?: string;
      rotation?: string;
      notAfter?: Date;
    } = {},
  ): Promise<{ serial: number | null; seq: number }> {
    let body: Uint8Array;
    let used: number | null = null;
    if (declaration instanceof Uint8Array) {
      body = declaration;
    } else {
      used = await withState(this.dir, (s) => {
        const record = s.nodes[node];
        const next = serial ??
          (typeof declaration.serial === "number" ? declaration.serial : (record?.serial ?? 0) + 1);
        if (record) record.serial = Math.max(record.serial, next);
        return next;
      });
      body = new TextEncoder().encode(JSON.stringify({ node, ...declaration, serial: used }));
    }
    let h: MsgHdrs;
    if (signWith === undefined) {
      h = (await this.declarationSigner())(node, body, { notAfter });
    } else {
      h = signWith ? signedHeaders(signWith, [], node, body, { notAfter }) : headers();
    }
    if (signature !== undefined) h.set(SIGNATURE_HEADER, signature);
    if (rotation !== undefined) h.set(ROTATION_HEADER, rotation);
    // A cluster electing a stream leader (just started, or a server lost) has no
    // responder for a moment: try again for up to 30 s. Storing the same bytes twice
    // is harmless (last per subject; the node holds that serial already).
    const deadline = Date.now() + 30_000;
    let ack;
    for (;;) {
      try {
        ack = await this.nc.request(subjectsOf(node).declaration, body, {
          timeout: 10_000,
          headers: h,
        });
        break;
      } catch (error) {
        const text = `${(error as Error).message} ${(error as Error).cause}`;
        if (!/no responders|timeout/i.test(text) || Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    const answer = JSON.parse(ack.string());
    if (answer.error) {
      throw new Error(`the broker did not store the declaration: ${JSON.stringify(answer.error)}`);
    }
    return { serial: used, seq: answer.seq };
  }

  /** `node`'s last stored declaration (stream sequence, bytes, signature header), or undefined. */
  async lastDeclaration(
    node: string,
  ): Promise<
    { seq: number; body: string; signature: string | null; rotation: string | null } | undefined
  > {
    const reply = await this.nc.request(subjectsOf(node).directGet, new Uint8Array(0), {
      timeout: 10_000,
    });
    if (reply.headers?.code && reply.headers.code !== 200) return undefined;
    return {
      seq: Number(reply.headers?.get("Nats-Sequence")),
      body: reply.string(),
      signature: reply.headers?.has(SIGNATURE_HEADER) ? reply.headers.get(SIGNATURE_HEADER) : null,
      rotation: reply.headers?.has(ROTATION_HEADER) ? reply.headers.get(ROTATION_HEADER) : null,
    };
  }

  /** How many messages a stream holds. */
  async streamMessages(name: string): Promise<number> {
    const info = await this.#api(`$JS.API.STREAM.INFO.${name}`, "");
    if (info.error) throw new Error(`no stream ${name}: ${JSON.stringify(info.error)}`);
    return Number((info.state as { messages: number }).messages);
  }

  /** The last heartbeat of `node`, or undefined. */
  async lastHeartbeat(node: string): Promise<Record<string, unknown> | undefined> {
    const reply = await this.nc.request(
      `$JS.API.DIRECT.GET.MESH_BEAT.${subjectsOf(node).heartbeat}`,
      new Uint8Array(0),
      { timeout: 10_000 },
    );
    if (reply.headers?.code && reply.headers.code !== 200) return undefined;
    return JSON.parse(reply.string());
  }

  /** Every report `node` sent (kept by the broker), oldest first. */
  async reports(node: string): Promise<Record<string, unknown>[]> {
    return (await this.reportRecords(node)).map((r) => r.body);
  }

  /**
   * Every report `node` sent as the broker keeps it: the stream sequence, the
   * message id the node gave it (`Nats-Msg-Id`, null without one) and the body.
   * Read from the stream's leader (`STREAM.MSG.GET`), not by direct get: any
   * replica answers a direct get, one that lags behind included (a server just
   * restarted, or a follower after a leader was killed), and a tally taken from
   * it misses reports the cluster has acknowledged.
   */
  async reportRecords(
    node: string,
  ): Promise<{ seq: number; msgId: string | null; body: Record<string, unknown> }[]> {
    const out: { seq: number; msgId: string | null; body: Record<string, unknown> }[] = [];
    let seq = 1;
    for (;;) {
      const answer = await this.#api(
        "$JS.API.STREAM.MSG.GET.MESH_REPORT",
        JSON.stringify({ seq, next_by_subj: subjectsOf(node).report }),
      ) as { error?: { code?: number; description?: string }; message?: StoredMessage };
      if (answer.error?.code === 404) return out;
      if (answer.error || !answer.message) {
        throw new Error(`MESH_REPORT from seq ${seq}: ${JSON.stringify(answer.error ?? answer)}`);
      }
      const m = answer.message;
      const msgId = headerOf(m.hdrs, MESSAGE_ID_HEADER);
      out.push({ seq: m.seq, msgId, body: JSON.parse(decodeBase64Text(m.data ?? "")) });
      seq = m.seq + 1;
    }
  }

  /** The last inventory of `node` (JSON), or undefined. */
  async lastInventory(node: string): Promise<Record<string, unknown> | undefined> {
    const reply = await this.nc.request(
      `$JS.API.DIRECT.GET.MESH_INV.${subjectsOf(node).inventory}`,
      new Uint8Array(0),
      { timeout: 10_000 },
    );
    if (reply.headers?.code && reply.headers.code !== 200) return undefined;
    return JSON.parse(reply.string());
  }

  /** Wait until `node` has sent a report that `match` accepts; returns it. */
  async waitReport(
    node: string,
    match: (report: Record<string, unknown>) => boolean,
    timeoutMs = 60_000,
  ): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = (await this.reports(node)).find(match);
      if (found) return found;
      if (Date.now() > deadline) {
        throw new Error(
          `no matching report from ${node} within ${timeoutMs} ms; reports: ${
            JSON.stringify(await this.reports(node)).slice(0, 2000)
          }`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Live reports and heartbeats of every node (or one). */
  watch(onMessage: (m: NodeMessage) => void, node = "*"): Subscription {
    return this.nc.subscribe(`mesh.node.${node}.>`, {
      callback: (error, msg) => {
        if (error) return;
        const [, , from, kind] = msg.subject.split(".");
        try {
          onMessage({
            node: from,
            kind: kind as NodeMessage["kind"],
            body: JSON.parse(msg.string()),
          });
        } catch { /* not JSON: not from a host */ }
      },
    });
  }

  /** The recorded state (nodes, tokens). */
  state(): Promise<MeshState> {
    return readState(this.dir);
  }

  async close(): Promise<void> {
    this.#enrolSub?.unsubscribe();
    await this.nc.close().catch(() => {});
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** One message as `STREAM.MSG.GET` returns it (headers and data in base64). */
interface StoredMessage {
  subject: string;
  seq: number;
  hdrs?: string;
  data?: string;
}

/** How a declaration is signed: `notAfter` makes nodes refuse it after then. */
export interface SignOptions {
  notAfter?: Date;
}

/** The headers of `body` for `node`: its signature by `key`, and the rotations to `key`. */
function signedHeaders(
  key: KeyPair,
  rotations: readonly string[],
  node: string,
  body: Uint8Array,
  { notAfter }: SignOptions,
): MsgHdrs {
  const h = headers();
  h.set(SIGNATURE_HEADER, signDeclaration(key, node, body, { notAfter }));
  if (rotations.length > 0) h.set(ROTATION_HEADER, rotationHeader(rotations));
  return h;
}

function decodeBase64Text(b64: string): string {
  return new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
}

/** The value of header `name` in a stored message's base64 header block, or null. */
function headerOf(hdrs: string | undefined, name: string): string | null {
  if (!hdrs) return null;
  const wanted = name.toLowerCase();
  for (const line of decodeBase64Text(hdrs).split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === wanted) {
      return line.slice(colon + 1).trim();
    }
  }
  return null;
}
