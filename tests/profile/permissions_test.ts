/**
 * The profile and the adapters under the per-OS permission sets of
 * packaging/: with the programs, paths and sys kinds os/needs.ts lists added,
 * nothing the profile tries is refused. Also says which of those the
 * permission files do not grant yet (the packaging side folds them in).
 */
import assert from "node:assert/strict";
import { NEEDS } from "../../os/needs.ts";
import { loadPermissionSet, permissionFlags, type TargetOs } from "../../packaging/permissions.ts";

/** Where each program resolves on this machine (the permission files list absolute paths). */
async function resolve(name: string): Promise<string[]> {
  const found: string[] = [];
  for (
    const dir of ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
  ) {
    try {
      await Deno.stat(`${dir}/${name}`);
      found.push(`${dir}/${name}`);
    } catch { /* not here */ }
  }
  return found;
}

async function profileUnder(os: TargetOs): Promise<{ text: string; missing: string[] }> {
  const set = await loadPermissionSet(os);
  const needs = NEEDS[os];
  const missing = [
    ...Object.keys(needs.run).filter((p) => !set.allowRun.some((r) => r.endsWith(`/${p}`))),
    ...Object.keys(needs.read).filter((p) =>
      !set.allowRead.some((r) => p === r || p.startsWith(`${r}/`))
    ),
    ...Object.keys(needs.sys).filter((k) => !set.allowSys.includes(k)),
  ];
  for (const name of Object.keys(needs.run)) set.allowRun.push(...await resolve(name));
  set.allowRead.push(...Object.keys(needs.read));
  set.allowSys.push(...Object.keys(needs.sys));
  const mod = new URL("../../mod.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...permissionFlags(set),
      "--allow-read=" + new URL("../..", import.meta.url).pathname,
      mod,
      "profile",
      "--json",
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return { text: new TextDecoder().decode(out.stdout), missing };
}

for (const os of ["arch", "alpine", "tarball"] as const) {
  Deno.test(`profile under the ${os} permission set plus os/needs.ts: nothing refused`, async () => {
    const { text, missing } = await profileUnder(os);
    const own = Object.keys(NEEDS[os].run).join("|");
    assert.doesNotMatch(text, new RegExp(`does not allow running (${own})\\b|may not look`), text);
    const profile = JSON.parse(text);
    assert.notEqual(profile.capabilities.network.state, "absent");
    assert.ok(profile.kernel && profile.hostname);
    if (missing.length) {
      console.log(`packaging/${os}/permissions does not grant yet: ${missing.join(", ")}`);
    }
  });
}
