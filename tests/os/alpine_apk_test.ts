/**
 * apk is not available on Debian or npm, so the adapter runs against a
 * stand-in `apk` that replays what a real apk-tools printed for the same
 * command line (tests/fixtures/apk/: 2.14.10; tests/fixtures/apk/split/:
 * 2.14.10 and 3.0.6; recorded once from apk built from its source; see the
 * READMEs there).
 */
import assert from "node:assert/strict";
import {
  alpineApk,
  apkGlobals,
  apkSolverProblem,
  isApkNotFound,
  OWN_PACKAGE_CACHE,
  parseApkInfoExists,
  parseApkPolicy,
  splitNameVersion,
} from "../../os/alpine-apk/mod.ts";
import { HostError } from "../../src/errors.ts";
import { PackageNotFoundError } from "../../src/providers.ts";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { testEngine } from "../_engine.ts";
import { APK_SPLIT, APK_VERSIONS, apkRecording, writeApkStandIn } from "../_apk_world.ts";

const FIXTURES = new URL("../fixtures/apk", import.meta.url).pathname;

/** One recording: its command, exit code, stdout and stderr. */
function recorded(name: string) {
  const lines = Deno.readTextFileSync(`${FIXTURES}/${name}`).split("\n");
  const take = (p: string) =>
    lines.filter((l) => l.startsWith(p)).map((l) => l.slice(p.length) + "\n").join("");
  return {
    command: lines.find((l) => l.startsWith("# command: apk "))!.slice("# command: apk ".length),
    exit: Number(lines.find((l) => l.startsWith("# exit: "))!.slice("# exit: ".length)),
    stdout: take("1|"),
    stderr: take("2|"),
  };
}

Deno.test("apk: name and version split at the last '-<digit>'", () => {
  assert.deepEqual(splitNameVersion("py3-foo-2-1.2.3-r0"), {
    name: "py3-foo-2",
    version: "1.2.3-r0",
  });
  assert.deepEqual(splitNameVersion(recorded("info-e-installed").stdout), {
    name: "nox-mesh-host",
    version: "1.0-r0",
  });
  assert.equal(splitNameVersion("noversion"), null);
});

Deno.test("apk: `apk -v info -e NAME` output is read for that name only", () => {
  const out = recorded("info-e-installed").stdout;
  assert.deepEqual(parseApkInfoExists(out, "nox-mesh-host"), {
    name: "nox-mesh-host",
    version: "1.0-r0",
  });
  assert.equal(parseApkInfoExists(out, "nox-mesh"), null);
});

Deno.test("apk: a missing dependency is told apart from a package not offered (real outputs)", () => {
  for (
    const [file, name] of [["add-not-found", "wireguard-toolz"], [
      "add-no-such-version",
      "nox-mesh-host",
    ], ["add-upstream-only", "nox-mesh-host"]]
  ) {
    assert.deepEqual(apkSolverProblem(recorded(file).stderr, name), { kind: "not-found" }, file);
  }
  const broken = recorded("add-missing-dependency");
  assert.equal(broken.exit, 2);
  assert.deepEqual(apkSolverProblem(broken.stderr, "brokendep"), {
    kind: "missing-dependency",
    missing: "libmissing",
    requiredBy: "brokendep-1.0-r0[libmissing]",
  });
  assert.ok(!isApkNotFound(broken.stderr, "brokendep"));
  assert.ok(!isApkNotFound("ERROR: Unable to lock database: Resource temporarily unavailable\n"));
});

Deno.test("apk: `apk policy` lists the offered builds", () => {
  assert.deepEqual(parseApkPolicy(recorded("policy").stdout), ["0.2.0-r1", "1.0-r0", "2.0-r0"]);
});

Deno.test("apk: global options map to apk's flags", () => {
  assert.deepEqual(
    apkGlobals({ root: "/mnt", repositoriesFile: "/r", keysDir: "/k", cacheDir: "/c" }),
    ["apk", "--root", "/mnt", "--repositories-file", "/r", "--keys-dir", "/k", "--cache-dir", "/c"],
  );
  assert.deepEqual(alpineApk().argv("add", "x"), ["apk", "add", "x"]);
});

/**
 * A stand-in apk answering each recorded command line with its recorded output
 * and exit code (state of the recording: nox-mesh-host 1.0-r0 and hello, which
 * provides cmd:hellocmd, installed). Logs every call.
 */
