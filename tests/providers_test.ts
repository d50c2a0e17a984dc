// The providers' descriptors (os/provider.ts) and what is derived from them: adding a
// provider is its descriptor and its line in the list (os/provider_list.ts), and where its
// programs lie is each distribution's to say (os/distros/); the choice of providers, the
// needs, the permission sets' lines, the `host` task and the per-OS builds' lists follow from
// the lists alone.
import assert from "node:assert/strict";
import { providersFor } from "../os/mod.ts";
import { carriedBy, needsOf } from "../os/needs.ts";
import { type ProviderDescriptor, selects } from "../os/provider.ts";
import { PROVIDERS } from "../os/provider_list.ts";
import { DISTRIBUTIONS } from "../os/distros/mod.ts";
import { CARRIED } from "../os/carried.ts";
import {
  carriedModule,
  hostAllowRun,
  permissionBlock,
  rewritePermissionFile,
} from "../packaging/derive_providers.ts";
import { loadPermissionSet, parsePermissionFile } from "../packaging/permissions.ts";
import type { Firewall } from "../src/providers.ts";
import type { Capability, Profile } from "../src/profile.ts";

/**
 * A provider that exists only as its descriptor (never run: only its factory is called,
 * which the test is about): a firewall carried by the Arch build and the checkout. It names
 * its program; Arch places it (below), as a distribution's file would.
 */
const STUB: ProviderDescriptor<"firewall"> = {
  folder: "stub-wall",
  port: "firewall",
  names: ["stubwall"],
  builds: ["arch", "checkout"],
  confine: { capability: "nftables" },
  programs: { stubwall: { why: "stub firewall resources" } },
  reads: { "/run/stubwall": "stub firewall: its state" },
  open: () => ({ name: "stubwall" }) as unknown as Firewall,
};
const LIST = [...PROVIDERS, STUB];
/** The distributions, Arch's programs with the stub's beside them. */
const DISTROS = DISTRIBUTIONS.map((d) =>
  d.id === "arch" ? { ...d, programs: { ...d.programs, stubwall: ["/usr/bin/stubwall"] } } : d
);

const cap = (state: Capability["state"], provider?: string): Capability => ({
  state,
  ...(provider ? { provider } : {}),
  evidence: [],
});

function profile(firewall: string): Profile {
  return {
    detectedAt: "",
    os: { id: "arch", like: [] },
    architecture: "x86_64",
    capabilities: {
      init: cap("working", "systemd"),
      packages: cap("working", "pacman"),
      containers: cap("absent"),
      graphical: cap("absent"),
      network: cap("absent"),
      wireguard: cap("absent"),
      nftables: cap("working", firewall),
      accounts: cap("absent"),
    },
  };
}

Deno.test("providers: a provider added to the list is chosen by its confinement, as the others", () => {
  const carried = LIST.filter((p) => selects(p.builds, "checkout"));
  assert.equal(providersFor(profile("stubwall"), { from: carried }).firewall?.name, "stubwall");
  assert.equal(providersFor(profile("nftables"), { from: carried }).firewall?.name, "nftables");
  // Not in the list: never chosen, whatever the profile says.
  assert.equal(providersFor(profile("stubwall")).firewall, undefined);
});

Deno.test("providers: a provider added to the list joins the needs, the permission lines and the host task of its builds only", async () => {
  assert.deepEqual(needsOf("arch", LIST, DISTROS).at.stubwall, [
    { path: "/usr/bin/stubwall", on: "arch" },
  ]);
  assert.equal(needsOf("arch", LIST, DISTROS).read["/run/stubwall"], "stub firewall: its state");
  assert.equal(needsOf("alpine", LIST, DISTROS).run.stubwall, undefined);
  assert.ok(
    permissionBlock("arch", "allow-run", LIST, DISTROS).some((l) =>
      /^allow-run +\/usr\/bin\/stubwall +# stub firewall resources$/.test(l)
    ),
  );
  assert.ok(
    !permissionBlock("alpine", "allow-run", LIST, DISTROS).join("\n").includes("stubwall"),
  );
  assert.match(hostAllowRun(LIST), /^--allow-run=.*,stubwall,\.\/packaging\/dev\/nox-mesh-host$/);
  assert.doesNotMatch(hostAllowRun(), /stubwall/);

  // The committed Arch set, rewritten with it: the set gains exactly its program and path.
  const before = await loadPermissionSet("arch");
  const text = await Deno.readTextFile(before.source);
  const after = parsePermissionFile(
    rewritePermissionFile(text, "arch", LIST, DISTROS),
    "arch",
    "x",
  );
  assert.deepEqual(after.allowRun, [...before.allowRun, "/usr/bin/stubwall"]);
  assert.deepEqual(
    after.allowRead.filter((p) => !before.allowRead.includes(p)),
    ["/run/stubwall"],
  );
  assert.deepEqual(after.denyWrite, before.denyWrite);
});

Deno.test("providers: a per-OS build's list imports the descriptors its builds name, no other", () => {
  const root = "file:///checkout/";
  const arch = carriedModule("arch", root, LIST);
  const alpine = carriedModule("alpine", root, LIST);
  assert.ok(arch.includes(`from "${root}os/stub-wall/provider.ts"`));
  assert.ok(!alpine.includes("stub-wall"));
  for (const p of PROVIDERS) {
    for (const [os, text] of [["arch", arch], ["alpine", alpine]] as const) {
      assert.equal(
        text.includes(`from "${root}os/${p.folder}/provider.ts"`),
        selects(p.builds, os),
        `${os} and os/${p.folder}`,
      );
    }
  }
  // The checkout carries every provider but the tarball's own package.
  assert.deepEqual(
    CARRIED.map((p) => p.folder),
    carriedBy("checkout").map((p) => p.folder),
  );
  assert.ok(!CARRIED.some((p) => p.folder === "tarball-self"));
});

Deno.test("providers: a program its build's distribution does not place is refused, naming the distribution's file", () => {
  assert.throws(
    () => needsOf("arch", LIST),
    /os\/stub-wall runs stubwall, and the arch build carries it, but Arch places no stubwall \(os\/distros\/arch\.ts programs\)/,
  );
  const pathless: ProviderDescriptor<"firewall"> = { ...STUB, builds: ["alpine"] };
  assert.throws(() => needsOf("alpine", [pathless], DISTROS), /Alpine places no stubwall/);
  // The tarball runs on every distribution: one that places it is enough.
  const tarball: ProviderDescriptor<"firewall"> = { ...STUB, builds: ["tarball"] };
  assert.deepEqual(needsOf("tarball", [tarball], DISTROS).at.stubwall, [
    { path: "/usr/bin/stubwall", on: "arch" },
  ]);
  assert.throws(() => needsOf("tarball", [tarball]), /stubwall, which no distribution places/);
});
