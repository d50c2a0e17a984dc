// The runtime under the host: a built host runs only on the Deno version it is tested on
// (every package carries it; a bundle started by hand on another deno meets the refusal),
// says so in one line and exits with a failure its launcher counts; the Alpine package
// depends on no deno.
import assert from "node:assert/strict";
import { join } from "node:path";
import { build } from "../packaging/build.ts";
import { runtimePins } from "../packaging/tarball/runtime.ts";
import { PROGRAM, runtimeProblem, VERSION } from "../src/version.ts";
import { count, launch, makeWorld } from "./_launcher_world.ts";

const repo = (p: string): string => new URL(`../${p}`, import.meta.url).pathname;

Deno.test("runtimeProblem: the tested version and its builds pass; any other version, older or newer, is refused with what to do", () => {
  assert.equal(runtimeProblem("2.9.6", "2.9.6"), undefined);
  assert.equal(runtimeProblem("2.9.6.1", "2.9.6"), undefined, "apk's ~ accepts it too");
  assert.equal(runtimeProblem("2.10.0", null), undefined, "from a checkout: any runtime");
  for (const other of ["2.9.5", "2.9.7", "2.9.60", "2.10.0", "3.0.0", "1.46.3"]) {
    const problem = runtimeProblem(other, "2.9.6");
    assert.ok(problem, other);
    assert.ok(problem.includes(`tested on Deno 2.9.6 and refuses to run on Deno ${other}`));
    assert.ok(problem.includes("runs the Deno 2.9.6 the package carries"), problem);
    assert.ok(!problem.includes("\n"), "one line");
  }
});

Deno.test("alpine: the APKBUILD depends on no deno: it installs the runtime it carries and its loader", async () => {
  const pins = await runtimePins();
  const apkbuild = await Deno.readTextFile(repo("packaging/alpine/APKBUILD"));
  assert.doesNotMatch(apkbuild, /^depends=/m);
  assert.doesNotMatch(apkbuild, /deno~/);
  assert.match(
    apkbuild,
    /install -Dm0755 "\$_rt"\/deno "\$pkgdir"\/usr\/lib\/nox-mesh-host\/deno$/m,
  );
  assert.match(apkbuild, /"\$pkgdir"\/usr\/lib\/nox-mesh-host\/glibc\//);
  assert.equal(Deno.version.deno, pins.version, "the tests run on the pinned Deno");
});

Deno.test("a built host on a Deno it is not tested on: every command but version refuses in one line (exit 70), and its launcher counts each start as a failure", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxpk-runtime-" });
  try {
    // The Alpine bundle as built, stamped as tested on another Deno than the one here: the
    // same situation as Alpine's deno moved under it.
    const tested = "2.8.1";
    const b = await build({
      os: "alpine",
      form: "bundled",
      out: join(dir, "alpine"),
      testedRuntime: tested,
    });
    const bundle = join(b.dir, "nox-mesh-host.js");
    const host = async (args: string[]) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--no-config", "-A", bundle, ...args],
        env: { NOX_MESH_HOST_STATE_DIR: join(dir, "state") },
        stdin: "null",
      }).output();
      const d = new TextDecoder();
      return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
    };
    const line = `${PROGRAM}: ${PROGRAM} ${VERSION} is tested on Deno ${tested} and refuses to ` +
      `run on Deno ${Deno.version.deno}: start it with the program its package installs ` +
      `(${PROGRAM}, which runs the Deno ${tested} the package carries), or install a ` +
      `${PROGRAM} tested on Deno ${Deno.version.deno}\n`;
    for (const args of [["run"], ["apply", "--bundle"], ["status", "--json"], ["profile"]]) {
      const r = await host(args);
      assert.equal(r.code, 70, `${args.join(" ")}: ${r.stderr}`);
      assert.equal(r.stderr, line, args.join(" "));
      assert.equal(r.stdout, "");
    }
    await assert.rejects(Deno.stat(join(dir, "state")), Deno.errors.NotFound, "nothing touched");
    // `version` still says what runs here.
    const v = await host(["version", "--json"]);
    assert.equal(v.code, 0, v.stderr);
    assert.equal(JSON.parse(v.stdout).deno, Deno.version.deno);

    // Under the real launcher: each start is a counted failure, not a restart.
    const w = await makeWorld({ steps: [] });
    try {
      await Deno.writeTextFile(
        w.bin,
        `#!/bin/sh\nexec '${Deno.execPath()}' run --no-config -A '${bundle}' "$@"\n`,
      );
      w.env.NOX_MESH_HOST_STATE_DIR = join(w.dir, "state");
      const { stderr } = await launch(w);
      assert.ok(count(stderr, "refuses to run on Deno") >= 3, stderr);
      assert.match(stderr, /failed \(exit 70\), 1 in a row/);
      assert.match(stderr, /failed \(exit 70\), 3 in a row/);
      assert.match(stderr, /HALTED/);
    } finally {
      await Deno.remove(w.dir, { recursive: true });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
