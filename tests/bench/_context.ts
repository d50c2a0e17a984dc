/**
 * What every bench prints beside its figures: the machine, the commit measured
 * (and whether the checkout had changes beside it), the date and the load
 * average, so that tests/bench/RESULTS.md can say what each figure belongs to.
 */

const REPO = new URL("../..", import.meta.url).pathname;

async function output(program: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(program, { args, stdout: "piped", stderr: "null" }).output();
  return out.success ? new TextDecoder().decode(out.stdout).trim() : "";
}

async function loadAverage(): Promise<string> {
  return (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
}

/** The bench's context, read when it starts; `line` also gives the load average now. */
export interface BenchContext {
  /** Short commit of the checkout, with " + uncommitted changes" when it has any. */
  commit: string;
  /** One line: machine, Deno, commit, date, load average at the start and now. */
  line(): Promise<string>;
}

/** Reads the machine, the checkout's commit and the load average at the start. */
export async function benchContext(): Promise<BenchContext> {
  const hash = await output("git", ["-C", REPO, "rev-parse", "--short", "HEAD"]) || "unknown";
  const dirty = await output("git", ["-C", REPO, "status", "--porcelain", "--untracked-files=no"]);
  const commit = dirty ? `${hash} + uncommitted changes` : hash;
  const cpu = (await Deno.readTextFile("/proc/cpuinfo")).match(/model name\s*:\s*(.*)/)?.[1];
  const atStart = await loadAverage();
  const date = new Date().toISOString().slice(0, 10);
  return {
    commit,
    async line() {
      return `machine: ${Deno.build.target}, ${navigator.hardwareConcurrency} cores ` +
        `(${cpu ?? "unknown CPU"}), Deno ${Deno.version.deno}; commit ${commit}, ${date}; ` +
        `load average ${atStart} at the start, ${await loadAverage()} at the end`;
    },
  };
}
