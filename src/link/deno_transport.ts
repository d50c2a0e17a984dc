/**
 * A transport for the NATS client (@nats-io/nats-core) on Deno's own sockets, in place
 * of @nats-io/transport-node's (node:net and node:tls): `Deno.connect`, then, once the
 * server's INFO says TLS is required, `Deno.startTls` with the CAs and the server name
 * this connection was given (issue 37, item 2). Written for the client's `Transport`
 * interface; the protocol (CONNECT, PING, the parser) stays the client's.
 *
 * NATS servers speak first in plain text (INFO, with `tls_required`), and the client
 * starts TLS on the same socket after it (nats-server 2.9.10 knows nothing else); a
 * server configured to expect TLS first (`handshake_first`, nats-server 2.10 and later)
 * is met with `tls.handshakeFirst`.
 *
 * What Deno's TLS gives and what it does not (Deno 2.9.6, tests/bench/RESULTS.md "Issue
 * 37, item 2"): `caCerts` ADD to the runtime's own root store (Mozilla's roots unless
 * DENO_TLS_CA_STORE says otherwise), they do not replace it; and a TLS connection shows
 * nothing of the certificate it verified. So this transport alone does not keep the
 * link's "only the mesh's CA" nor report the broker's certificate: see connection_deno.ts.
 */
import type { ConnectionOptions, NatsConnection, Server, ServerInfo } from "@nats-io/nats-core";
import {
  checkOptions,
  errors,
  INFO,
  NatsConnectionImpl,
  setTransportFactory,
  type Transport,
} from "@nats-io/nats-core/internal";
import { VERSION } from "../version.ts";

/** TLS as this transport does it: whom to trust and which name the certificate must carry. */
export interface DenoTlsOptions {
  /** PEM certificates to verify the server's against (they add to the runtime's roots). */
  caCerts: string[];
  /** The name (or address) the server's certificate must carry. */
  hostname: string;
  /** The server expects TLS before its INFO (nats-server 2.10's `handshake_first`). */
  handshakeFirst?: boolean;
}

/** The client's options with this transport's TLS. */
export type DenoConnectionOptions = Omit<ConnectionOptions, "tls"> & { tls: DenoTlsOptions };

/** The longest INFO line taken before TLS (a server's is a few hundred bytes). */
const MAX_INFO = 64 * 1024;
const READ_SIZE = 64 * 1024;
const CRLF = new Uint8Array([13, 10]);

/** Open a NATS connection over Deno's sockets (the client's `connect`, this transport). */
export function denoConnect(options: DenoConnectionOptions): Promise<NatsConnection> {
  setTransportFactory({ factory: () => new DenoTransport() });
  return NatsConnectionImpl.connect(options as unknown as ConnectionOptions);
}

/** One socket to one server, as the client's protocol handler drives it. */
export class DenoTransport implements Transport {
  readonly lang = "nats.js (nox-mesh-host deno transport)";
  readonly version = VERSION;
  closeError?: Error;
  #conn?: Deno.Conn;
  #encrypted = false;
  #connected = false;
  #done = false;
  #frames: Uint8Array[] = [];
  #wake = Promise.withResolvers<void>();
  #closed = Promise.withResolvers<void | Error>();
  #writing: Promise<void> = Promise.resolve();

  get isClosed(): boolean {
    return this.#done;
  }

