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
import { checkServerIdentity, type PeerCertificate } from "node:tls";
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
import { type EnrolRequest, enrolStatement } from "../../src/link/enrol.ts";
import {
  CONTENT_SUBJECTS,
  contentDigestsOf,
  DECLARATION_STREAM,
  declarationConsumer,
  ENROL_SUBJECTS,
  MESSAGE_ID_HEADER,
  OBJECT_READS,
  subjectsOf,
} from "../../src/link/subjects.ts";
import { namedNodes, pushSubjectOf } from "./auth.ts";
import { CHUNK, OBJECT_STORE_BYTES, objectStoreConfig, streamConfig, STREAMS } from "./streams.ts";
import { encodeToken } from "../../src/link/token.ts";
import { signTrust, TRUST_HEADER } from "../../src/link/trust.ts";
import { issueServerCertificate, makeCa } from "../lib/certs.ts";
import { join } from "node:path";
import { unbase64url } from "../../src/link/_base64url.ts";
import {
  certifiedServers,
  checkNodeName,
  type MeshState,
  readState,
  reloadBroker,
  reloader,
  tokenBrokers,
  withState,
} from "./state.ts";

/**
 * TLS for the control plane's own connection: the CAs it has published (the trust list,
 * both during a rotation's overlap), and a certificate that names one of `urls`' hosts.
 */
