import assert from "node:assert/strict";
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { main } from "../../src/cli/main.ts";
import type { CliIo } from "../../src/cli/io.ts";
import type { Profile } from "../../src/profile.ts";
import { ensureOverlayKey } from "../../src/overlay_key.ts";
import { VERSION } from "../../src/version.ts";

const PROFILE: Profile = {
  detectedAt: "2026-01-01T00:00:00Z",
  os: { id: "arch", prettyName: "Arch Linux", like: [] },
  architecture: "x86_64",
  capabilities: {
    init: { state: "working", provider: "systemd", evidence: ["systemd answered"] },
    packages: { state: "working", provider: "pacman", evidence: ["pacman answered"] },
    containers: { state: "absent", evidence: ["none"] },
    graphical: { state: "absent", evidence: ["none"] },
    network: { state: "running", evidence: ["eth0 up"] },
    wireguard: { state: "working", provider: "userspace", evidence: ["made wg scratch"] },
    nftables: { state: "absent", evidence: ["nft is not installed"] },
    accounts: { state: "working", provider: "shadow", evidence: ["useradd answered"] },
  },
};

function io(out: string[]): CliIo {
  return {
    stdout: (t) => out.push(t),
    stderr: (t) => out.push(t),
    stdin: () => Promise.resolve(new Uint8Array()),
    providers: () => Promise.resolve({ fs: posixFileSystem() }),
    profile: () => Promise.resolve(PROFILE),
  };
}

Deno.test("profile --json prints the detected profile as one document", async () => {
  const out: string[] = [];
  assert.equal(await main(["profile", "--json"], io(out)), 0);
  assert.deepEqual(JSON.parse(out.join("")), PROFILE);
});

Deno.test("inventory: the host and its runtime, identity, profile, held resources and the last apply", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-inv-" });
  try {
    const decl = `${dir}/decl.json`;
    await Deno.writeTextFile(
      decl,
      JSON.stringify({
        version: 1,
        resources: [{
          type: "directory",
          id: "d",
          path: `${dir}/managed/d`,
          mode: "0755",
          owner: "root",
          group: "root",
        }],
      }),
    );
    await Deno.mkdir(`${dir}/managed`);
    await Deno.writeTextFile(
      `${dir}/host.json`,
      JSON.stringify({ managedRoots: [`${dir}/managed`] }),
    );
    const flags = ["--state-dir", `${dir}/state`, "--config", `${dir}/host.json`];
    const applied: string[] = [];
    assert.equal(await main(["apply", decl, ...flags], io(applied)), 0, applied.join(""));
    const out: string[] = [];
    assert.equal(await main(["inventory", "--json", ...flags], io(out)), 0, out.join(""));
    const inv = JSON.parse(out.join(""));
    assert.deepEqual(inv.identity, {
      node: null,
      stateDir: `${dir}/state`,
      wireguardPublicKey: null,
    });
    assert.deepEqual(inv.profile, PROFILE);
    assert.deepEqual(inv.host, { version: VERSION, deno: Deno.version.deno });
    assert.deepEqual(inv.held.map((h: { id: string; type: string }) => [h.id, h.type]), [[
      "d",
      "directory",
    ]]);
    assert.equal(inv.lastApply.outcome, "converged");
    const text: string[] = [];
    assert.equal(await main(["inventory", ...flags], io(text)), 0);
    assert.match(text.join(""), /\ninit {9}working systemd\n/);
    assert.match(text.join(""), /\nheld {9}1 resources\n {2}directory d {2}.*\/managed\/d\n/);
    assert.match(text.join(""), /\nlast apply {3}#1 converged at /);
    assert.match(text.join(""), /\nwireguard {4}no key yet\n/);
    assert.match(
      text.join(""),
      new RegExp(`\nhost {9}nox-mesh-host ${VERSION} on Deno ${Deno.version.deno}\n`),
    );

    // Once the node has its WireGuard key, the inventory shows the public half only.
    const key = await ensureOverlayKey(`${dir}/state`);
    const after: string[] = [];
    assert.equal(await main(["inventory", "--json", ...flags], io(after)), 0);
    assert.equal(JSON.parse(after.join("")).identity.wireguardPublicKey, key.publicKey);
    const secret = (await Deno.readTextFile(key.path)).trim();
    assert.ok(!after.join("").includes(secret), "the private key is never shown");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
