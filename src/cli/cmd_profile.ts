/** `profile` and `inventory` (R7): what this machine can do, and what this node holds. */
import { META } from "../store/meta.ts";
import { type Profile, profileText } from "../profile.ts";
import { HostError } from "../errors.ts";
import type { Command, CommandContext } from "./command.ts";
import { subject } from "./format.ts";
import { EXIT } from "./io.ts";
import { PROGRAM, runtimeVersion, VERSION } from "../version.ts";

async function profileOf(ctx: CommandContext): Promise<Profile> {
  if (!ctx.io.profile) {
    throw new HostError("profile.unavailable", "this build has no profile detector");
  }
  return await ctx.io.profile();
}

/** `profile`. */
export const profileCommand: Command = {
  name: "profile",
  summary: "show what this machine can do: OS, init, packages, containers, graphics, network",
  usage: "profile",
  help: `Detect and show this machine's profile: OS (os-release), architecture, kernel,
and for each capability (init, packages, containers, graphical, network) whether
it is absent, present (installed), running, or working. "working" is only shown
after using the thing (the init or runtime answered a query, the package manager
answered a query of its database), never because a package is installed.
Changes nothing. Exit codes: 0 shown.
`,
  options: {},
  positionals: [0, 0],
  async run(ctx) {
    const profile = await profileOf(ctx);
    ctx.io.stdout(ctx.json ? JSON.stringify(profile) + "\n" : profileText(profile));
    return EXIT.ok;
  },
};

/** `inventory`. */
export const inventoryCommand: Command = {
  name: "inventory",
  summary: "show identity, profile, what this node holds and what it last applied",
  usage: "inventory",
  help: `Show this node's inventory: the host's version and the Deno version it runs on, its
identity (with its WireGuard public key, once made), its profile (see "profile"), every
resource it holds (recorded after read-back), and its last apply.
Reads the store and detects the profile; changes nothing.
Exit codes: 0 shown, 70 the store cannot be opened, 78 configuration.
`,
  options: {},
  positionals: [0, 0],
  // Long because: it prints the profile's sections in the order a person reads them, one short
  // block each.
  async run(ctx) {
    const { loadConfig, Store, readOverlayKey } = await import("./_engine.ts");
    const config = await loadConfig(ctx.flags);
    const profile = await profileOf(ctx);
    using store = Store.open(config.stateDir);
    const current = store.current();
    const overlayKey = await readOverlayKey(config.stateDir);
    const inventory = {
      // What runs here: the host's version and the Deno runtime under it.
      host: { version: VERSION, deno: runtimeVersion() },
      identity: {
        node: store.meta(META.node) ?? null,
        stateDir: config.stateDir,
        // Only the public half: the private key never leaves its file.
        wireguardPublicKey: overlayKey?.publicKey ?? null,
      },
      profile,
      declaration: current && {
        source: current.source,
        origin: current.origin,
        serial: current.serial ?? null,
        digest: current.digest,
        acceptedAt: current.acceptedAt,
      },
      held: store.managed().map((h) => ({
        id: h.id,
        type: h.type,
        key: h.key,
        digest: h.digest,
        created: h.created,
        appliedAt: h.appliedAt,
      })),
      lastApply: store.lastApply(),
    };
    if (ctx.json) {
      ctx.io.stdout(JSON.stringify(inventory) + "\n");
      return EXIT.ok;
    }
    const last = inventory.lastApply;
    const lines = [
      `node         ${inventory.identity.node ?? "no identity (not enrolled)"}\n`,
      `store        ${store.path}\n`,
      `host         ${PROGRAM} ${inventory.host.version} on Deno ${inventory.host.deno}\n`,
      `wireguard    ${inventory.identity.wireguardPublicKey ?? "no key yet"}\n`,
      profileText(profile),
      `held         ${inventory.held.length} resources\n`,
      ...inventory.held.map((h) =>
        `  ${h.type.padEnd(10)}${h.id}  ${subject(h.key)}${
          h.created ? "" : "  (not created by the host)"
        }\n`
      ),
      `last apply   ${
        last
          ? `#${last.id} ${last.outcome} at ${
            last.endedAt ?? last.startedAt
          } (${last.source} ${last.origin})`
          : "none yet"
      }\n`,
    ];
    ctx.io.stdout(lines.join(""));
    return EXIT.ok;
  },
};
