// Test helpers: a stand-in `apk` replaying what a real apk-tools did with the host's
// package split as abuild splits it (tests/fixtures/apk/split/, recorded from apk-tools
// 2.14.10 and 3.0.6 built from source). Private to tests/.
import { join } from "node:path";
import { fileSha256, makeWorld, type World } from "./_launcher_world.ts";

/** The split recordings (tests/fixtures/apk/split/README.md). */
export const APK_SPLIT: string = new URL("./fixtures/apk/split", import.meta.url).pathname;
/** The apk-tools versions recorded, each in its own directory of APK_SPLIT. */
export const APK_VERSIONS = ["2.14.10", "3.0.6"] as const;
/** One of {@link APK_VERSIONS}. */
export type ApkVersion = typeof APK_VERSIONS[number];

/** One recording: the command apk ran, and what it did. */
export interface ApkRecording {
  name: string;
  /** The arguments after `apk` (and after `--root SCRATCH`). */
  args: string[];
  /** The packages/ file each package-file argument was, in order. */
  files: string[];
  /** The state (installed database and world) before and after: a snapshot name, or "any". */
  before: string;
  after: string;
  /** Files apk left in --cache-dir: [its name there, the packages/ file it is]. */
  cached: [string, string][];
  /** packages/ files apk fetch wrote into --output. */
  fetched: string[];
  exit: number;
  stdout: string;
  stderr: string;
}

/** Reads one recording of `version`. */
export function apkRecording(version: ApkVersion, name: string): ApkRecording {
  const lines = Deno.readTextFileSync(join(APK_SPLIT, version, name)).split("\n");
  const header = (key: string) =>
    lines.find((l) => l.startsWith(`# ${key}:`))?.slice(key.length + 3).trim();
  const words = (key: string) => (header(key) ?? "").split(" ").filter((w) => w !== "");
  const [before, after] = header("state")!.split(" -> ");
  const take = (p: string) =>
    lines.filter((l) => l.startsWith(p)).map((l) => l.slice(p.length) + "\n").join("");
  return {
    name,
    args: words("command").slice(1),
    files: words("files"),
    before,
    after,
    cached: words("cached").map((w) => w.split("=") as [string, string]),
    fetched: words("fetched"),
    exit: Number(header("exit")),
    stdout: take("1|"),
    stderr: take("2|"),
  };
}

/** The file of a state snapshot: `<state>.installed` or `<state>.world`. */
export function apkSnapshot(version: ApkVersion, state: string, what: "installed" | "world") {
  return Deno.readTextFileSync(join(APK_SPLIT, version, `${state}.${what}`));
}

/** "NAME VERSION C" of each installed package of the host's origin, as the launcher reads them. */
export function originPackages(installed: string): string[] {
  return installed.split("\n\n").map((entry) => {
    const field = (k: string) => entry.match(new RegExp(`^${k}:(.*)$`, "m"))?.[1];
    return field("o") === "nox-mesh-host" ? `${field("P")} ${field("V")} ${field("C")}` : "";
  }).filter((l) => l !== "");
}

const sh = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/**
 * Writes a stand-in `apk` program replaying the split recordings of `version`. It holds
 * apk's state as the recording did: the installed database `<dir>/installed` and world
 * `<dir>/world`, starting as `state` (default a1: nox-mesh-host 1.0-r0 and its -openrc
 * installed). A call is answered by the recording of the same command line made in the
 * same state (the database and world, byte for byte; package-file arguments matched by
 * their bytes, the values of --output and --cache-dir by position), which then also does
 * what apk did: the state after it, the files apk fetch wrote or apk add left in
 * --cache-dir, and (given `hostBin`) the stand-in host of the version installed.
 * Anything else fails (exit 99, "no recording"). Calls are logged to `<dir>/calls`.
 */