export function controlTls(cas: string[], urls: string[]): TlsOptions {
  const hosts = urls.map((u) => new URL(u).hostname.replace(/^\[|\]$/g, ""));
  return {
    ca: cas,
    checkServerIdentity: (_host: string, cert: PeerCertificate) =>
      hosts.some((h) => checkServerIdentity(h, cert) === undefined)
        ? undefined
        : new Error(`the certificate names none of ${hosts.join(", ")}`),
  } as unknown as TlsOptions;
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
  #objectSub: Subscription | undefined;
  /** Every server loads the auth block as written now (coalesced, spaced; state.ts). */
  readonly #reload: () => Promise<void>;

  readonly #replicas: number;

  /** The CAs its own connection trusts (grown in place by a rotation). */
  readonly #cas: string[];

  private constructor(dir: string, nc: NatsConnection, replicas: number, cas: string[]) {
    this.dir = dir;
    this.nc = nc;
    this.#replicas = replicas;
    this.#cas = cas;
    this.#reload = reloader(dir);
  }

  /** Connect to the broker of mesh directory `dir` and make sure the streams exist. */
  static async open(dir: string): Promise<ControlPlane> {
    const state = await readState(dir);
    // The CAs it trusts the servers by: a CA rotated to later is added to this very list,
    // which the client reads again at each reconnect.
    const cas = publishedCas(state);
    const nc = await connect({
      servers: state.controlUrls ?? state.controlUrl,
      name: "nox-mesh stand-in control plane",
      authenticator: nkeyAuthenticator(new TextEncoder().encode(state.control.seed)),
      tls: controlTls(cas, state.controlUrls ?? [state.controlUrl]),
      ignoreClusterUpdates: state.cluster !== undefined,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 5000,
    });
    // A cluster keeps every stream on three servers: losing one loses nothing.
    const replicas = state.cluster ? Math.min(3, state.cluster.length) : 1;
    const control = new ControlPlane(dir, nc, replicas, cas);
    // A cluster that just started may still be electing its JetStream leader.
    for (let tries = 0;; tries++) {
      try {
        await control.#ensureStreams();
        break;
      } catch (error) {
        if (!state.cluster || tries >= 60 || /storage|resources/i.test(`${error}`)) {
          await nc.close().catch(() => {});
          throw error;
        }
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    return control;
  }

  /**
   * Make (or bring to this configuration) every stream, sized for the nodes with an
   * account plus `more` (a mint about to add them). A stream's reservation only grows:
   * a second control plane process that counted fewer nodes never shrinks it.
   */
  async #ensureStreams(more = 0): Promise<void> {
    const state = await readState(this.dir);
    const nodes = namedNodes(state).length + more;
    const wanted = [
      ...Object.keys(STREAMS).map((name) => streamConfig(name, nodes, this.#replicas)),
      objectStoreConfig(state.objectStoreBytes ?? OBJECT_STORE_BYTES, this.#replicas),
    ];
    for (const config of wanted) {
      const name = String(config.name);
      const info = await this.#api(`$JS.API.STREAM.INFO.${name}`, "");
      // An existing stream is brought to this configuration (a mesh made by an
      // older stand-in had unacknowledged, undeduplicated reports, and no limits).
      const verb = info.error ? "CREATE" : "UPDATE";
      const had = Number((info.config as { max_bytes?: number } | undefined)?.max_bytes ?? -1);
      if (had > Number(config.max_bytes)) config.max_bytes = had;
      const made = await this.#api(`$JS.API.STREAM.${verb}.${name}`, JSON.stringify(config));
      if (made.error) {
        const storage = /storage|resources/i.test(JSON.stringify(made.error));
        throw new Error(
          `cannot ${verb.toLowerCase()} stream ${name}: ${JSON.stringify(made.error)}` +
            (storage
              ? `; the broker cannot reserve ${config.max_bytes} bytes for it (${nodes} ` +
                "nodes): raise its JetStream max_file_store"
              : ""),
        );
      }
    }
    await this.#ensureConsumers(state, namedNodes(state));
  }

  /** Make every named node's declaration consumer as configured (`open` does it too). */
  async ensureConsumers(): Promise<void> {
    const state = await readState(this.dir);
    await this.#whileElecting(() => this.#ensureConsumers(state, namedNodes(state)));
  }

  /**
   * `work` (JetStream API requests), tried again for up to 30 s while a cluster has no
   * answer (a server just restarted, a stream or consumer electing its leader).
   */
  async #whileElecting(work: () => Promise<void>): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        return await work();
      } catch (error) {
        const text = `${(error as Error).message} ${(error as Error).cause ?? ""}`;
        if (this.#replicas === 1 || !/timeout|no responders/i.test(text)) throw error;
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  /**
   * Make each of `nodes`' declaration consumer (src/link/subjects.ts,
   * `declarationConsumer`) unless it exists as configured: the node cannot make one
   * (its permissions grant no JetStream API), so this is how its pushes reach it.
   * A consumer of another configuration (an older stand-in, another heartbeat) is
   * made again; it then delivers the node's last declaration once more.
   */
  async #ensureConsumers(state: MeshState, nodes: string[]): Promise<void> {
    const existing = new Map<string, Record<string, unknown>>();
    for (let offset = 0;;) {
      const page = await this.#api(
        `$JS.API.CONSUMER.LIST.${DECLARATION_STREAM}`,
        JSON.stringify({ offset }),
      ) as { consumers?: { name: string; config: Record<string, unknown> }[]; total?: number };
      for (const c of page.consumers ?? []) existing.set(c.name, c.config);
      offset += page.consumers?.length ?? 0;
      if (!page.consumers?.length || offset >= (page.total ?? 0)) break;
    }
    for (const node of nodes) {
      const wanted = declarationConsumer(node, {
        ...state.push,
        deliverSubject: pushSubjectOf(state, node),
      });
      const had = existing.get(subjectsOf(node).consumer);
      if (had && Object.entries(wanted).every(([k, v]) => had[k] === v)) continue;
      const name = subjectsOf(node).consumer;
      if (had) await this.#api(`$JS.API.CONSUMER.DELETE.${DECLARATION_STREAM}.${name}`, "");
      const made = await this.#api(
        `$JS.API.CONSUMER.DURABLE.CREATE.${DECLARATION_STREAM}.${name}`,
        JSON.stringify({ stream_name: DECLARATION_STREAM, config: wanted }),
      );
      if (made.error) {
        throw new Error(
          `cannot make the declaration consumer of ${node}: ${JSON.stringify(made.error)}`,
        );
      }
    }
  }

  /**
   * Put bytes into the mesh's object store, named by their SHA-256 (hex): the chunks,
   * then the description (src/link/subjects.ts, CONTENT_SUBJECTS), each replacing what
   * was there; returns the digest. A node reads it once a declaration addressed to it
   * names it (`declare` grants it). `name` stores them under another name (tests: a
   * tampered object).
   */
  async putContent(bytes: Uint8Array, { name }: { name?: string } = {}): Promise<string> {
    const sha256 = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource))
      .toHex();
    const as = name ?? sha256;
    if (!/^[0-9a-f]{64}$/.test(as)) throw new Error(`not a SHA-256 (hex): ${JSON.stringify(as)}`);
    let chunks = 0;
    for (let at = 0; at < bytes.length; at += CHUNK) {
      await this.#jsPublish(CONTENT_SUBJECTS.chunk(as, chunks), bytes.subarray(at, at + CHUNK));
      chunks++;
    }
    const meta = {
      v: 1,
      size: bytes.length,
      chunks,
      chunkSize: CHUNK,
      at: new Date().toISOString(),
    };
    await this.#jsPublish(CONTENT_SUBJECTS.meta(as), JSON.stringify(meta));
    return sha256;
  }

  async #jsPublish(subject: string, body: Uint8Array | string, h?: Msg["headers"]) {
    const ack = await this.nc.request(subject, body, { timeout: 10_000, headers: h });
    const answer = JSON.parse(ack.string());
    if (answer.error) {
      throw new Error(`the broker did not store ${subject}: ${JSON.stringify(answer.error)}`);
    }
  }

  /**
   * One JetStream API request. Just after a cluster member restarted (or the meta leader
   * moved) the API may not answer, or have no responder, for a while: asked again for up
   * to 60 s (every request here is idempotent: INFO, and CREATE or UPDATE of the same
   * configuration).
   */
  async #api(
    subject: string,
    body: string,
  ): Promise<Record<string, unknown> & { error?: unknown }> {
    const deadline = Date.now() + 60_000;
    for (let pause = 250;; pause = Math.min(pause * 2, 4000)) {
      try {
        const reply = await this.nc.request(subject, body, { timeout: 10_000 });
        return JSON.parse(reply.string());
      } catch (error) {
        const text = `${(error as Error).message} ${(error as Error).cause}`;
        if (!/no responders|timeout/i.test(text) || Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
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
    // Each new node's share of every stream is reserved on the broker before its account
    // exists: a broker that cannot hold another node says so here, and no token is made.
    const known = new Set(namedNodes(await readState(this.dir)));
    const added = new Set(nodes.filter((n) => !known.has(n))).size;
    if (added > 0) await this.#whileElecting(() => this.#ensureStreams(added));
    const state = await withState(this.dir, (s) => {
      if (via !== undefined && !s.leaves?.[via]) {
        throw new Error(`no leaf server "${via}" in this mesh`);
      }
      for (const { node, join } of joins) {
        s.tokens[join.getPublicKey()] = {
          node,
          expires,
          mintedAt: new Date().toISOString(),
          ...(via === undefined ? {} : { via }),
        };
      }
      return s;
    });
    await this.#whileElecting(() => this.#ensureConsumers(state, nodes));
    await this.#reload();
    const tokens: Record<string, string> = {};
    for (const { node, join } of joins) {
      tokens[node] = encodeToken({
        v: 4,
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

  /**
   * Answer the nodes' reads of the object store until close() (DESIGN.md §20): a node asks
   * on its own subject, `mesh.node.<node>.obj.<sha256>.<meta|chunk>` (OBJECT_READS of
   * src/link/subjects.ts), which only it may publish to; the request reaches CONTROL
   * through its account's service import. The read is answered only when the node's
   * current declaration names that object (its grants in mesh.json, which `declare` sets
   * before it publishes: no server's configuration changes), with the object store's own
   * answer (a direct get of that part, its bytes and status); otherwise with 403 and why.
   * Several control plane processes may serve: one of them answers each read.
   */
  serveObjects(log: (line: string) => void = () => {}): void {
    const grants = grantsReader(this.dir);
    this.#objectSub = this.nc.subscribe(OBJECT_READS.all, {
      queue: "mesh-objects",
      callback: (error, msg) => {
        if (error) return log(`object subscription: ${error.message}`);
        this.#answerObject(msg, grants).catch((e) =>
          log(`object read ${msg.subject} failed: ${(e as Error).message}`)
        );
      },
    });
  }

  async #answerObject(msg: Msg, grants: (node: string) => Promise<string[]>): Promise<void> {
    const read = OBJECT_READS.parse(msg.subject);
    if (!read) {
      msg.respond(new Uint8Array(0), { headers: headers(400, "not an object read") });
      return;
    }
    if (!(await grants(read.node)).includes(read.sha256)) {
      msg.respond(new Uint8Array(0), {
        headers: headers(
          403,
          `the current declaration of ${read.node} does not name object ${read.sha256}`,
        ),
      });
      return;
    }
    const part = read.part === "meta"
      ? CONTENT_SUBJECTS.meta(read.sha256)
      : CONTENT_SUBJECTS.chunk(read.sha256, read.part);
    const answer = await this.nc.request(CONTENT_SUBJECTS.get(part), new Uint8Array(0), {
      timeout: 10_000,
    });
    const code = answer.headers?.code ?? 0;
    msg.respond(
      answer.data,
      code !== 0 && code !== 200
        ? { headers: headers(code, answer.headers?.description ?? "") }
        : undefined,
    );
  }

  /** Answer enrolment requests until close(). */
  serveEnrolments(log: (line: string) => void = () => {}): void {
    this.#enrolSub = this.nc.subscribe(ENROL_SUBJECTS, {
      callback: (error, msg) => {
        if (error) return log(`enrolment subscription: ${error.message}`);
        this.#enrol(msg).then(
          (line) => log(line),
          (e) => log(`enrolment failed: ${(e as Error).message}`),
        );
      },
    });
  }

  /**
   * One enrolment request, on `mesh.enrol.<node>.<join key>`: the broker let only that
   * join key publish there (joinPermissions), so the subject, not the request, says which
   * token is spent and for which node. The new key must be an NKey user key (`U…`): an
   * account or operator key in auth.conf would make every later reload fail.
   */
  async #enrol(msg: Msg): Promise<string> {
    const [, , node, joinKey] = msg.subject.split(".");
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
    if (typeof request.publicKey !== "string" || !isUserKey(request.publicKey)) {
      return refuse(
        `the node's key must be an NKey user public key (U…), not ${
          JSON.stringify(String(request.publicKey).slice(0, 60))
        }`,
      );
    }
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
      const token = s.tokens[joinKey];
      if (!token || token.node !== node) return "no such token for this node";
      if (token.usedAt) return `the token was already used at ${token.usedAt}`;
      if (Date.parse(token.expires) <= Date.now()) return `the token expired at ${token.expires}`;
      token.usedAt = new Date().toISOString();
      s.nodes[node] = {
        publicKey: request.publicKey,
        admittedAt: token.usedAt,
        serial: s.nodes[node]?.serial ?? 0,
        ...(token.via === undefined ? {} : { site: token.via }),
      };
      return undefined;
    });
    if (problem) return refuse(problem);
    msg.respond(JSON.stringify({ ok: true }));
    await this.nc.flush();
    await withState(this.dir, (s) => {
      s.tokens[joinKey].retired = true;
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
    const trust = state.trust && state.trust.serial > 0 ? signTrust(key, state.trust) : undefined;
    return (node, body, options = {}) =>
      signedHeaders(key, rotations, node, body, { ...options, trust });
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
    const { republished, skipped } = republish
      ? await this.republish(from)
      : { republished: {}, skipped: [] };
    return { from, to, republished, skipped };
  }

  /**
   * Publish every admitted node's last declaration again under its next serial, signed
   * with the current key (and carrying the current rotations and trust list): only one
   * whose signature verifies against `signedBy` (this control plane's key, or the one it
   * rotated from); anything else the stream holds is never signed again (`skipped`).
   */
  async republish(
    signedBy: string,
  ): Promise<{ republished: Record<string, number>; skipped: string[] }> {
    const republished: Record<string, number> = {};
    const skipped: string[] = [];
    for (const node of Object.keys((await this.state()).nodes)) {
      const last = await this.lastDeclaration(node);
      if (!last) continue;
      const body = new TextEncoder().encode(last.body);
      const verified = verifyDeclaration(
        signedBy,
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
    return { republished, skipped };
  }

  /**
   * Renew every server's certificate under the mesh's current CA (a new key, the same
   * names, 30 days), the way an ACME client renews one, and have every server load it
   * (a configuration reload: the connections they have stay, new ones see the new
   * certificate). Nodes take it without anything done on them: they trust the CA.
   */
  async renewCertificates(): Promise<{ renewed: string[] }> {
    const state = await this.state();
    const issuer = state.ca;
    if (!issuer) {
      throw new Error(
        "this mesh's state has no CA key (made with `init --ca` elsewhere): renew its certificates where its CA is",
      );
    }
    const renewed: string[] = [];
    for (const server of certifiedServers(state)) {
      await issueServerCertificate({
        caFile: issuer.certFile,
        caKeyFile: issuer.keyFile,
        ...server.cert,
      });
      renewed.push(server.cert.certFile);
    }
    await reloadBroker(this.dir, state);
    return { renewed };
  }

  /**
   * Start a rotation of the mesh's CA: a new CA is made, and a trust update that trusts
   * it beside the current one (the current one until `overlapSeconds` from now) is
   * signed and sent with every node's last declaration, published again. The servers
   * keep their certificates of the current CA: a node away meanwhile links again when it
   * returns within the overlap, and takes the update then. `withdrawOldCa` ends it.
   */
  async rotateCa(
    { overlapSeconds }: { overlapSeconds: number },
  ): Promise<{ trust: number; until: string; republished: Record<string, number> }> {
    const until = new Date(Date.now() + overlapSeconds * 1000).toISOString();
    const current = await this.state();
    if (!current.ca) {
      throw new Error("this mesh's state has no CA key: its CA cannot be rotated here");
    }
    const serial = (current.trust?.serial ?? 0) + 1;
    const certFile = join(this.dir, `ca-${serial}.pem`);
    const keyFile = join(this.dir, `ca-${serial}.key`);
    const pem = await makeCa(certFile, keyFile, { name: `nox-mesh stand-in CA ${serial}` });
    this.#cas.push(pem);
    await withState(this.dir, (s) => {
      s.nextCa = { certFile, keyFile };
      s.trust = {
        serial,
        issued: new Date().toISOString(),
        cas: [{ pem: s.caPem, until }, { pem }],
      };
    });
    const { republished } = await this.republish((await this.state()).signer.publicKey);
    return { trust: serial, until, republished };
  }

  /**
   * End a rotation of the mesh's CA: every server gets a certificate of the new CA and
   * loads it (the servers' own CA file holds both while they change over), the old CA is
   * dropped from the trust list, and that update goes to every node with its last
   * declaration. A node that never took the rotation's update (away for the whole
   * overlap) is refused by every server from now on, and says why.
   */
  async withdrawOldCa(): Promise<{ trust: number; republished: Record<string, number> }> {
    const state = await this.state();
    const next = state.nextCa;
    if (!next) throw new Error("no CA rotation is under way (rotate-ca starts one)");
    const pem = await Deno.readTextFile(next.certFile);
    const bundle = state.ca?.bundleFile;
    if (bundle) await Deno.writeTextFile(bundle, `${state.caPem.trim()}\n${pem.trim()}\n`);
    for (const server of certifiedServers(state)) {
      await issueServerCertificate({
        caFile: next.certFile,
        caKeyFile: next.keyFile,
        ...server.cert,
      });
    }
    const serial = (state.trust?.serial ?? 0) + 1;
    await withState(this.dir, (s) => {
      s.ca = { ...next, ...(bundle ? { bundleFile: bundle } : {}) };
      delete s.nextCa;
      s.caPem = pem;
      s.trust = { serial, issued: new Date().toISOString(), cas: [{ pem }] };
    });
    await reloadBroker(this.dir, await this.state());
    if (bundle) {
      await Deno.writeTextFile(bundle, pem);
      await reloadBroker(this.dir, await this.state());
    }
    const { republished } = await this.republish(state.signer.publicKey);
    return { trust: serial, republished };
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
    // The node may read exactly the objects this declaration names: granted (and the
    // previous declaration's others withdrawn) on every server before it is published.
    await this.#grantContent(node, body);
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

  /**
   * Let `node` read exactly the objects `body` (a declaration) names, and no others: its
   * grants in mesh.json, which the object service (`serveObjects`) answers by. No server's
   * configuration changes. Nothing to do when they are the ones it holds.
   */
  async #grantContent(node: string, body: Uint8Array): Promise<void> {
    let declaration: unknown;
    try {
      declaration = JSON.parse(new TextDecoder().decode(body));
    } catch {
      declaration = undefined; // bytes published as they are (refusal tests): names nothing
    }
    const wanted = contentDigestsOf(declaration);
    const same = (s: MeshState) => {
      const had = s.grants?.[node] ?? [];
      return had.length === wanted.length && had.every((sha, i) => sha === wanted[i]);
    };
    if (same(await readState(this.dir))) return;
    await withState(this.dir, (s) => {
      if (same(s)) return;
      s.grants = { ...s.grants, [node]: wanted };
      if (wanted.length === 0) delete s.grants[node];
    });
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

  /**
   * `node`'s declaration consumer as JetStream describes it (its configuration, what it
   * delivered and had acknowledged, `push_bound` while the node listens), or undefined.
   */
  async consumerInfo(node: string): Promise<Record<string, unknown> | undefined> {
    const info = await this.#api(
      `$JS.API.CONSUMER.INFO.${DECLARATION_STREAM}.${subjectsOf(node).consumer}`,
      "",
    );
    return info.error ? undefined : info;
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
    this.#objectSub?.unsubscribe();
    await this.nc.close().catch(() => {});
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * The objects each node's current declaration names, as mesh.json records them (`grants`),
 * read again whenever the file changed (another process declares).
 */
function grantsReader(dir: string): (node: string) => Promise<string[]> {
  let seen: { mtime: number; size: number; grants: Record<string, string[]> } | undefined;
  const file = join(dir, "mesh.json");
  return async (node) => {
    const info = await Deno.stat(file);
    const mtime = info.mtime?.getTime() ?? 0;
    if (!seen || seen.mtime !== mtime || seen.size !== info.size) {
      const state = await readState(dir);
      seen = { mtime, size: info.size, grants: state.grants ?? {} };
    }
    return seen.grants[node] ?? [];
  };
}

/** Whether `key` is an NKey user public key (prefix U, checksum right). */
function isUserKey(key: string): boolean {
  if (!key.startsWith("U")) return false;
  try {
    fromPublic(key);
    return true;
  } catch {
    return false;
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
  /** The signed trust update sent with it (`Mesh-Trust`), when the trust list moved on. */
  trust?: string;
}

/** The headers of `body` for `node`: its signature by `key`, and the rotations to `key`. */
function signedHeaders(
  key: KeyPair,
  rotations: readonly string[],
  node: string,
  body: Uint8Array,
  { notAfter, trust }: SignOptions,
): MsgHdrs {
  const h = headers();
  h.set(SIGNATURE_HEADER, signDeclaration(key, node, body, { notAfter }));
  if (rotations.length > 0) h.set(ROTATION_HEADER, rotationHeader(rotations));
  if (trust) h.set(TRUST_HEADER, trust);
  return h;
}

/** The CAs the control plane trusts the servers by: its published trust list, or the token's CA. */
export function publishedCas(state: MeshState): string[] {
  return state.trust ? state.trust.cas.map((ca) => ca.pem) : [state.caPem];
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
