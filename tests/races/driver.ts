/**
 * One race, run INSIDE a sandbox where the packaged host is installed (tests/races/
 * _sandboxed.ts starts it there): the world is made on a private tmpfs at /srv/noxrace (a
 * managed root of every set), the victims are root's directories outside every managed root
 * and outside the set's --allow-write (under /usr/lib, an overlay of the sandbox) or root's
 * own /usr/local/bin; the attacker is a process of nobody's swapping two names with
 * renameat2(RENAME_EXCHANGE) as fast as it can (tests/_flipper.ts); the host is the
 * installed program, run as a process under its permission set, again and again. After
 * every run the victims are looked at; a change is a win. Prints one JSON line:
 * `{ race, runs, outcomes, wins, flips, seen }`.
 *
 *   deno run -A tests/races/driver.ts '{"race":"repair","runs":100,"binary":"/usr/local/bin/nox-mesh-host"}'
 */
import { asNobody, flipping, NOBODY } from "../_flipper.ts";

/** What one race needs: its world, what nobody swaps, what the host is run for, its victims. */
interface World {
  /** The two names nobody swaps. */
  flip: [string, string];
  /** host.json's extra fields. */
  config?: Record<string, unknown>;
  /** What run `i` asks the host (argv after the program), or "run" for the service. */
  step(i: number): string[] | "run";
  /** The paths that must never change (their owner, mode, content, entries). */
  victims: string[];
  /** Root swaps the names (in root's directory), not nobody. */
  asRoot?: boolean;
  /**
   * Once nobody stopped (the names put back): what must be true after one more run, as a
   * problem in words, or undefined (the host does act there when nobody races it).
   */
  after?(): Promise<string | undefined>;
  /**
   * FIFOs that a run must never wait on: while it runs, its threads are watched, and one
   * found waiting to open a FIFO (the kernel's `wait_for_partner`) is a win; the FIFO is then
   * opened for writing, which lets it go.
   */
  fifos?: string[];
}

/** A race's description, and how to make its world under `base` (a root 0755 tmpfs). */
export interface Race {
  what: string;
  make(base: string): Promise<World>;
}

const owned = { owner: "nobody", group: "nogroup" };

/** A root-owned directory at `path` (made with its parents), mode `mode`. */
async function rootDir(path: string, mode = 0o755): Promise<void> {
  await Deno.mkdir(path, { recursive: true });
  await Deno.chmod(path, mode);
}

/** Declarations written once, applied in turn. */
async function declarations(base: string, list: unknown[][]): Promise<string[]> {
  const files: string[] = [];
  for (const [i, resources] of list.entries()) {
    const file = `${base}/decl-${i}.json`;
    await Deno.writeTextFile(file, JSON.stringify({ version: 1, resources }));
    files.push(file);
  }
  return files;
}

/** nobody's home, with `name` in it and a symlink `name-swap` to `target` beside it. */
async function home(base: string, name: string, target: string, mode = "0755"): Promise<string> {
  const dir = `${base}/home`;
  await Deno.mkdir(dir, { recursive: true });
  await Deno.chown(dir, NOBODY, NOBODY);
  await asNobody(
    `mkdir -p -m ${mode} -- "$1/${name}" && ln -s -- "$2" "$1/${name}-swap"`,
    dir,
    target,
  );
  return dir;
}

/** The victims' directory: root's, outside every managed root and outside --allow-write. */
const VICTIMS = "/usr/lib/noxrace";

/**
 * How many paths one run of the host acts on below the swapped directory: every run is a
 * process (a fraction of a second), so each run races that many times.
 */
export const PATHS_PER_RUN = 24;

/** More than the engine's SYNC_TOGETHER_FROM (128): the window's writes go in a synced wave. */
const WAVE_FILES = 140;

const numbered = (prefix: string) =>
  Array.from({ length: PATHS_PER_RUN }, (_, i) => `${prefix}${i}`);

