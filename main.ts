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
    ownPaths: OWN_PATHS,
    bundlePath: BUNDLE_PATH,
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
