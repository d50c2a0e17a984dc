import { join } from "node:path";
import { LabError } from "./errors.ts";
import { exists, sleep } from "./_process.ts";

/** Hierarchies a lab machine gets its own directory in (cgroup v1 hybrid, as on this host). */
const HIERARCHIES = [
  { mount: "/sys/fs/cgroup/unified", id: "0", controller: "" },
  { mount: "/sys/fs/cgroup/systemd", id: "", controller: "name=systemd" },
  { mount: "/sys/fs/cgroup/memory", id: "", controller: "memory" },
] as const;

/** One group of processes (a machine or the broker) with its own directory per hierarchy. */
export class CgroupSet {
  /** Absolute cgroup directories, one per mounted hierarchy. */
  readonly dirs: readonly string[];
  readonly memoryDir: string | undefined;

  private constructor(dirs: string[], memoryDir: string | undefined) {
    this.dirs = dirs;
    this.memoryDir = memoryDir;
  }

  /** Creates `name` below this process's own cgroup in every mounted hierarchy. */
  static async create(name: string): Promise<CgroupSet> {
    const own = await Deno.readTextFile("/proc/self/cgroup");
    const dirs: string[] = [];
    let memoryDir: string | undefined;
    for (const h of HIERARCHIES) {
      if (!(await exists(join(h.mount, "cgroup.procs")))) continue;
      const line = own.split("\n").find((l) => {
        const [id, controllers] = l.split(":");
        return h.controller === ""
          ? id === h.id && controllers === ""
          : controllers === h.controller;
      });
      const base = line ? line.split(":").slice(2).join(":") : "/";
      const dir = join(h.mount, base, name);
      try {
        await Deno.mkdir(dir);
      } catch (error) {
        throw new LabError(
          "machine-failed",
          `cannot create cgroup ${dir}: ${error}; an earlier run may have left it (deno task lab --clean)`,
        );
      }
      dirs.push(dir);
      if (h.controller === "memory") memoryDir = dir;
    }
    return new CgroupSet(dirs, memoryDir);
  }

  /** Shell commands that move the running shell ($$) into every directory of this set. */
  joinScript(): string {
    return this.dirs.map((d) => `echo "$$" > '${d}/cgroup.procs'`).join(" && ");
  }

  /** Process ids in the set (all sub-directories included). */
  async pids(): Promise<number[]> {
    const found = new Set<number>();
    for (const dir of this.dirs) {
      for (const sub of await walk(dir)) {
        const text = await Deno.readTextFile(join(sub, "cgroup.procs")).catch(() => "");
        for (const pid of text.split("\n").filter(Boolean)) found.add(Number(pid));
      }
    }
    return [...found];
  }

  /**
   * Memory charged to the set: `usage` (all, page cache included) and `workingSet`
   * (usage minus inactive file cache, what the kernel cannot simply drop); undefined
   * when the memory hierarchy is not readable.
   */
  async memory(): Promise<{ usage: number; workingSet: number } | undefined> {
    if (!this.memoryDir) return undefined;
    try {
      const usage = Number(await Deno.readTextFile(join(this.memoryDir, "memory.usage_in_bytes")));
      const stat = await Deno.readTextFile(join(this.memoryDir, "memory.stat"));
      const inactive = Number(/^total_inactive_file (\d+)$/m.exec(stat)?.[1] ?? 0);
      return { usage, workingSet: Math.max(0, usage - inactive) };
    } catch {
      return undefined;
    }
  }

  /** Kills every process in the set (SIGKILL) and removes the directories, deepest first. */
  async destroy(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      const pids = await this.pids();
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* already gone */ }
      }
      await sleep(20);
    }
    const problems: string[] = [];
    for (const dir of this.dirs) {
      const subs = (await walk(dir)).reverse();
      for (const sub of subs) {
        for (let attempt = 0;; attempt++) {
          try {
            await Deno.remove(sub);
            break;
          } catch (error) {
            if (error instanceof Deno.errors.NotFound) break;
            if (attempt > 50) {
              problems.push(`${sub}: ${error}`);
              break;
            }
            await sleep(20);
          }
        }
      }
    }
    if (problems.length) {
      throw new LabError("machine-failed", `cannot remove cgroups:\n${problems.join("\n")}`);
    }
  }
}

/** The directory and every sub-directory below it, parents first. */
async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  const visit = async (d: string) => {
    out.push(d);
    try {
      for await (const entry of Deno.readDir(d)) {
        if (entry.isDirectory) await visit(join(d, entry.name));
      }
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      out.pop();
    }
  };
  await visit(dir);
  return out;
}