/**
 * Owner/mode repair of directories `names` below ~/.local while nobody swaps ~/.local with
 * a link to `victim`, which holds root's directories of the same names.
 */
function repair(victim: string, names: readonly string[]): Race["make"] {
  return async (base) => {
    const h = await home(base, ".local", victim);
    await asNobody('cd -- "$1/.local" && shift && mkdir -m 0755 -- "$@"', h, ...names);
    const dirs = (mode: string) =>
      names.map((name) => ({
        type: "directory",
        id: `d-${name}`,
        path: `${h}/.local/${name}`,
        mode,
        ...owned,
      }));
    const files = await declarations(base, [dirs("0755"), dirs("0750")]);
    return {
      flip: [`${h}/.local`, `${h}/.local-swap`],
      // Every run repairs them all: the declared mode changes each time.
      step: (i) => ["apply", "--json", files[i % 2]],
      victims: names.map((name) => `${victim}/${name}`),
    };
  };
}

/** What /usr/local holds on every distribution, which ~/.local mirrors. */
const USR_LOCAL = ["bin", "etc", "games", "include", "lib", "sbin", "share", "src"];

/** The races, by name. */
export const RACES: Record<string, Race> = {
  "repair": {
    what: "directories' owner and mode repaired (~/.local/d0 …) while nobody swaps ~/.local " +
      "with a link to root's directory outside every managed root, holding look-alikes",
    async make(base) {
      const names = numbered("d");
      for (const name of names) await rootDir(`${VICTIMS}/local/${name}`);
      return await repair(`${VICTIMS}/local`, names)(base);
    },
  },
  "usr-local": {
    what: "the same, ~/.local (bin, etc, lib, share …) swapped with a link to /usr/local",
    async make(base) {
      for (const name of USR_LOCAL) await rootDir(`/usr/local/${name}`);
      return await repair("/usr/local", USR_LOCAL)(base);
    },
  },
  "authorized-keys": {
    what: "files created then renamed into place (~/.ssh/authorized_keys …) while nobody " +
      "swaps ~/.ssh with a link to root's directory holding root's own",
    async make(base) {
      const victim = `${VICTIMS}/root-ssh`;
      await rootDir(victim, 0o700);
      const names = ["authorized_keys", ...numbered("authorized_keys.").slice(1)];
      for (const name of names) {
        await Deno.writeTextFile(`${victim}/${name}`, "ssh-ed25519 ROOT root@host\n");
        await Deno.chmod(`${victim}/${name}`, 0o600);
      }
      const h = await home(base, ".ssh", victim, "0700");
      const keys = (content: string) =>
        names.map((name) => ({
          type: "file",
          id: `k-${name.replaceAll(".", "-")}`,
          path: `${h}/.ssh/${name}`,
          content,
          mode: "0600",
          ...owned,
        }));
      const files = await declarations(base, [
        keys("ssh-ed25519 AAAA nobody@host\n"),
        keys("ssh-ed25519 BBBB nobody@host\n"),
      ]);
      return {
        flip: [`${h}/.ssh`, `${h}/.ssh-swap`],
        step: (i) => ["apply", "--json", files[i % 2]],
        victims: [victim, ...names.map((name) => `${victim}/${name}`)],
      };
    },
  },
  "wave": {
    what: "a window of 140 files written (~/.big/f0 …: as many as make the engine sync a wave " +
      "of writes together, src/engine/commit_window.ts) while nobody swaps ~/.big with a link " +
      "to root's directory holding root's files of the same names",
    async make(base) {
      const victim = `${VICTIMS}/root-big`;
      await rootDir(victim, 0o700);
      const names = Array.from({ length: WAVE_FILES }, (_, i) => `f${i}`);
      for (const name of names) {
        await Deno.writeTextFile(`${victim}/${name}`, "root's\n");
        await Deno.chmod(`${victim}/${name}`, 0o600);
      }
      const h = await home(base, ".big", victim);
      const wave = (content: string) =>
        names.map((name) => ({
          type: "file",
          id: `w-${name}`,
          path: `${h}/.big/${name}`,
          content,
          mode: "0644",
          ...owned,
        }));
      const files = await declarations(base, [wave("one\n"), wave("two\n")]);
      return {
        flip: [`${h}/.big`, `${h}/.big-swap`],
        // Every run rewrites all of them: the declared content changes each time.
        step: (i) => ["apply", "--json", files[i % 2]],
        victims: [victim, ...names.map((name) => `${victim}/${name}`)],
      };
    },
  },
  "release": {
    what: "directories and files created, then removed when no longer declared (~/.cache/app0, " +
      "~/.cache/app0.conf …), while nobody swaps ~/.cache with a link to root's look-alikes",
    async make(base) {
      const victim = `${VICTIMS}/root-cache`;
      const names = numbered("app").slice(0, PATHS_PER_RUN / 2);
      for (const name of names) {
        await rootDir(`${victim}/${name}`, 0o700);
        await Deno.writeTextFile(`${victim}/${name}.conf`, "root's\n");
        await Deno.chmod(`${victim}/${name}.conf`, 0o600);
      }
      await Deno.chmod(victim, 0o700);
      const h = await home(base, ".cache", victim);
      const declared = names.flatMap((name) => [
        { type: "directory", id: `d-${name}`, path: `${h}/.cache/${name}`, mode: "0755", ...owned },
        {
          type: "file",
          id: `f-${name}`,
          path: `${h}/.cache/${name}.conf`,
          content: "nobody's\n",
          mode: "0644",
          ...owned,
        },
      ]);
      const files = await declarations(base, [declared, []]);
      return {
        flip: [`${h}/.cache`, `${h}/.cache-swap`],
        // Declared, then dropped: every other run removes what the one before made.
        step: (i) => ["apply", "--json", files[i % 2]],
        victims: [
          victim,
          ...names.flatMap((name) => [`${victim}/${name}`, `${victim}/${name}.conf`]),
        ],
      };
    },
  },
  "fifo": {
    what: "a managed file read (plan) while root swaps it with a FIFO in root's directory, " +
      "between the host's look and its open: a read must never wait for a FIFO's writer",
    async make(base) {
      const dir = `${base}/etc`;
      await rootDir(dir);
      const names = ["app.conf"];
      for (const name of names) await Deno.writeTextFile(`${dir}/${name}`, "old\n");
      const fifo = `${dir}/fifo`;
      const made = await new Deno.Command("mkfifo", { args: [fifo] }).output();
      if (!made.success) throw new Error("mkfifo failed");
      const declared = names.map((name) => ({
        type: "file",
        id: `f-${name}`,
        path: `${dir}/${name}`,
        // The same size as what is there: the check has to read to compare.
        content: "new\n",
        mode: "0644",
        owner: "root",
        group: "root",
      }));
      const files = await declarations(base, [declared]);
      return {
        flip: [`${dir}/${names[0]}`, fifo],
        asRoot: true,
        step: () => ["plan", "--json", files[0]],
        victims: [],
        fifos: [`${dir}/${names[0]}`, fifo],
      };
    },
  },
  "metrics": {
    what: "the metrics file written by the service (host.json metricsFile ~/prom/nox.prom) at " +
      "its start and stop, while nobody swaps ~/prom with a link to root's directory",
    async make(base) {
      const victim = `${VICTIMS}/root-prom`;
      await rootDir(victim);
      const h = await home(base, "prom", victim);
      // The service reconciles from an empty bundle of its own (not enrolled).
      await rootDir(`${base}/bundle`);
      await Deno.writeTextFile(`${base}/bundle/bundle.json`, '{"version":1,"resources":[]}');
      return {
        flip: [`${h}/prom`, `${h}/prom-swap`],
        config: { metricsFile: `${h}/prom/nox.prom`, bundle: `${base}/bundle/bundle.json` },
        step: () => "run",
        victims: [victim],
        async after() {
          const info = await Deno.lstat(`${h}/prom/nox.prom`).catch(() => null);
          if (info?.uid !== NOBODY) return `~/prom/nox.prom is not nobody's file: ${info?.uid}`;
        },
      };
    },
  },
};

