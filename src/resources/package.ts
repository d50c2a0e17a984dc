/**
 * The package resource: installed, at exactly the declared version when one is
 * given. A package no longer declared is forgotten, never uninstalled: removing
 * software is a decision a declaration cannot see the consequences of. The
 * host's own package may be declared with a version: that is how a fleet
 * upgrades (or pins) the host.
 */
import * as v from "valibot";
import { resourceId } from "../declaration/fields.ts";
import { type PackageFile, type PackageManager, PackageNotFoundError } from "../providers.ts";
import {
  type Change,
  change,
  type Diff,
  type KindContext,
  type Release,
  type ResourceKind,
  type RuleScope,
} from "./kind.ts";
import { NoProviderError, passState, ResourceError } from "./kind.ts";
import { PROGRAM } from "../version.ts";

/** Resource: a package that must be installed (at an exact version when given). */
export const PackageSchema = v.strictObject({
  type: v.literal("package"),
  id: resourceId,
  name: v.pipe(
    v.string(),
    v.regex(
      /^[a-z0-9@_+][a-z0-9@._+-]{0,127}$/,
      "a package name is lowercase letters, digits and @ . _ + -",
    ),
  ),
  version: v.optional(
    v.pipe(
      v.string(),
      v.regex(
        /^[A-Za-z0-9][A-Za-z0-9._:+~-]{0,63}$/,
        "a version is letters, digits and . _ : + ~ -",
      ),
    ),
  ),
  /**
   * The host's own tarball by reference (DESIGN.md §19): its SHA-256 (hex) and, with
   * `size`, its length. Only for the host's own package at an exact version: on a
   * tarball installation there is no repository, and the tarball adapter installs these
   * bytes (from the host's content sources, verified). pacman and apk ignore them.
   */
  contentSha256: v.optional(
    v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/, "is not a SHA-256 in lowercase hex")),
  ),
  size: v.optional(v.pipe(v.number(), v.safeInteger(), v.minValue(1))),
  /**
   * "full": upgrade the whole machine (pacman -Syu, apk upgrade -U) before
   * installing it. Without it the host never refreshes pacman's sync database.
   */
  upgrade: v.optional(
    v.picklist(["full"], 'upgrade is "full" (upgrade the whole machine first) or absent'),
  ),
});

/** A package resource. */
export type PackageResource = v.InferOutput<typeof PackageSchema>;

/** What a package check can find: not installed, or another version. */
type PackageChange = Change<"install" | "version">;

/**
 * The host's own package at a version the launcher rolled back from here: that
 * version crashed on start on this machine, so installing it again would undo
 * the rollback and loop. The resource fails instead, saying why.
 */
function refuseRolledBack(
  ctx: KindContext,
  manager: PackageManager,
  resource: PackageResource,
): void {
  if (resource.name !== PROGRAM || resource.version === undefined) return;
  if (!ctx.host.rolledBackFrom.has(manager.upstreamVersion(resource.version))) return;
  throw new ResourceError(
    "resource.rolled-back",
    `${PROGRAM} ${resource.version} failed to start on this machine and the launcher rolled it ` +
      `back (it is listed in the state directory's rolled-back-from file)`,
    { hint: "declare a fixed version; to try this one again, remove its line from that file" },
  );
}

/** The package file a resource names by digest, fetched from the apply's content sources. */
function packageFile(ctx: KindContext, resource: PackageResource): PackageFile | undefined {
  const { contentSha256: sha256, size } = resource;
  if (sha256 === undefined || size === undefined) return undefined;
  const what = `${resource.name} ${resource.version} (package "${resource.id}")`;
  return {
    sha256,
    size,
    bytes: () => {
      if (!ctx.content) {
        throw new ResourceError(
          "resource.content-unavailable",
          `${what} is declared by reference (sha256 ${sha256}) and this apply has no ` +
            "content source",
          { hint: "apply it from the link, or from a file with its blobs/ directory beside it" },
        );
      }
      return ctx.content(sha256, size, what);
    },
  };
}

function packages(ctx: KindContext): PackageManager {
  const manager = ctx.providers.packages;
  if (!manager) throw new NoProviderError("package", "a package manager (pacman or apk)");
  return manager;
}

/** The package kind. */
/**
 * Packages this pass installed that take effect only when the host is next started, by
 * resource id: why (the kind's own state for the pass, asked by `takesEffectOnRestart`).
 */
const staged = passState(() => new Map<string, string>());

export const packageKind: ResourceKind<PackageResource, PackageChange> = {
  type: "package",
  schema: PackageSchema,
  needs: "packages",
  // A package may install the tool another kind's adapter drives (podman, nft …).
  bringsProviders: true,
  references: (resource) => resource.contentSha256 === undefined ? [] : [resource.contentSha256],
  takesEffectOnRestart: (ctx, resource) => staged(ctx).get(resource.id),

  key: (resource) => `package:${resource.name}`,

  rules(resource: PackageResource, at: string, scope: RuleScope): void {
    const byDigest = resource.contentSha256 !== undefined;
    if (byDigest !== (resource.size !== undefined)) {
      scope.problems.push({
        path: `${at}.${byDigest ? "size" : "contentSha256"}`,
        message: "contentSha256 and size go together",
      });
    }
    if (!byDigest && resource.size === undefined) return;
    if (resource.name !== PROGRAM || resource.version === undefined) {
      scope.problems.push({
        path: `${at}.contentSha256`,
        message: `a package by digest is only the host's own (${PROGRAM}) at an exact version: ` +
          "its tarball; other packages come from the machine's package manager",
      });
    }
  },

  async check(ctx: KindContext, resource: PackageResource): Promise<Diff<PackageChange>> {
    const manager = packages(ctx);
    const found = await manager.installed(resource.name);
    if (found?.version !== resource.version) refuseRolledBack(ctx, manager, resource);
    if (found === null) {
      return {
        exists: false,
        changes: [change("install", resource.version ? `install ${resource.version}` : "install")],
      };
    }
    // A staged upgrade of the host reads back as installed (pending the next start): the
    // adapter forgets the stage once the launcher applied or refused it.
    if (resource.version !== undefined && found.version !== resource.version) {
      return {
        exists: true,
        changes: [change("version", `version ${found.version} → ${resource.version}`)],
      };
    }
    return { exists: true, changes: [] };
  },

  async apply(ctx: KindContext, resource: PackageResource): Promise<void> {
    const manager = packages(ctx);
    // Opted into: the whole machine is upgraded first (pacman -Syu), then installed from there.
    if (resource.upgrade === "full") await manager.upgradeAll();
    const file = packageFile(ctx, resource);
    try {
      await manager.install(resource.name, resource.version, file);
    } catch (error) {
      if (!(error instanceof PackageNotFoundError) || !manager.refresh) throw error;
      // Where refreshing alone is safe (apk), the indexes may predate the package:
      // refresh them once, then retry. pacman has no such refresh (a partial upgrade).
      await manager.refresh();
      await manager.install(resource.name, resource.version, file);
    }
    // Installed, but in effect only once the host is started again (the tarball's own
    // package, staged for the launcher): said in the result, and the run loop exits 0.
    const now = await manager.installed(resource.name);
    if (now?.pending !== undefined) staged(ctx).set(resource.id, now.pending);
  },

  release(): Promise<Release> {
    return Promise.resolve({
      outcome: "forgotten",
      detail: "packages are never uninstalled; left installed",
    });
  },
};
