/**
 * The shape of declaration v1 (DESIGN.md §4), as valibot schemas. Shape only:
 * rules that need the host's configuration (managed roots, its own files,
 * conflicts between resources) live in parse.ts.
 */
import * as v from "valibot";
import { pathProblem } from "./paths.ts";

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

/** The one documented form of a mode: four octal digits, the first 0 (special bits are fields). */
export const MODE_FORM = /^0[0-7]{3}$/;

const mode = v.pipe(
  v.string('a mode is an octal string of four digits with a leading 0, such as "0644"'),
  v.check(
    (m) => MODE_FORM.test(m),
    (i) =>
      /^[1-7][0-7]{3}$/.test(i.input)
        ? `mode ${JSON.stringify(i.input)} sets special bits; write "0${
          i.input.slice(1)
        }" and name each bit as a field of its own (setuid: true, setgid: true, sticky: true)`
        : `mode ${
          JSON.stringify(i.input)
        } is not the documented form, an octal string of four digits with a leading 0; ` +
          `write it as "0644" or "0755"`,
  ),
);

/** The largest user or group id: 4294967295 is chown's "leave unchanged". */
export const MAX_ID = 4294967294;

const principal = (what: string) =>
  v.pipe(
    v.string(),
    v.regex(
      /^([a-z_][a-z0-9_.-]{0,31}\$?|[0-9]{1,10})$/,
      `${what} is a user/group name (e.g. "root") or a numeric id`,
    ),
    v.check(
      (p) => !/^[0-9]/.test(p) || Number(p) <= MAX_ID,
      `${what} as a numeric id is 0…${MAX_ID} (4294967295 means "leave unchanged" to chown)`,
    ),
  );

/** An opt-in special bit: true sets it; false or absent clears it. */
const specialBit = (what: string) =>
  v.optional(v.boolean(`${what} is true or false (absent: false, the bit is cleared)`));

/** What a command line, an env file or a spawned program cannot carry in one string. */
const lineSafe = (what: string) =>
  v.pipe(
    v.string(),
    v.check(
      (s) => !/[\0\n\r]/.test(s),
      (i) =>
        `${what} contains a ${
          i.input.includes("\0") ? "NUL" : "line break"
        }, which a program's arguments and environment cannot carry; remove it`,
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
  /** New entries take the directory's group (S_ISGID). */
  setgid: specialBit("setgid"),
  /** Only an entry's owner may remove or rename it (S_ISVTX). */
  sticky: specialBit("sticky"),
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
    /** The program runs as the file's owner (S_ISUID). */
    setuid: specialBit("setuid"),
    /** The program runs as the file's group (S_ISGID). */
    setgid: specialBit("setgid"),
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
  /**
   * "full": upgrade the whole machine (pacman -Syu, apk upgrade -U) before
   * installing it. Without it the host never refreshes pacman's sync database.
   */
  upgrade: v.optional(
    v.picklist(["full"], 'upgrade is "full" (upgrade the whole machine first) or absent'),
  ),
});

/** systemd's unit types: a name ending in one of them names a unit of that type. */
export const UNIT_TYPES: readonly string[] = [
  "service",
  "socket",
  "target",
  "device",
  "mount",
  "automount",
  "swap",
  "timer",
  "path",
  "slice",
  "scope",
];

/** The unit types a service resource may name: services and what starts them. */
export const SERVICE_UNIT_TYPES: readonly string[] = ["service", "socket", "timer", "path"];

/** The unit type a service name names: its suffix when that is a unit type, else "service". */
export function unitType(name: string): string {
  const suffix = name.slice(name.lastIndexOf(".") + 1);
  return name.includes(".") && UNIT_TYPES.includes(suffix) ? suffix : "service";
}

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
    v.check(
      (n) => SERVICE_UNIT_TYPES.includes(unitType(n)),
      (i) =>
        `"${i.input}" is a .${unitType(i.input)} unit; a service resource names a service ` +
        `(or its .socket, .timer or .path unit), never a target, mount, device, swap, slice or scope`,
    ),
  ),
  enabled: v.boolean(),
  running: v.boolean(),
});

/** A mount path: absolute, and nothing the runtime's `--mount a=b,c=d` syntax cannot carry. */
const mountPath = v.pipe(
  absolutePath,
  v.check(
    (p) => !/[,"]/.test(p),
    "holds a comma or a double quote, which the container runtime's --mount syntax cannot carry; " +
      "mount a directory whose path has neither",
  ),
);

const mount = v.strictObject({
  source: mountPath,
  target: mountPath,
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
  args: v.array(lineSafe("an argument")),
  env: v.record(
    v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "an env name is letters, digits and _")),
    lineSafe("an env value"),
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

/** The schema of each resource type, by its `type` (a Map: no name reaches Object.prototype). */
export const RESOURCE_SCHEMAS: ReadonlyMap<string, v.GenericSchema> = new Map<
  ResourceType,
  v.GenericSchema
>([
  ["directory", DirectorySchema],
  ["file", FileSchema],
  ["package", PackageSchema],
  ["service", ServiceSchema],
  ["container", ContainerSchema],
  ["action", ActionSchema],
]);

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
/** Any resource. */
export type Resource =
  | DirectoryResource
  | FileResource
  | PackageResource
  | ServiceResource
  | ContainerResource
  | ActionResource;
/** The name of a resource type. */
export type ResourceType = Resource["type"];
