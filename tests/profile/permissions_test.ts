/**
 * The profile and the adapters under the per-OS permission sets of packaging/,
 * as the init files run the host (PATH=/usr/bin:/usr/sbin:/bin:/sbin): every
 * program, path and sys kind os/needs.ts lists is granted, and nothing the
 * profile tries is refused.
 */
import assert from "node:assert/strict";
import { NEEDS } from "../../os/needs.ts";
import {
  loadPermissionSet,
  permissionFlags,
  TARGET_OSES,
  type TargetOs,
} from "../../packaging/permissions.ts";

/** The PATH the systemd unit and the OpenRC script give the host (launcher/). */
export const INIT_PATH = "/usr/bin:/usr/sbin:/bin:/sbin";

/** What os/needs.ts lists for `os` that its permission file does not grant. */
export async function notGranted(os: TargetOs): Promise<string[]> {
  const set = await loadPermissionSet(os);
  const needs = NEEDS[os];
  return [
    ...Object.keys(needs.run).filter((p) => !set.allowRun.some((r) => r.endsWith(`/${p}`))),
    ...Object.keys(needs.read).filter((p) =>
      !set.allowRead.some((r) => p === r || p.startsWith(`${r}/`))
    ),
    ...Object.keys(needs.sys).filter((k) => !set.allowSys.includes(k)),
  ];
}

/** Where this machine finds `name` through {@link INIT_PATH}, if anywhere. */
async function found(name: string): Promise<string | undefined> {
  for (const dir of INIT_PATH.split(":")) {
    if (await Deno.stat(`${dir}/${name}`).then(() => true, () => false)) return `${dir}/${name}`;
  }
}

async function profileUnder(os: TargetOs): Promise<string> {
  const set = await loadPermissionSet(os);
  // This machine is Debian: where a tool is not at any of the set's spellings (all of
  // Alpine's; nft and sysctl, which Debian keeps in /usr/sbin and Arch in /usr/bin), it
  // is spelled as this machine has it (the same name).
  for (const name of new Set(set.allowRun.map((p) => p.slice(p.lastIndexOf("/") + 1)))) {
    const spelled = set.allowRun.filter((p) => p.endsWith(`/${name}`));
    const there = await Promise.all(
      spelled.map((p) => Deno.stat(p).then(() => true, () => false)),
    );
    if (os === "alpine" || !there.some(Boolean)) {
      const here = await found(name);
      if (here) set.allowRun.push(here);
    }
  }
  const mod = new URL("../../mod.ts", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...permissionFlags(set),
      // The checkout, where mod.ts is read from here (the package reads its own bundle).
      "--allow-read=" + new URL("../..", import.meta.url).pathname,
      mod,
      "profile",
      "--json",
    ],
    env: { PATH: INIT_PATH },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout);
}

for (const os of TARGET_OSES) {
  Deno.test(`profile under the ${os} permission set alone: everything os/needs.ts lists is granted, nothing refused`, async () => {
    assert.deepEqual(await notGranted(os), [], `packaging/${os}/permissions lacks these`);
    const text = await profileUnder(os);
    const own = Object.keys(NEEDS[os].run).join("|");
    assert.doesNotMatch(text, new RegExp(`does not allow running (${own})\\b|may not look`), text);
    const profile = JSON.parse(text);
    assert.notEqual(profile.capabilities.network.state, "absent");
    assert.ok(profile.kernel && profile.hostname);
  });
}