/** What must not change: owner, mode, content (a file), entries (a directory). */
async function fingerprint(paths: string[]): Promise<string> {
  const out: string[] = [];
  for (const path of paths) {
    const info = await Deno.lstat(path).catch(() => null);
    if (info === null) {
      out.push(`${path}: gone`);
      continue;
    }
    let what = "";
    if (info.isFile) what = await Deno.readTextFile(path);
    else if (info.isDirectory) {
      what = [...Deno.readDirSync(path)].map((e) => e.name).sort().join(",");
    }
    out.push(`${path}: ${info.uid}:${info.gid}:${(info.mode! & 0o7777).toString(8)} ${what}`);
  }
  return out.join("\n");
}

interface DriverConfig {
  race: string;
  runs: number;
  /** The installed host program. */
  binary: string;
  /** Stop at the first win (a race that fails should fail fast). */
  stopOnWin?: boolean;
}

/** Whether a thread of process `pid` waits to open a FIFO (no writer yet). */
function waitsOnFifo(pid: number): boolean {
  try {
    for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
      const wchan = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/wchan`).trim();
      if (wchan === "wait_for_partner") return true;
    }
  } catch { /* ended meanwhile */ }
  return false;
}

/** Open each FIFO among `paths` for writing without waiting: a reader waiting there goes. */
function letGo(paths: readonly string[]): void {
  const fs = process.getBuiltinModule("node:fs") as typeof import("node:fs");
  for (const path of paths) {
    try {
      fs.closeSync(fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
    } catch { /* not the FIFO now, or nobody reads it */ }
  }
}

/**
 * Run `args`, watching its threads: returns how many times one was found waiting to open
 * a FIFO (each is then let go).
 */
async function watched(
  binary: string,
  args: string[],
  env: Record<string, string>,
  fifos: readonly string[],
): Promise<{ text: string; code: number; waits: number }> {
  const child = new Deno.Command(binary, { args, env, stdout: "piped", stderr: "null" }).spawn();
  let ended = false;
  const out = child.output().finally(() => ended = true);
  let waits = 0;
  while (!ended) {
    await new Promise((r) => setTimeout(r, 20));
    if (!ended && waitsOnFifo(child.pid)) {
      waits++;
      letGo(fifos);
    }
  }
  const { stdout, code } = await out;
  return { text: new TextDecoder().decode(stdout), code, waits };
}

/** How a run of the host ended, in one word. */
async function runOnce(binary: string, args: string[] | "run", env: Record<string, string>) {
  if (args === "run") {
    // The service writes the metrics file at its start (after its first reconcile) and
    // when it stops; it is stopped a moment after it started.
    const child = new Deno.Command(binary, {
      args: ["run"],
      env,
      stdout: "null",
      stderr: "null",
    }).spawn();
    await new Promise((r) => setTimeout(r, 1500));
    try {
      child.kill("SIGTERM");
    } catch { /* ended already */ }
    const kill = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch { /* ended */ }
    }, 30_000);
    const status = await child.status;
    clearTimeout(kill);
    return `run exit ${status.code}`;
  }
  const out = await new Deno.Command(binary, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  const text = new TextDecoder().decode(out.stdout);
  try {
    const report = JSON.parse(text);
    if (Array.isArray(report.entries)) {
      // plan --json: how the first resource was found.
      const entry = report.entries[0];
      return { outcome: String(entry?.status), error: entry?.detail as string | undefined };
    }
    return { outcome: report.outcome as string, error: report.error as string | undefined };
  } catch {
    return `exit ${out.code}: ${new TextDecoder().decode(out.stderr).slice(0, 300)}`;
  }
}

if (import.meta.main) {
  const cfg: DriverConfig = JSON.parse(Deno.args[0]);
  const race = RACES[cfg.race];
  if (!race) throw new Error(`no race ${cfg.race}`);
  const base = "/srv/noxrace";
  await Deno.mkdir(base, { recursive: true });
  const mounted = await new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", "mode=0755", "noxrace", base],
  }).output();
  if (!mounted.success) throw new Error("cannot mount a tmpfs at /srv/noxrace");
  const world = await race.make(base);
  await Deno.writeTextFile(`${base}/host.json`, JSON.stringify({ ...world.config }));
  const env = {
    NOX_MESH_HOST_STATE_DIR: `${base}/state`,
    NOX_MESH_HOST_CONFIG: `${base}/host.json`,
    PATH: "/usr/bin:/usr/sbin:/bin:/sbin",
  };
  await rootDir(`${base}/flipper`);
  const outcomes: Record<string, number> = {};
  const seen: string[] = [];
  let wins = 0;
  let runs = 0;
  let flips = 0;
  let last = await fingerprint(world.victims);
  {
    await using flipper = await flipping(`${base}/flipper`, ...world.flip, 6 * 3600, {
      asRoot: world.asRoot === true,
    });
    while (runs < cfg.runs) {
      const step = world.step(runs);
      let ended;
      if (world.fifos && step !== "run") {
        const r = await watched(cfg.binary, step, env, world.fifos);
        if (r.waits > 0) {
          wins += r.waits;
          if (seen.length < 8) seen.push(`WIN in run ${runs + 1}: it waited on a FIFO`);
        }
        try {
          const report = JSON.parse(r.text);
          // plan --json: the entries; the word is how the file's was found.
          const entry = Array.isArray(report) ? report[0] : report.entries?.[0];
          ended = { outcome: String(entry?.status ?? "?"), error: entry?.detail as string };
        } catch {
          ended = `exit ${r.code}`;
        }
        if (r.waits > 0 && cfg.stopOnWin) {
          runs++;
          break;
        }
      } else ended = await runOnce(cfg.binary, step, env);
      runs++;
      const word = typeof ended === "string" ? ended : ended.outcome;
      outcomes[word] = (outcomes[word] ?? 0) + 1;
      if (typeof ended !== "string" && ended.error && seen.length < 6) {
        const shape = ended.error.replace(/[0-9]+/g, "N").slice(0, 400);
        if (!seen.includes(shape)) seen.push(shape);
      }
      const now = await fingerprint(world.victims);
      if (now !== last) {
        wins++;
        if (seen.length < 8) seen.push(`WIN after run ${runs}: ${now}`);
        last = now;
        if (cfg.stopOnWin) break;
      }
    }
    flips = await flipper.flips();
  }
  // nobody stopped: the names back in place, one more run shows the host acts there.
  const [a, b] = world.flip;
  if ((await Deno.lstat(a)).isSymlink) {
    const swap = 'mv -- "$1" "$1.back" && mv -- "$2" "$1" && mv -- "$1.back" "$2"';
    if (world.asRoot) {
      await Deno.rename(a, `${a}.back`);
      await Deno.rename(b, a);
      await Deno.rename(`${a}.back`, b);
    } else await asNobody(swap, a, b);
  }
  if (world.asRoot && !(await Deno.lstat(a)).isFile) {
    await Deno.rename(a, `${a}.back`);
    await Deno.rename(b, a);
    await Deno.rename(`${a}.back`, b);
  }
  const ended = await runOnce(cfg.binary, world.step(runs), env);
  let after = typeof ended === "string" ? ended : ended.outcome;
  if (typeof ended !== "string" && ended.error) after += `: ${ended.error}`;
  const problem = await world.after?.();
  if (problem) after += ` (${problem})`;
  const changed = (await fingerprint(world.victims)) !== last;
  console.log(
    JSON.stringify({
      race: cfg.race,
      runs,
      outcomes,
      wins: wins + (changed ? 1 : 0),
      flips,
      seen,
      after,
    }),
  );
}
