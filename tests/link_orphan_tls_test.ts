/**
 * A TLS error on a socket nobody listens to any more (the NATS client removes its
 * listeners from a socket it gives up) must not end the host: Deno's node:tls throws
 * such an error uncaught. Real processes: a TLS server, a proxy on loopback that
 * injects a record no key decrypts when told to, and a client program that opens a
 * node:tls socket and drops its listeners once the handshake is done, as the NATS
 * client does. Each step waits for what the other side said, never for a time.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { makeCertificates } from "../lab/lib/certs.ts";

/**
 * The client program: `guard` installs the link's guard (`bare` does not). It stays
 * until its stdin ends ("alive", exit 0); a line "throw" throws an error of its own.
 */
function clientProgram(connection: string): string {
  return `
import tls from "node:tls";
import { guardOrphanTlsErrors } from ${JSON.stringify(connection)};
const [port, caFile, mode] = Deno.args;
if (mode === "guard") guardOrphanTlsErrors();
// What reached the top uncaught, said on stdout (the runtime's own line may name another).
globalThis.addEventListener("error", (e) => console.log("uncaught: " + String(e.error)));
const s = tls.connect({ host: "127.0.0.1", port: Number(port), ca: Deno.readTextFileSync(caFile), servername: "localhost" }, () => {
  s.removeAllListeners();
  console.log("handshake done; listeners dropped");
});
const decoder = new TextDecoder();
for await (const chunk of Deno.stdin.readable) {
  if (decoder.decode(chunk).includes("throw")) throw new Error("an error of the program itself");
}
console.log("alive");
Deno.exit(0);
`;
}

/** A TLS server behind a proxy on loopback; `inject` writes a bogus record to the last client. */
async function hostileBroker(dir: string) {
  const certs = await makeCertificates(dir);
  const server = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: await Deno.readTextFile(certs.certFile),
    key: await Deno.readTextFile(certs.keyFile),
  });
  const conns: Deno.Conn[] = [];
  let last: Deno.Conn | undefined;
  (async () => {
    for await (const c of server) {
      conns.push(c);
      (c as Deno.TlsConn).handshake().catch(() => {});
    }
  })().catch(() => {});
  const proxy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  (async () => {
    for await (const c of proxy) {
      last = c;
      conns.push(c);
      const up = await Deno.connect({
        hostname: "127.0.0.1",
        port: (server.addr as Deno.NetAddr).port,
      });
      conns.push(up);
      c.readable.pipeTo(up.writable).catch(() => {});
      up.readable.pipeTo(new WritableStream({ write: (chunk) => c.write(chunk).then(() => {}) }))
        .catch(() => {});
    }
  })().catch(() => {});
  return {
    port: (proxy.addr as Deno.NetAddr).port,
    caFile: certs.caFile,
    /** An application-data record of random bytes: it decrypts under no key. */
    async inject() {
      const record = new Uint8Array(5 + 48);
      record.set([0x17, 3, 3, 0, 48]);
      crypto.getRandomValues(record.subarray(5));
      await last!.write(record);
    },
    close() {
      server.close();
      proxy.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed already */ }
      }
    },
  };
}

/** The text of a stream so far, and a wait for a pattern in it. */
function reader(stream: ReadableStream<Uint8Array>) {
  let text = "";
  let wake = () => {};
  const done = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      text += decoder.decode(chunk, { stream: true });
      wake();
    }
    wake();
  })();
  return {
    get text() {
      return text;
    },
    done,
    async until(pattern: RegExp, what: string): Promise<void> {
      let ended = false;
      done.then(() => ended = true);
      while (!pattern.test(text)) {
        if (ended) throw new Error(`${what}: the stream ended first:\n${text}`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          done.then(() => resolve());
        });
      }
    },
  };
}

Deno.test("link: a TLS error on a socket already given up is said and ignored; the bare runtime dies of it, and any other uncaught error still ends the process", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxln-orphan-" });
  const broker = await hostileBroker(dir);
  try {
    const program = join(dir, "client.ts");
    await Deno.writeTextFile(
      program,
      clientProgram(pathToFileURL(join(Deno.cwd(), "src/link/connection.ts")).href),
    );
    const start = (mode: string) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--quiet",
          "--config",
          join(Deno.cwd(), "deno.json"),
          program,
          String(broker.port),
          broker.caFile,
          mode,
        ],
        env: { NO_COLOR: "1" },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const out = reader(child.stdout);
      const err = reader(child.stderr);
      const stdin = child.stdin.getWriter();
      return {
        out,
        err,
        async handshake() {
          await out.until(/handshake done/, `${mode}: the handshake`);
        },
        async write(text: string) {
          await stdin.write(new TextEncoder().encode(text));
        },
        async end() {
          await stdin.close().catch(() => {});
          const status = await child.status;
          await Promise.all([out.done, err.done]);
          return status.code;
        },
      };
    };

    // Without the guard the runtime's uncaught error ends the process (it ended enrol).
    const bare = start("bare");
    await bare.handshake();
    await broker.inject();
    await bare.out.until(/uncaught: Error: cannot decrypt peer's message/, "bare: the error");
    assert.notEqual(await bare.end(), 0);
    assert.doesNotMatch(bare.out.text, /alive/);

    // With it: said on stderr, and the process goes on until it is done.
    const guarded = start("guard");
    await guarded.handshake();
    await broker.inject();
    await guarded.err.until(
      /link: a TLS error on a connection already given up was ignored: cannot decrypt peer's message/,
      "guard: the line",
    );
    assert.equal(await guarded.end(), 0, guarded.err.text);
    assert.match(guarded.out.text, /alive/);

    // The guard takes only that: the program's own uncaught error still ends it.
    const other = start("guard");
    await other.handshake();
    await other.write("throw\n");
    await other.err.until(
      /Uncaught (\(in promise\) )?Error: an error of the program itself/,
      "other: the error",
    );
    assert.notEqual(await other.end(), 0);
    assert.doesNotMatch(other.out.text, /alive/);
  } finally {
    broker.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});
