/**
 * The program: what the packages run (`deno task build` bundles or compiles this file).
 * It holds the command line and this machine's adapters, and loads every other part
 * only when a command needs it: `version` loads no engine, `apply FILE` and `plan FILE`
 * load the engine, the store and the file system but never the link (the NATS client,
 * its keys, node:crypto), which only `run`, `enrol` and `status` load. The bundled form
 * is one file per part (packaging/build.ts); mod.ts is the library.
 */
import { main } from "./src/cli/main.ts";
import type { CliIo } from "./src/cli/io.ts";
import { BUNDLE_PATH, OWN_PATHS, SELF_PROGRAM } from "./packaging/program_own_paths.ts";
import { AS_OWNER_COMMAND } from "./os/posix-fs/_protocol.ts";

/** The real process's world: its streams, its signals, this machine's adapters. */
export function processIo(): CliIo {
  const encoder = new TextEncoder();
  const write = (stream: typeof Deno.stdout) => (text: string) => {
    const bytes = encoder.encode(text);
    let written = 0;
    while (written < bytes.length) written += stream.writeSync(bytes.subarray(written));
  };
  const aborter = new AbortController();
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    Deno.addSignalListener(signal, () => {
      // The first signal stops the apply between two steps; a second one insists.
      if (aborter.signal.aborted) Deno.exit(130);
      aborter.abort(signal);
    });
  }
  return {
    stdout: write(Deno.stdout),
    stderr: write(Deno.stderr),
    stdin: () => new Response(Deno.stdin.readable).bytes(),
    providers: async (scope, config) => {
      if (scope === "files") {
        // The file system's descriptor alone: os/mod.ts would load every provider's code.
        const { PROVIDER } = await import("./os/posix-fs/provider.ts");
        return {
          fs: PROVIDER.open({
            name: PROVIDER.names[0],
            stateDir: config.stateDir,
            ...(SELF_PROGRAM ? { self: SELF_PROGRAM } : {}),
          }),
        };
      }
      const { detectProviders } = await import("./os/mod.ts");
      return await detectProviders({
        packageManager: config.packageManager,
        stateDir: config.stateDir,
        ...(SELF_PROGRAM ? { self: SELF_PROGRAM } : {}),
      });
    },
    profile: async () => (await import("./os/mod.ts")).detectProfile(),
    signal: aborter.signal,
    memoryTrim,
    ownPaths: OWN_PATHS,
    bundlePath: BUNDLE_PATH,
  };
}

/**
 * Giving freed memory back (issue 37): glibc keeps what the process freed, and Deno 2.9
 * calls malloc_trim on a SIGUSR2 when started with DENO_USR2_MEMORY_TRIM=1 (the launcher
 * sets it for the host it starts). A listener of our own comes first: without the variable
 * (a `run` started by hand) or before the runtime's handler is in place, a SIGUSR2 would end
 * the process; with it the signal is harmless, and the runtime's handler runs beside it.
 * Signalling its own process needs no permission in Deno 2.9.6 (another process's would:
 * `--allow-run`); tests/run_memory_test.ts runs it under the development set, bench:link
 * --packaged under the tarball's.
 */
function memoryTrim(): () => void {
  Deno.addSignalListener("SIGUSR2", () => {});
  let failed = false;
  return () => {
    if (failed) return;
    // Where V8 exposes its collector (--expose-gc), the garbage goes first, so its pages and
    // the memory they held outside the heap are free before the trim.
    (globalThis as { gc?: () => void }).gc?.();
    try {
      Deno.kill(Deno.pid, "SIGUSR2");
    } catch {
      failed = true; // a runtime that refuses it: memory is not given back, nothing else changes
    }
  };
}

/**
 * The program: the command line, or, when the host runs itself as the owner of a directory
 * (`__as-owner UID GID`, os/posix-fs/serve.ts), that helper, which loads nothing else.
 */
export async function program(args: string[]): Promise<number> {
  if (args[0] === AS_OWNER_COMMAND) {
    const { serveAsOwner } = await import("./os/posix-fs/serve.ts");
    return await serveAsOwner(args.slice(1));
  }
  return await main(args, processIo());
}

if (import.meta.main) {
  Deno.exit(await program(Deno.args));
}