async function standIn(dir: string): Promise<string> {
  const program = `${dir}/apk`;
  const cases = [
    "add-exact",
    "info-e-installed",
    "add-upstream-only-0.2.0",
    "add-not-found",
    "add-no-such-version",
    "add-missing-dependency",
    "info-e-provided",
    "info-e-provided-absent",
    "policy",
  ].map((f) => {
    const r = recorded(f);
    return `"${r.command}") replay ${f} ;;`;
  });
  await Deno.writeTextFile(
    program,
    `#!/bin/sh
printf '%s\\n' "$*" >> "${dir}/calls"
replay() {
  sed -n 's/^1|//p' "${FIXTURES}/$1"; sed -n 's/^2|//p' "${FIXTURES}/$1" >&2
  exit "$(sed -n 's/^# exit: //p' "${FIXTURES}/$1")"
}
case "$*" in
${cases.join("\n")}
"add --no-progress ${dir}/files/nox-mesh-host-9.9-r0.apk") exit 0 ;;
# not recorded (argv only): refresh and full upgrade print nothing the adapter reads
"--update-cache update --no-progress"|"upgrade --update-cache --no-progress") exit 0 ;;
esac
echo "stand-in: no recording of apk $*" >&2; exit 99
`,
  );
  await Deno.chmod(program, 0o755);
  return program;
}

