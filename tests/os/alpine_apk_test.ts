/**
 * apk is not available on Debian or npm, so these tests check what can be
 * checked without it: the argv the adapter builds and how it reads apk's
 * output. The outputs below are written from apk-tools' documented formats
 * (apk-info(8): -e prints each installed name, "name-version" with -v;
 * apk-package(5): name and version split at the last "-<digit>"; the solver's
 * "unable to select packages" error). A stand-in program replays them.
 */
import assert from "node:assert/strict";
import {
  alpineApk,
  apkGlobals,
  isApkNotFound,
  parseApkInfoExists,
  splitNameVersion,
} from "../../os/alpine-apk/mod.ts";
import { PackageNotFoundError } from "../../src/ports.ts";

const RECORDED = {
  infoExists: "busybox-1.36.1-r15\n",
  notFound: "ERROR: unable to select packages:\n  wireguard-toolz (no such package):\n" +
    "    required by: world[wireguard-toolz]\n",
  noSuchVersion: "ERROR: unable to select packages:\n  busybox-1.36.1-r15:\n" +
    "    breaks: world[busybox=9.9-r0]\n",
  addOk: "(1/1) Installing busybox (1.36.1-r15)\nOK: 8 MiB in 15 packages\n",
};

Deno.test("apk: name and version split at the last '-<digit>'", () => {
  assert.deepEqual(splitNameVersion("busybox-1.36.1-r15"), {
    name: "busybox",
    version: "1.36.1-r15",
  });
  assert.deepEqual(splitNameVersion("py3-foo-2-1.2.3-r0"), {
    name: "py3-foo-2",
    version: "1.2.3-r0",
  });
  assert.deepEqual(splitNameVersion("nox-mesh-host-0.2.0-r1"), {
    name: "nox-mesh-host",
    version: "0.2.0-r1",
  });
  assert.equal(splitNameVersion("noversion"), null);
});

Deno.test("apk: `apk -v info -e NAME` output is read for that name only", () => {
  assert.deepEqual(parseApkInfoExists(RECORDED.infoExists, "busybox"), {
    name: "busybox",
    version: "1.36.1-r15",
  });
  assert.equal(parseApkInfoExists(RECORDED.infoExists, "busybox-extras"), null);
});

Deno.test("apk: the solver's refusals are recognised as not found", () => {
  assert.ok(isApkNotFound(RECORDED.notFound));
  assert.ok(isApkNotFound(RECORDED.noSuchVersion));
  assert.ok(!isApkNotFound("ERROR: Unable to lock database: Resource temporarily unavailable\n"));
});

Deno.test("apk: global options map to apk's flags", () => {
  assert.deepEqual(
    apkGlobals({ root: "/mnt", repositoriesFile: "/r", keysDir: "/k", cacheDir: "/c" }),
    ["apk", "--root", "/mnt", "--repositories-file", "/r", "--keys-dir", "/k", "--cache-dir", "/c"],
  );
  assert.deepEqual(alpineApk().argv("add", "x"), ["apk", "add", "x"]);
});

/** A stand-in apk: logs its argv, answers from the recorded outputs. */
async function standIn(dir: string, installed: Record<string, string>): Promise<string> {
  const program = `${dir}/apk`;
  const db = Object.entries(installed).map(([n, v]) => `${n}-${v}`).join("\n");
  await Deno.writeTextFile(
    program,
    `#!/bin/sh
printf '%s\\n' "$*" >> "${dir}/calls"
case "$*" in
  "-v info -e "*) name="$4"; line=$(printf '%s\\n' '${db}' | grep "^$name-[0-9]") && echo "$line" && exit 0; exit 1;;
  "add --no-progress busybox=9.9-r0"|"add --no-progress busybox=1.35.0-r0") printf '%s' '${RECORDED.noSuchVersion}' >&2; exit 1;;
  "add --no-progress wireguard-toolz") printf '%s' '${RECORDED.notFound}' >&2; exit 1;;
  "add --no-progress "*) printf '%s' '${RECORDED.addOk}'; exit 0;;
  "update --no-progress"|"upgrade --update-cache --no-progress") exit 0;;
esac
echo "stand-in: unexpected $*" >&2; exit 99
`,
  );
  await Deno.chmod(program, 0o755);
  return program;
}

Deno.test("apk (stand-in replaying recorded output; apk is not available here): verbs and fallbacks", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-apk-" });
  try {
    const program = await standIn(dir, { busybox: "1.36.1-r15" });
    await Deno.mkdir(`${dir}/files`);
    await Deno.writeTextFile(`${dir}/files/busybox-1.35.0-r0.apk`, "");
    const apk = alpineApk({ program, fileDirs: [`${dir}/files`] });
    assert.deepEqual(await apk.installed("busybox"), { name: "busybox", version: "1.36.1-r15" });
    assert.equal(await apk.installed("curl"), null);
    await apk.install("busybox", "1.36.1-r15");
    await apk.install("busybox", "1.35.0-r0"); // not in a repository: from the package file
    await assert.rejects(apk.install("busybox", "9.9-r0"), PackageNotFoundError);
    await assert.rejects(apk.install("wireguard-toolz"), PackageNotFoundError);
    await apk.refresh?.();
    await apk.upgradeAll();
    const calls = (await Deno.readTextFile(`${dir}/calls`)).trim().split("\n");
    assert.deepEqual(calls, [
      "-v info -e busybox",
      "-v info -e curl",
      "add --no-progress busybox=1.36.1-r15",
      "add --no-progress busybox=1.35.0-r0",
      `add --no-progress ${dir}/files/busybox-1.35.0-r0.apk`,
      "add --no-progress busybox=9.9-r0",
      "add --no-progress wireguard-toolz",
      "update --no-progress",
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