export async function writeApkStandIn(
  { program, dir: apk, version, state = "a1", hostBin }: {
    program: string;
    dir: string;
    version: ApkVersion;
    state?: string;
    hostBin?: string;
  },
): Promise<void> {
  const dir = join(APK_SPLIT, version);
  const packages = join(APK_SPLIT, "packages");
  const stateKey = async (s: string) => {
    const bytes = new TextEncoder().encode(
      apkSnapshot(version, s, "installed") + apkSnapshot(version, s, "world"),
    );
    const digest = await crypto.subtle.digest("SHA-256", bytes);
    return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  };
  const cases: string[] = [];
  for (const entry of [...Deno.readDirSync(dir)].map((e) => e.name).sort()) {
    if (/\.(installed|world)$/.test(entry)) continue; // snapshots
    const r = apkRecording(version, entry);
    let file = 0;
    let skip = "";
    const key: string[] = [];
    for (const arg of r.args) {
      if (skip) {
        key.push("DIR");
        skip = "";
      } else if (arg === "--output" || arg === "--cache-dir") {
        key.push(arg);
        skip = arg;
      } else if (arg.endsWith(".apk") && arg.includes("/")) {
        key.push(`@${await fileSha256(join(packages, r.files[file++]))}`);
      } else key.push(arg);
    }
    const when = r.before === "any" ? "*" : sh(await stateKey(r.before));
    const effects: string[] = [];
    if (r.after !== "any" && r.after !== r.before) effects.push(`become ${sh(r.after)}`);
    for (const [as, from] of r.cached) effects.push(`cp "$P/${from}" "$cache/${as}"`);
    for (const from of r.fetched) effects.push(`cp "$P/${from}" "$output/"`);
    effects.push(`replay ${sh(entry)}`);
    cases.push(`${when}\\ ${sh(key.join(" "))}) ${effects.join(" && ")} ;;`);
  }
  const bin = hostBin
    ? `sed "s/^version=.*/version=\${v%-r*}/" ${sh(hostBin)} >${sh(hostBin)}.new
	chmod 755 ${sh(hostBin)}.new && mv ${sh(hostBin)}.new ${sh(hostBin)}`
    : ":";
  const script = `#!/bin/sh
set -eu
F=${sh(dir)}
P=${sh(packages)}
S=${sh(apk)}
printf '%s\\n' "$*" >>"$S/calls"
replay() {
	sed -n 's/^1|//p' "$F/$1"
	sed -n 's/^1b|//p' "$F/$1" | base64 -d
	sed -n 's/^2|//p' "$F/$1" >&2
	exit "$(sed -n 's/^# exit: //p' "$F/$1")"
}
# become STATE: the database and world apk left, and the host of the version installed.
become() {
	cp "$F/$1.installed" "$S/installed.new" && cp "$F/$1.world" "$S/world.new"
	mv "$S/installed.new" "$S/installed" && mv "$S/world.new" "$S/world"
	v=$(awk '/^P:/ { p = substr($0, 3) } /^V:/ && p == "nox-mesh-host" { print substr($0, 3); exit }' "$S/installed")
	${bin}
}
output='' cache='' key='' skip=''
for a; do
	if [ -n "$skip" ]; then
		[ "$skip" = --output ] && output=$a || cache=$a
		a=DIR skip=''
	elif [ "$a" = --output ] || [ "$a" = --cache-dir ]; then
		skip=$a
	elif [ -f "$a" ] && case $a in */*.apk) true ;; *) false ;; esac; then
		a="@$(sha256sum <"$a" | cut -c1-64)"
	fi
	key="$key\${key:+ }$a"
done
st=$(cat "$S/installed" "$S/world" | sha256sum | cut -c1-64)
case "$st $key" in
${cases.join("\n")}
esac
echo "stand-in apk (${version}): no recording of: apk $*" >&2
exit 99
`;
  await Deno.mkdir(apk, { recursive: true });
  await Deno.writeTextFile(program, script, { mode: 0o755 });
  await Deno.chmod(program, 0o755);
  await Deno.writeTextFile(join(apk, "installed"), apkSnapshot(version, state, "installed"));
  await Deno.writeTextFile(join(apk, "world"), apkSnapshot(version, state, "world"));
}

/**
 * A launcher world whose package manager is a stand-in `apk` ({@link writeApkStandIn})
 * replaying the split recordings of `version` from `state`; its database and world are
 * the launcher's NOX_MESH_HOST_PKG_DB and NOX_MESH_HOST_APK_WORLD, apk's cache is off.
 */
export async function makeApkSplitWorld(
  { steps, version, state = "a1" }: { steps: string[]; version: ApkVersion; state?: string },
): Promise<World & { apk: string; db: string; world: string }> {
  const w = await makeWorld({ pkg: "apk", steps, version: "1.0" });
  const apk = join(w.dir, "apk");
  await writeApkStandIn({
    program: join(w.dir, "bin", "apk"),
    dir: apk,
    version,
    state,
    hostBin: w.bin,
  });
  const v = apkSnapshot(version, state, "installed").match(
    /^P:nox-mesh-host\nV:(.*)-r\d+$/m,
  )![1];
  await Deno.writeTextFile(
    w.bin,
    (await Deno.readTextFile(w.bin)).replace(/^version=.*$/m, `version=${v}`),
  );
  w.env.NOX_MESH_HOST_PKG_DB = join(apk, "installed");
  w.env.NOX_MESH_HOST_APK_WORLD = join(apk, "world");
  w.env.NOX_MESH_HOST_PKG_CACHE = join(apk, "no-cache");
  return { ...w, apk, db: join(apk, "installed"), world: join(apk, "world") };
}

/**
 * A script the stand-in host runs to upgrade itself to `target` (e.g. 2.0-r0) as the apk
 * adapter does for the host's own package: with `--cache-dir <state>/rollback/.apk-cache`
 * (so apk keeps the files it installs for the launcher) where that directory exists.
 */
export async function upgradeScript(w: World, target: string): Promise<string> {
  const path = join(w.dir, `upgrade-${target}`);
  const cache = join(w.state, "rollback", ".apk-cache");
  await Deno.writeTextFile(
    path,
    `#!/bin/sh
set -e
if [ -d ${sh(cache)} ]; then
	apk --cache-dir ${sh(cache)} add --update-cache --no-progress nox-mesh-host=${target} >&2
else
	apk add --update-cache --no-progress nox-mesh-host=${target} >&2
fi
`,
    { mode: 0o755 },
  );
  return path;
}