Deno.test("apk (stand-in replaying real apk-tools 2.14.10 outputs): verbs, refusals, fallbacks", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-apk-" });
  try {
    const program = await standIn(dir);
    await Deno.mkdir(`${dir}/files`);
    const apk = alpineApk({ program, fileDirs: [`${dir}/files`] });
    assert.deepEqual(await apk.installed("nox-mesh-host"), {
      name: "nox-mesh-host",
      version: "1.0-r0",
    });
    // A provided name resolves to the package providing it (it used to read "not installed").
    assert.deepEqual(await apk.installed("cmd:hellocmd"), { name: "hello", version: "1.0-r0" });
    assert.equal(await apk.installed("cmd:nothere"), null);
    await apk.install("nox-mesh-host", "1.0-r0");
    await assert.rejects(apk.install("nox-mesh-host", "9.9-r0"), PackageNotFoundError);
    await Deno.writeTextFile(`${dir}/files/nox-mesh-host-9.9-r0.apk`, "");
    await apk.install("nox-mesh-host", "9.9-r0"); // not in a repository: from the package file
    await assert.rejects(apk.install("wireguard-toolz"), PackageNotFoundError);
    await assert.rejects(
      apk.install("brokendep"),
      (e: unknown) =>
        e instanceof HostError && !(e instanceof PackageNotFoundError) &&
        e.code === "package.dependency-missing" &&
        /brokendep needs libmissing, which no configured repository offers \(required by brokendep-1\.0-r0\[libmissing\]\)/
          .test(e.message),
    );
    await assert.rejects(
      apk.install("nox-mesh-host", "0.2.0"),
      (e: unknown) =>
        e instanceof HostError && e.code === "package.version" &&
        /version 0\.2\.0 of nox-mesh-host has no build number \(-rN\).*offered: 0\.2\.0-r1.*e\.g\. 0\.2\.0-r1/
          .test(e.message),
    );
    await assert.rejects(
      apk.install("cmd:hellocmd", "1.0-r0"),
      (e: unknown) => e instanceof HostError && /a name packages provide/.test(e.message),
    );
    await apk.refresh?.();
    await apk.upgradeAll();
    const calls = (await Deno.readTextFile(`${dir}/calls`)).trim().split("\n");
    assert.deepEqual(calls, [
      "-v info -e nox-mesh-host",
      "-v info -e cmd:hellocmd",
      "-v info -e cmd:nothere",
      "add --no-progress nox-mesh-host=1.0-r0",
      "add --no-progress nox-mesh-host=9.9-r0",
      "add --no-progress nox-mesh-host=9.9-r0",
      `add --no-progress ${dir}/files/nox-mesh-host-9.9-r0.apk`,
      "add --no-progress wireguard-toolz",
      "add --no-progress brokendep",
      "policy nox-mesh-host",
      "--update-cache update --no-progress",
      "upgrade --update-cache --no-progress",
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "apk end-to-end against a real apk (skipped: apk is not in Debian's archive or npm, " +
    "so no machine here has it; run on Alpine)",
  ignore: true,
  fn() {},
});

Deno.test("apk: the upstream version drops -rN (the launcher records versions so)", () => {
  const apk = alpineApk({});
  assert.equal(apk.upstreamVersion("0.2.0-r1"), "0.2.0");
  assert.equal(apk.upstreamVersion("1.36.1-r15"), "1.36.1");
  assert.equal(apk.upstreamVersion("0.2.0-1"), "0.2.0-1", "pacman's form is not apk's");
});

// --------------------------------------------- apk-tools 2.14.10 and 3.0.6, the split package

for (const version of APK_VERSIONS) {
  Deno.test(`apk ${version}: each solver refusal is read as what it is (real outputs)`, () => {
    const problem = (file: string, name: string) => {
      const r = apkRecording(version, file);
      assert.notEqual(r.exit, 0, file);
      return apkSolverProblem(r.stderr + r.stdout, name);
    };
    assert.deepEqual(problem("add-not-found", "wireguard-toolz"), { kind: "not-found" });
    assert.deepEqual(problem("add-needs-newer-deno", "needsnewdeno"), {
      kind: "dependency-conflict",
      needs: "deno>=3",
      by: "needsnewdeno-1.0-r0",
      offered: "deno-2.9.6-r0",
    });
    assert.deepEqual(problem("add-host-needs-newer-deno", "nox-mesh-host"), {
      kind: "dependency-conflict",
      needs: "deno~2.10",
      by: "nox-mesh-host-3.0-r0",
      offered: "deno-2.9.6-r0",
    });
    assert.deepEqual(problem("add-pinned-by-other", "demo"), {
      kind: "held",
      wanted: "demo-2.0-r0",
      by: "pinsdemo-1.0-r0",
      requires: "demo=1.0-r0",
    });
    assert.deepEqual(problem("add-conflict", "noxconflict"), {
      kind: "conflict",
      by: "noxconflict-1.0-r0",
      installed: "openrc-0.55.1-r2",
    });
    // The note wraps onto a second line; the providers are read whole.
    assert.deepEqual(problem("add-virtual", "meshvirt"), {
      kind: "ambiguous",
      providers: ["provone", "provtwo"],
    });
    // A report about other packages than the one asked is no "not found" either.
    const other = problem("add-needs-newer-deno", "wireguard-tools");
    assert.equal(other?.kind, "other");
    assert.match(
      (other as { report: string }).report,
      /^unable to select packages: deno-2\.9\.6-r0: breaks: needsnewdeno-1\.0-r0\[deno>=3\]/,
    );
  });

  Deno.test(`apk ${version} (stand-in replaying it): a refusal other than "not found" is its own error, with no fallback`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "noxad-apk-split-" });
    try {
      const program = `${dir}/apk`;
      const state = `${dir}/state`;
      await writeApkStandIn({ program, dir: state, version });
      await Deno.mkdir(`${dir}/files`);
      const apk = alpineApk({ program, fileDirs: [`${dir}/files`] });
      const refused = async (
        name: string,
        version: string | undefined,
        code: string,
        what: RegExp,
      ) =>
        await assert.rejects(
          apk.install(name, version),
          (e: unknown) =>
            e instanceof HostError && !(e instanceof PackageNotFoundError) && e.code === code &&
            what.test(e.message),
        );
      await refused(
        "needsnewdeno",
        undefined,
        "package.dependency-conflict",
        /needsnewdeno cannot be installed: needsnewdeno-1\.0-r0 needs deno>=3, and the repositories offer deno-2\.9\.6-r0/,
      );
      await refused(
        "nox-mesh-host",
        "3.0-r0",
        "package.dependency-conflict",
        /nox-mesh-host=3\.0-r0 cannot be installed: nox-mesh-host-3\.0-r0 needs deno~2\.10/,
      );
      await refused(
        "meshvirt",
        undefined,
        "package.ambiguous",
        /meshvirt is a name several packages provide \(provone, provtwo\)/,
      );
      await refused(
        "noxconflict",
        undefined,
        "package.conflict",
        /noxconflict-1\.0-r0 conflicts with the installed openrc-0\.55\.1-r2/,
      );
      await apk.install("pinsdemo");
      await refused(
        "demo",
        "2.0-r0",
        "package.held",
        /demo=2\.0-r0 cannot be installed: the installed pinsdemo-1\.0-r0 requires demo=1\.0-r0/,
      );
      assert.deepEqual((await Deno.readTextFile(`${state}/calls`)).trim().split("\n"), [
        "add --no-progress needsnewdeno",
        "add --no-progress nox-mesh-host=3.0-r0",
        "add --no-progress meshvirt",
        "add --no-progress noxconflict",
        "add --no-progress pinsdemo",
        "add --no-progress demo=2.0-r0",
      ], "each tried once: no package-file fallback, no second add");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });

  Deno.test(`apk ${version} (stand-in replaying it): the host's own package is installed with --cache-dir, where apk leaves the very files it installs for the launcher`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "noxad-apk-keep-" });
    try {
      const program = `${dir}/apk`;
      const state = `${dir}/apk-state`;
      const stateDir = `${dir}/mesh-host`;
      const keep = `${stateDir}/rollback/.apk-cache`;
      await writeApkStandIn({ program, dir: state, version });
      await Deno.mkdir(keep, { recursive: true });
      const apk = alpineApk({ program, stateDir });
      await apk.install("nox-mesh-host", "2.0-r0");
      // What apk-tools left in its --cache-dir: the main package and -openrc, exactly.
      const kept = [...Deno.readDirSync(keep)].map((e) => e.name).sort();
      assert.deepEqual(
        kept,
        apkRecording(version, "upgrade-a1-kept").cached.map(([n]) => n).sort(),
      );
      for (const [name, file] of apkRecording(version, "upgrade-a1-kept").cached) {
        assert.deepEqual(
          await Deno.readFile(`${keep}/${name}`),
          await Deno.readFile(`${APK_SPLIT}/packages/${file}`),
        );
      }
      // Any other package: apk's usual cache, as before.
      await apk.install("squatter");
      assert.deepEqual((await Deno.readTextFile(`${state}/calls`)).trim().split("\n"), [
        `--cache-dir ${keep} add --update-cache --no-progress nox-mesh-host=2.0-r0`,
        "add --no-progress squatter",
      ]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("apk: the host's own package gets --cache-dir only where the launcher made the directory and apk's cache is off", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-apk-argv-" });
  try {
    await Deno.writeTextFile(`${dir}/apk`, `#!/bin/sh\nprintf '%s\\n' "$*" >>'${dir}/calls'\n`, {
      mode: 0o755,
    });
    await Deno.chmod(`${dir}/apk`, 0o755);
    const stateDir = `${dir}/state`;
    await Deno.mkdir(stateDir);
    const program = `${dir}/apk`;
    await alpineApk({ program, stateDir }).install("nox-mesh-host", "2.0-r0"); // no directory
    await Deno.mkdir(`${stateDir}/rollback/.apk-cache`, { recursive: true });
    await alpineApk({ program }).install("nox-mesh-host", "2.0-r0"); // no state directory given
    await alpineApk({ program, stateDir, cacheDir: `${dir}/c` }).install("nox-mesh-host", "2.0-r0");
    await alpineApk({ program, stateDir }).install("nox-mesh-host", "2.0-r0");
    assert.deepEqual((await Deno.readTextFile(`${dir}/calls`)).trim().split("\n"), [
      "add --no-progress nox-mesh-host=2.0-r0",
      "add --no-progress nox-mesh-host=2.0-r0",
      `--cache-dir ${dir}/c add --no-progress nox-mesh-host=2.0-r0`,
      `--cache-dir ${stateDir}/rollback/.apk-cache add --update-cache --no-progress nox-mesh-host=2.0-r0`,
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("apk: the host's --cache-dir is the directory the launcher keeps the files from", () => {
  const launcher = Deno.readTextFileSync(
    new URL("../../launcher/pkg/apk.sh", import.meta.url),
  );
  assert.match(
    launcher,
    new RegExp(`^apk_cache=\\$state/${OWN_PACKAGE_CACHE.replace(".", "\\.")}$`, "m"),
  );
});

/** tests/fixtures/apk/update/: a package published after the index was fetched. */
const UPDATE = `${FIXTURES}/update`;

/**
 * A stand-in `apk` replaying the update recordings of `version` in the order they were made:
 * before any refresh `apk -v info -e fresh` and `apk add --no-progress fresh` answer as
 * recorded then (`*-2-info`, `*-3-add`: not installed, not found); a refresh answers as the
 * recording of that same command (`plain-4-refresh` for `apk update --no-progress`,
 * `cache-4-refresh` for `apk --update-cache update --no-progress`), and the add and info
 * after it as the recordings made right after that refresh (`*-5-add`, `*-6-info`).
 */
async function updateStandIn(dir: string, version: string): Promise<string> {
  const program = `${dir}/apk`;
  await Deno.writeTextFile(
    program,
    `#!/bin/sh
F='${UPDATE}/${version}'
S='${dir}'
printf '%s\\n' "$*" >> "$S/calls"
replay() {
  sed -n 's/^1|//p' "$F/$1"; sed -n 's/^2|//p' "$F/$1" >&2
  exit "$(sed -n 's/^# exit: //p' "$F/$1")"
}
b=plain
[ ! -f "$S/refreshed" ] || b=$(cat "$S/refreshed")
case "$*" in
"update --no-progress") echo plain > "$S/refreshed"; replay plain-4-refresh ;;
"--update-cache update --no-progress") echo cache > "$S/refreshed"; replay cache-4-refresh ;;
"add --no-progress fresh") if [ -f "$S/refreshed" ]; then replay "$b-5-add"; fi; replay "$b-3-add" ;;
"-v info -e fresh") if [ -f "$S/refreshed" ]; then replay "$b-6-info"; fi; replay "$b-2-info" ;;
esac
echo "stand-in: no recording of apk $*" >&2; exit 99
`,
  );
  await Deno.chmod(program, 0o755);
  return program;
}

for (const version of APK_VERSIONS) {
  Deno.test(`apk ${version} (recorded): a package published after the index was fetched is installed by the package kind, whose retry runs the adapter's refresh (apk --update-cache update)`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "noxad-apk-update-" });
    try {
      const apk = alpineApk({ program: await updateStandIn(dir, version) });
      await using engine = await testEngine({ fs: posixFileSystem(), packages: apk });
      const report = await engine.apply([{ type: "package", id: "fresh", name: "fresh" }]);
      assert.equal(report.outcome, "converged", report.error);
      assert.deepEqual(report.results[0].changes, ["install"]);
      const calls = (await Deno.readTextFile(`${dir}/calls`)).trim().split("\n");
      assert.deepEqual(calls.filter((c) => !c.startsWith("-v info")), [
        "add --no-progress fresh",
        "--update-cache update --no-progress",
        "add --no-progress fresh",
      ]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("apk (recorded): 2.14.10's `apk update` alone keeps a seconds-old index (the package stays not found), 3.0.6's fetches it; --update-cache fetches it in both", () => {
  const said = (version: string, name: string) => {
    const text = Deno.readTextFileSync(`${UPDATE}/${version}/${name}`);
    return { exit: Number(text.match(/^# exit: (\d+)$/m)![1]), text };
  };
  for (const version of APK_VERSIONS) {
    assert.equal(said(version, "plain-3-add").exit, 1, version);
    assert.match(said(version, "plain-3-add").text, /fresh \(no such package\)/);
    assert.match(said(version, "cache-4-refresh").text, /OK: 2 distinct packages available/);
    assert.equal(said(version, "cache-5-add").exit, 0, version);
  }
  const old = said("2.14.10", "plain-4-refresh").text;
  assert.doesNotMatch(old, /fetch /, "2.14.10: no fetch");
  assert.match(old, /OK: 1 distinct packages available/);
  assert.equal(said("2.14.10", "plain-5-add").exit, 1, "2.14.10: still not found");
  assert.match(said("2.14.10", "cache-4-refresh").text, /^1\|fetch http:\/\/127\.0\.0\.1:PORT\//m);
  assert.equal(said("3.0.6", "plain-5-add").exit, 0, "3.0.6: found after a plain update");
});

Deno.test("apk (recorded, 2.14.10): with `apk update` as its refresh the package kind would fail (the check above can fail)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-apk-update-" });
  try {
    const program = await updateStandIn(dir, "2.14.10");
    // The refresh the adapter ran before this fix, through the same stand-in.
    const apk = {
      ...alpineApk({ program }),
      refresh: async () => {
        await new Deno.Command(program, { args: ["update", "--no-progress"] }).output();
      },
    };
    await using engine = await testEngine({ fs: posixFileSystem(), packages: apk });
    const report = await engine.apply([{ type: "package", id: "fresh", name: "fresh" }]);
    assert.equal(report.outcome, "failed");
    assert.match(report.error ?? "", /no configured repository offers fresh/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