  async connect(server: Server, options: ConnectionOptions): Promise<void> {
    const tls = (options as unknown as DenoConnectionOptions).tls as DenoTlsOptions | undefined;
    const hostname = tls?.hostname || server.tlsName || server.hostname;
    try {
      if (tls?.handshakeFirst) {
        this.#conn = await Deno.connectTls({
          hostname: server.hostname,
          port: server.port,
          caCerts: tls.caCerts,
        });
        this.#encrypted = true;
        await (this.#conn as Deno.TlsConn).handshake();
        this.#throwIfDiscarded();
        checkOptions(await this.#readInfo(), options);
      } else {
        const tcp = await Deno.connect({ hostname: server.hostname, port: server.port });
        tcp.setNoDelay(true);
        this.#conn = tcp;
        this.#throwIfDiscarded();
        const info = await this.#readInfo();
        checkOptions(info, options);
        if (info.tls_required === true || (info.tls_available === true && tls)) {
          if (!tls) {
            throw errors.InvalidArgumentError.format("tls", "is required by the server");
          }
          this.#conn = await Deno.startTls(this.#conn as Deno.TcpConn, {
            hostname,
            caCerts: tls.caCerts,
          });
          this.#encrypted = true;
          // The handshake now, so that a refused certificate fails the connect, not a write.
          await (this.#conn as Deno.TlsConn).handshake();
          this.#throwIfDiscarded();
        }
      }
      this.#connected = true;
      this.#read();
    } catch (error) {
      this.#shut();
      throw error;
    }
  }

  /** The server's INFO line, read and kept for the client's parser (nothing is read past it). */
  async #readInfo(): Promise<ServerInfo> {
    const buffer = new Uint8Array(READ_SIZE);
    let seen = new Uint8Array(0);
    while (true) {
      const n = await this.#conn!.read(buffer);
      if (n === null) throw new errors.ConnectionError("the server closed before its INFO");
      const next = new Uint8Array(seen.length + n);
      next.set(seen);
      next.set(buffer.subarray(0, n), seen.length);
      seen = next;
      const end = indexOfCrlf(seen);
      if (end >= 0) {
        if (end + 2 !== seen.length && !this.#encrypted) {
          // Before TLS the server sends its INFO and waits: anything after it would be
          // read in the clear and then taken as if it had come over TLS.
          throw new errors.ProtocolError("the server sent more than its INFO before TLS");
        }
        const line = new TextDecoder().decode(seen.subarray(0, end + 2));
        const m = INFO.exec(line);
        if (!m) throw new errors.ProtocolError("unexpected response from server");
        this.#frames.push(seen);
        return JSON.parse(m[1]);
      }
      if (seen.length > MAX_INFO) throw new errors.ProtocolError("no INFO from the server");
    }
  }

  #throwIfDiscarded(): void {
    if (this.#done) throw new errors.ConnectionError("the connection was given up");
  }

  /** Read until the socket ends; every chunk goes to the client's parser in order. */
  async #read(): Promise<void> {
    const buffer = new Uint8Array(READ_SIZE);
    let failure: Error | undefined;
    try {
      while (!this.#done) {
        const n = await this.#conn!.read(buffer);
        if (n === null) break;
        this.#frames.push(buffer.slice(0, n));
        this.#wake.resolve();
      }
    } catch (error) {
      if (!this.#done) failure = error instanceof Error ? error : new Error(String(error));
    }
    await this.#end(failure, false);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Uint8Array> {
    return this.#iterate();
  }

  async *#iterate(): AsyncIterableIterator<Uint8Array> {
    while (true) {
      if (this.#frames.length === 0) {
        if (this.#done) return;
        await this.#wake.promise;
        this.#wake = Promise.withResolvers<void>();
      }
      const frames = this.#frames;
      this.#frames = [];
      for (const frame of frames) yield frame;
    }
  }

  isEncrypted(): boolean {
    return this.#encrypted;
  }

  send(frame: Uint8Array): void {
    if (this.#done || !this.#conn || frame.length === 0) return;
    const conn = this.#conn;
    // In order, one after the other; a failed write is left to the reader and the pings
    // to notice (the socket ends), as the client expects of a transport.
    this.#writing = this.#writing.then(() => writeAll(conn, frame)).catch(() => {});
  }

  close(error?: Error): Promise<void> {
    return this.#end(error, true);
  }

  disconnect(): void {
    this.#end(undefined, true).catch(() => {});
  }

  discard(): void {
    this.#done = true;
    this.#shut();
    this.#wake.resolve();
  }

  closed(): Promise<void | Error> {
    return this.#closed.promise;
  }

  async #end(error: Error | undefined, internal: boolean): Promise<void> {
    if (!this.#connected) {
      // Given up before it came up (the client's own timeout): the socket goes too.
      this.discard();
      return;
    }
    if (this.#done) {
      this.#shut();
      return;
    }
    this.#done = true;
    this.closeError = error;
    // What was sent before a close asked for by the client goes out first.
    if (!error && internal) await this.#writing;
    this.#shut();
    this.#wake.resolve();
    this.#closed.resolve(this.closeError);
  }

  #shut(): void {
    try {
      this.#conn?.close();
    } catch {
      // already closed
    }
    this.#conn = undefined;
  }
}

async function writeAll(conn: Deno.Conn, frame: Uint8Array): Promise<void> {
  for (let at = 0; at < frame.length;) at += await conn.write(frame.subarray(at));
}

function indexOfCrlf(bytes: Uint8Array): number {
  for (let i = 0; i + 1 < bytes.length; i++) {
    if (bytes[i] === CRLF[0] && bytes[i + 1] === CRLF[1]) return i;
  }
  return -1;
}
