import { join } from "node:path";
import { run, sleep } from "./_process.ts";

const CGROUP_ROOTS = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/memory"];

/** What is left on the host of a lab (by its id, or every lab with a prefix). */
export interface Leftovers {
  netns: string[];
  links: string[];
  cgroups: string[];
  mounts: string[];
  processes: string[];
  dirs: string[];
}

/** Lists every namespace, root-namespace link, cgroup, mount, process and dir named `tag…`. */
export async function leftovers(tag: string): Promise<Leftovers> {
  const netns = (await run(["/usr/sbin/ip", "netns", "list"], { check: false })).stdout
    .split("\n").map((l) => l.split(" ")[0]).filter((n) => n.startsWith(tag));
  const links = (await run(["/usr/sbin/ip", "-o", "link", "show"], { check: false })).stdout
    .split("\n").map((l) => l.split(": ")[1]?.split("@")[0] ?? "").filter((n) => n.startsWith(tag));
  const cgroups: string[] = [];
  for (const root of CGROUP_ROOTS) await findDirs(root, tag, 5, cgroups);
  const mounts = (await Deno.readTextFile("/proc/self/mountinfo")).split("\n")
    .filter((l) => l.includes(`/${tag}`));
  const processes: string[] = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name) || Number(entry.name) === Deno.pid) continue;
    const stat = await Deno.readTextFile(`/proc/${entry.name}/stat`).catch(() => "");
    if (!stat || /^\d+ \(.*\) Z/.test(stat)) continue; // gone, or a zombie not yet reaped
    const cmdline = await Deno.readTextFile(`/proc/${entry.name}/cmdline`).catch(() => "");
    const cgroup = await Deno.readTextFile(`/proc/${entry.name}/cgroup`).catch(() => "");
    const args = cmdline.split("\0");
    // The argument that names the lab comes first (the id is read from it), then the rest.
    const named = args.find((a) => a.startsWith(`/tmp/${tag}`) || a.includes(`/run/netns/${tag}`));
    if (
      named !== undefined ||
      cgroup.split("\n").some((l) => l.split(":")[2]?.split("/").some((p) => p.startsWith(tag)))
    ) processes.push(`${entry.name} ${named ?? "-"} ${args.join(" ").slice(0, 120)}`);
  }
  const dirs: string[] = [];
  for await (const entry of Deno.readDir("/tmp")) {
    if (entry.name.startsWith(tag) && /^[a-z][a-z0-9]{1,7}[0-9a-f]{4}$/.test(entry.name)) {
      dirs.push(join("/tmp", entry.name));
    }
  }
  return { netns, links, cgroups, mounts, processes, dirs };
}

/** True when nothing is left. */
export function isClean(left: Leftovers): boolean {
  return Object.values(left).every((list) => list.length === 0);
}

/**
 * Removes what labs with this prefix left behind whose owning process is gone
 * (a `--keep` run, or a runner killed with SIGKILL). Returns the lab ids cleaned.
 */
export async function cleanStale(prefix: string): Promise<string[]> {
  const cleaned: string[] = [];
  const ids = new Set<string>();
  const left = await leftovers(prefix);
  for (const d of left.dirs) ids.add(d.slice("/tmp/".length));
  for (const n of left.netns) ids.add(n.split("-")[0]);
  for (const c of left.cgroups) ids.add(c.split("/").pop()!.split("-")[0]);
  // A process the lab started outside its machines' cgroups (the control plane's
  // `serve-nodes` in the broker's namespace) is known by its arguments alone.
  for (const p of left.processes) {
    const id = /\/(?:tmp|run\/netns)\/([a-z][a-z0-9]{1,7}[0-9a-f]{4})\b/.exec(p)?.[1];
    if (id?.startsWith(prefix)) ids.add(id);
  }
  for (const id of ids) {
    const owner = Number(await Deno.readTextFile(`/tmp/${id}/owner`).catch(() => "0"));
    if (owner && owner !== Deno.pid && await alive(owner)) continue;
    const mine = await leftovers(id);
    for (let round = 0; round < 50; round++) {
      const pids = [
        ...await cgroupPids(mine.cgroups),
        ...(await leftovers(id)).processes.map((p) => Number(p.split(" ")[0])),
      ];
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
      await sleep(50);
    }
    for (const dir of [...mine.cgroups].sort((a, b) => b.length - a.length)) {
      await removeCgroupTree(dir);
    }
    for (const ns of mine.netns) await run(["/usr/sbin/ip", "netns", "del", ns], { check: false });
    for (const dir of mine.dirs) await Deno.remove(dir, { recursive: true }).catch(() => {});
    cleaned.push(id);
  }
  return cleaned;
}

async function alive(pid: number): Promise<boolean> {
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

async function findDirs(dir: string, tag: string, depth: number, out: string[]): Promise<void> {
  if (depth < 0) return;
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (!entry.isDirectory) continue;
      const path = join(dir, entry.name);
      if (entry.name.startsWith(tag)) out.push(path);
      else await findDirs(path, tag, depth - 1, out);
    }
  } catch { /* hierarchy not mounted or directory vanished */ }
}

async function cgroupPids(dirs: string[]): Promise<number[]> {
  const pids: number[] = [];
  const visit = async (dir: string) => {
    const text = await Deno.readTextFile(join(dir, "cgroup.procs")).catch(() => "");
    pids.push(...text.split("\n").filter(Boolean).map(Number));
    try {
      for await (const e of Deno.readDir(dir)) if (e.isDirectory) await visit(join(dir, e.name));
    } catch { /* gone */ }
  };
  for (const dir of dirs) await visit(dir);
  return pids;
}

async function removeCgroupTree(dir: string): Promise<void> {
  try {
    for await (const e of Deno.readDir(dir)) {
      if (e.isDirectory) await removeCgroupTree(join(dir, e.name));
    }
    await Deno.remove(dir);
  } catch { /* gone or busy; leftovers() will show it */ }
}
