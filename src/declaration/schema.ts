/**
 * The shape of declaration v1 (DESIGN.md §4), as valibot schemas. Shape only:
 * rules that need the host's configuration (managed roots, its own files,
 * conflicts between resources) live in parse.ts.
 */
import * as v from "valibot";
import { pathProblem } from "./paths.ts";
import { OVERLAY_FIELDS } from "../resources/overlay.ts";
import { FIREWALL_FIELDS } from "../resources/firewall.ts";
import { SYSCTL_FIELDS } from "../resources/sysctl.ts";

/** Node ids: lowercase letters, digits and "-", 1–63 characters, not starting with "-". */
export const NODE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

const absolutePath = v.pipe(
  v.string(),
  v.check((p) => pathProblem(p) === undefined, (issue) => `${pathProblem(issue.input)}`),
);

const resourceId = v.pipe(
  v.string(),
  v.regex(
    /^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$/,
    "an id is 1–128 characters: letters, digits and . _ @ : - (not starting with a symbol)",
  ),
);

const mode = v.pipe(
  v.string('a mode is an octal string such as "0644"'),
  v.regex(
    /^[0-7]{3,4}$/,
    (i) => `mode ${JSON.stringify(i.input)} is not an octal string such as "0644"`,
  ),
);

const principal = (what: string) =>
  v.pipe(
    v.string(),
    v.regex(
      /^([a-z_][a-z0-9_.-]{0,31}\$?|[0-9]{1,10})$/,
      `${what} is a user/group name (e.g. "root") or a numeric id`,
    ),
  );

const argv = (what: string) =>
  v.pipe(
    v.array(v.string()),
    v.minLength(1, `${what} needs at least the program to run`),
    v.check(
      (a) => a.length > 0 && a[0].startsWith("/") && pathProblem(a[0]) === undefined,
      `${what}[0] must be an absolute, normalised path to the program (no PATH lookup)`,
    ),
    v.check((a) => a.every((s) => !s.includes("\0")), `${what} contains a NUL character`),
  );

/** Resource: a directory the host creates and keeps at mode/owner/group. */
export const DirectorySchema = v.strictObject({
  type: v.literal("directory"),
  id: resourceId,
  path: absolutePath,
  mode,
  owner: principal("owner"),
  group: principal("group"),
});

/** Resource: a regular file with exact content, written atomically. */
export const FileSchema = v.pipe(
  v.strictObject({
    type: v.literal("file"),
    id: resourceId,
    path: absolutePath,
    content: v.optional(v.string()),
    contentBase64: v.optional(
      v.pipe(
        v.string(),
        v.regex(
          /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/,
          "contentBase64 is not valid base64 (standard alphabet, padded)",
        ),
      ),
    ),
    mode,
    owner: principal("owner"),
    group: principal("group"),
  }),
  v.check(
    (f) => (f.content === undefined) !== (f.contentBase64 === undefined),
    "a file has exactly one of content (utf-8 text) or contentBase64",
  ),
);

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
});

/** Resource: a service of the init system, enabled and/or running as declared. */
export const ServiceSchema = v.strictObject({
  type: v.literal("service"),
  id: resourceId,
  name: v.pipe(
    v.string(),
    v.regex(
      /^[A-Za-z0-9][A-Za-z0-9@._:\\-]{0,250}$/,
      "a service name is letters, digits and @ . _ : - \\",
    ),
  ),
  enabled: v.boolean(),
  running: v.boolean(),
});

const mount = v.strictObject({
  source: absolutePath,
  target: absolutePath,
  readOnly: v.optional(v.boolean()),
});

/** Resource: a container from an image pinned by digest. */
export const ContainerSchema = v.strictObject({
  type: v.literal("container"),
  id: resourceId,
  name: v.pipe(
    v.string(),
    v.regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, "a container name is letters, digits and _ . -"),
  ),
  image: v.pipe(
    v.string(),
    v.regex(
      /^[a-z0-9][a-z0-9._/:-]*@sha256:[a-f0-9]{64}$/,
      (i) =>
        `image ${
          JSON.stringify(i.input)
        } is not pinned by digest; write it as name@sha256:<64 hex digits> (tags are refused)`,
    ),
  ),
  args: v.array(v.string()),
  env: v.record(
    v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an env name is letters, digits and _")),
    v.string(),
  ),
  mounts: v.array(mount),
  restart: v.picklist(["no", "always", "on-failure", "unless-stopped"]),
});

/** Resource (trusted parse only): a program run when its verify program says it is needed. */
export const ActionSchema = v.strictObject({
  type: v.literal("action"),
  id: resourceId,
  run: argv("run"),
  verify: argv("verify"),
});

/** Resource: a WireGuard interface (fields and rules in src/resources/overlay.ts). */
export const OverlaySchema = v.strictObject({
  type: v.literal("overlay"),
  id: resourceId,
  ...OVERLAY_FIELDS,
});

/** Resource: an nftables table (fields and rules in src/resources/firewall.ts). */
export const FirewallSchema = v.strictObject({
  type: v.literal("firewall"),
  id: resourceId,
  ...FIREWALL_FIELDS,
});

/** Resource: a kernel setting (fields and rules in src/resources/sysctl.ts). */
export const SysctlSchema = v.strictObject({
  type: v.literal("sysctl"),
  id: resourceId,
  ...SYSCTL_FIELDS,
});

/** The envelope, with resources checked one by one in parse.ts. */
export const EnvelopeSchema = v.strictObject({
  version: v.literal(
    1,
    (i) => `version ${JSON.stringify(i.input)} is not supported; this host reads version 1`,
  ),
  node: v.optional(
    v.pipe(v.string(), v.regex(NODE_ID, "a node id is 1–63 lowercase letters, digits and -")),
  ),
  serial: v.optional(
    v.pipe(v.number(), v.safeInteger("serial is an integer"), v.minValue(0, "serial is >= 0")),
  ),
  resources: v.array(v.unknown()),
});

/** The schema of each resource type, by its `type`. */
export const RESOURCE_SCHEMAS = {
  directory: DirectorySchema,
  file: FileSchema,
  package: PackageSchema,
  service: ServiceSchema,
  container: ContainerSchema,
  action: ActionSchema,
  overlay: OverlaySchema,
  firewall: FirewallSchema,
  sysctl: SysctlSchema,
} as const;

/** A directory resource. */
export type DirectoryResource = v.InferOutput<typeof DirectorySchema>;
/** A file resource. */
export type FileResource = v.InferOutput<typeof FileSchema>;
/** A package resource. */
export type PackageResource = v.InferOutput<typeof PackageSchema>;
/** A service resource. */
export type ServiceResource = v.InferOutput<typeof ServiceSchema>;
/** A container resource. */
export type ContainerResource = v.InferOutput<typeof ContainerSchema>;
/** An action resource (bundle only). */
export type ActionResource = v.InferOutput<typeof ActionSchema>;
/** An overlay (WireGuard) resource. */
export type OverlayResource = v.InferOutput<typeof OverlaySchema>;
/** A firewall (nftables table) resource. */
export type FirewallResource = v.InferOutput<typeof FirewallSchema>;
/** A sysctl (kernel setting) resource. */
export type SysctlResource = v.InferOutput<typeof SysctlSchema>;
/** Any resource. */
export type Resource =
  | DirectoryResource
  | FileResource
  | PackageResource
  | ServiceResource
  | ContainerResource
  | ActionResource
  | OverlayResource
  | FirewallResource
  | SysctlResource;
/** The name of a resource type. */
export type ResourceType = Resource["type"];
