/**
 * Issue 37, item 1, the prototype measured before any change to `run` (tests/bench/RESULTS.md,
 * "The apply outside the resident process"): does an apply in a Worker that is ended after each
 * pass give `run` a smaller resident set, and at what cost per push? Not a bench task: run it as
 *   DENO_USR2_MEMORY_TRIM=1 deno run -A --v8-flags=--max-semi-space-size=1,--optimize-for-size \
 *     tests/bench/split_proto.ts --mode inproc|worker [--pushes 50] [--resources 550]
 * It stands for the resident process without its link: a store of RESOURCES resources (50
 * directories' worth of small files and the pushed file), then PUSHES new declarations, each
 * changing the pushed file, applied one after the other by the engine in this process
 * (`inproc`, as `run` does), each in a new Worker that opens the engine, admits and applies it,
 * answers with the report and is terminated (`worker`), or each in a child process of this
 * program under the same flags (`child`: the text on its standard input, the counts on its
 * output; its CPU is counted with this process's, from the children's fields of /proc/self/stat). After each pass the process asks the
 * runtime to trim (SIGUSR2, as `run` does when idle). It prints, as JSON, the wall time per
 * push (p50), the process's CPU per push (all threads, /proc/self/stat), RSS after the pushes
 * and 5 s later (idle), and the peak (VmHWM).
 */
import { parseArgs } from "node:util";
import { posix } from "node:path";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    mode: { type: "string" },
    pushes: { type: "string" },
    resources: { type: "string" },
    child: { type: "string" },
  },
});

const RESOURCES = Number(values.resources ?? 550);

function declaration(root: string, serial: number): string {
  const resources: unknown[] = [];
  const dirs = Math.round((RESOURCES - 1) / 11);
  const attrs = { owner: "root", group: "root" };
  for (let d = 0; d < dirs; d++) {
    resources.push({
      type: "directory",
      id: `d${d}`,
      path: `${root}/d${d}`,
      mode: "0755",
      ...attrs,
    });
  }
  for (let f = 0; f < RESOURCES - 1 - dirs; f++) {
    resources.push({
      type: "file",
      id: `s${f}`,
      path: `${root}/d${f % dirs}/still-${f}.conf`,
      content: `# still ${f}\nkey = ${f}\n`,
      mode: "0644",
      ...attrs,
    });
  }
  resources.push({
    type: "file",
    id: "f",
    path: `${root}/pushed.conf`,
    content: `push ${serial}\n`,
    mode: "0644",
    ...attrs,
  });
  return JSON.stringify({ version: 1, resources });
}

async function openHere(dir: string) {
  const { openEngine } = await import("../../src/engine/mod.ts");
  const { posixFileSystem } = await import("../../os/posix-fs/mod.ts");
  return await openEngine({
    stateDir: posix.join(dir, "state"),
    configPath: posix.join(dir, "host.json"),
    providers: () => Promise.resolve({ fs: posixFileSystem() }),
  });
}

/** The Worker's global scope (this file runs as the main module and as the Worker). */
const scope = self as unknown as {
  postMessage?: (message: unknown) => void;
  onmessage: ((e: MessageEvent<{ dir: string; text: string }>) => void) | null;
};

if (values.child) {
  // A child process: apply what standard input holds, print the counts.
  const { applyText } = await import("../../src/engine/mod.ts");
  using engine = await openHere(values.child);
  const text = await new Response(Deno.stdin.readable).text();
  const report = await applyText(engine, text, { source: "file", origin: "proto" });
  console.log(JSON.stringify({ changed: report.counts.changed }));
} else if (import.meta.main && !scope.postMessage) {
  const mode = values.mode ?? "inproc";
  const pushes = Number(values.pushes ?? 50);
  const dir = await Deno.makeTempDir({ prefix: "noxsplit-", dir: "/var/lib" });
  const root = posix.join(dir, "root");
  await Deno.mkdir(root);
  await Deno.writeTextFile(posix.join(dir, "host.json"), JSON.stringify({ managedRoots: [root] }));
  Deno.addSignalListener("SIGUSR2", () => {});
  const trim = () => Deno.kill(Deno.pid, "SIGUSR2");
  /** This process's V8 flags, for the child. */
  const v8 = ["--v8-flags=--max-semi-space-size=1,--optimize-for-size"];
  const ticks = async () => {
    const stat = (await Deno.readTextFile("/proc/self/stat")).split(") ")[1].split(" ");
    // utime + stime, and the children's (cutime + cstime) once they were waited for.
    return Number(stat[11]) + Number(stat[12]) + Number(stat[13]) + Number(stat[14]);
  };
  const status = async (key: string) =>
    Number(new RegExp(`${key}:\\s+(\\d+)`).exec(await Deno.readTextFile("/proc/self/status"))![1]) /
    1024;
  try {
    const { applyText } = mode === "child"
      ? { applyText: undefined as never }
      : await import("../../src/engine/mod.ts");
    // The store converged once (the first apply); in a child for `child`, whose resident
    // process never loads the engine.
    const pass = async (text: string) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", ...v8, import.meta.filename!, "--child", dir],
        stdin: "piped",
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(text));
      await writer.close();
      return JSON.parse(new TextDecoder().decode((await child.output()).stdout));
    };
    if (mode === "child") await pass(declaration(root, 0));
    else {
      using engine = await openHere(dir);
      await applyText(engine, declaration(root, 0), { source: "file", origin: "proto" });
    }
    let inproc: Awaited<ReturnType<typeof openHere>> | undefined;
    if (mode === "inproc") inproc = await openHere(dir);
    trim();
    await new Promise((r) => setTimeout(r, 2000));
    const before = await status("VmRSS");
    const times: number[] = [];
    const t0 = await ticks();
    for (let i = 1; i <= pushes; i++) {
      const text = declaration(root, i);
      const start = performance.now();
      if (mode === "child") {
        const got = await pass(text);
        if (got.changed !== 1) throw new Error(`push ${i}: ${JSON.stringify(got)}`);
      } else if (inproc) {
        const report = await applyText(inproc, text, { source: "file", origin: "proto" });
        if (report.counts.changed !== 1) throw new Error(`push ${i}: ${JSON.stringify(report)}`);
      } else {
        const worker = new Worker(import.meta.url, { type: "module" });
        const answer = new Promise<{ changed: number; error?: string }>((resolve) => {
          worker.onmessage = (e) => resolve(e.data);
          worker.onerror = (e) => resolve({ changed: -1, error: String(e.message) });
        });
        worker.postMessage({ dir, text });
        const got = await answer;
        worker.terminate();
        if (got.changed !== 1) throw new Error(`push ${i}: ${JSON.stringify(got)}`);
      }
      times.push(performance.now() - start);
      trim();
    }
    const cpuMs = (await ticks() - t0) * 10 / pushes;
    const after = await status("VmRSS");
    await new Promise((r) => setTimeout(r, 5000));
    trim();
    await new Promise((r) => setTimeout(r, 1000));
    times.sort((a, b) => a - b);
    console.log(JSON.stringify({
      mode,
      pushes,
      resources: RESOURCES,
      p50Ms: Number(times[Math.floor(times.length / 2)].toFixed(1)),
      cpuPerPushMs: Number(cpuMs.toFixed(1)),
      rssBeforeMiB: Number(before.toFixed(1)),
      rssAfterPushesMiB: Number(after.toFixed(1)),
      rssIdleMiB: Number((await status("VmRSS")).toFixed(1)),
      peakMiB: Number((await status("VmHWM")).toFixed(1)),
    }));
    inproc?.[Symbol.dispose]();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
} else {
  // In the Worker: open the engine, admit and apply the text, answer with the counts.
  scope.onmessage = async (e) => {
    try {
      const { applyText } = await import("../../src/engine/mod.ts");
      using engine = await openHere(e.data.dir);
      const report = await applyText(engine, e.data.text, { source: "file", origin: "proto" });
      scope.postMessage!({ changed: report.counts.changed });
    } catch (error) {
      scope.postMessage!({ changed: -1, error: String(error) });
    }
  };
}
