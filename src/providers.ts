/**
 * The verbs the core needs from the operating system. Adapters under os/
 * implement them; the core never names an OS tool. An adapter answers and acts,
 * it never decides policy.
 */
import { HostError } from "./errors.ts";

/** What lstat tells about one path (never following a symlink). */
export interface PathInfo {
  kind: "file" | "directory" | "symlink" | "other";
  /** Permission bits, including setuid/setgid/sticky (mode & 0o7777). */
  mode: number;
  uid: number;
  gid: number;
  size: number;
  /** A regular file's identity (see {@link FileIdentity}), where the adapter can tell it. */
  identity?: FileIdentity;
}

/**
 * What tells a regular file's state without reading it: its device and inode, its size,
 * and its modification and change times (nanoseconds since the epoch, as precisely as the
 * adapter sees them: {@link FileSystem.ctimeStepNs}). Every change of the file's bytes,
 * mode or owner sets its change time to the kernel's clock, which no process can set
 * back, and a file put in its place has another inode: a file whose identity is the same
 * as when it was read has not changed since, if that read came after its last change
 * time's step (src/resources/file.ts says when an identity is trusted, and what it misses).
 */
export interface FileIdentity {
  dev: number;
  ino: number;
  size: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

/** Whether two identities are the same file in the same state. */
export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs &&
    a.ctimeNs === b.ctimeNs;
}

/** Ownership and permissions to give a path. */
export interface Attributes {
  mode: number;
  uid: number;
  gid: number;
}

/** What a read of a regular file found: its fstat and, unless skipped, its bytes. */
export interface FileRead {
  /**
   * fstat of the descriptor the bytes were read from (never a second look by name); its
   * `identity` was taken before the read, of the same inode, so any later change shows.
   */
  info: PathInfo;
  /** The content; `null` when the caller gave a size and the file's size differs. */
  data: Uint8Array | null;
}

/**
 * The file system, as the file and directory resources need it. The verbs take
 * paths, but an adapter acts inside directories it holds: it goes into the
 * directory a verb works in, proves it is the one at exactly that path with no
 * symlink from / down, and acts there by the last name alone, so a directory
 * above swapped for a symlink meanwhile changes nothing it does (DESIGN.md §18).
 * It never follows a symlink at the path it is given, never sets owner or mode by
 * name (only on a descriptor it opened), and never blocks on a FIFO. What it finds
 * at a path that is not the kind of thing the verb works on, a symlink or a
 * non-directory above it, or a name swapped while it worked, it refuses with
 * {@link UnsafePathError}; a missing directory above the path is NotFound.
 */
export interface FileSystem {
  /**
   * How coarse the change times of the identities this adapter gives are, in nanoseconds
   * (1 when exact); undefined when it gives none.
   */
  readonly ctimeStepNs?: bigint;
  /** lstat: `null` when nothing is at the path (or the directory above it is missing). */
  lstat(path: string): Promise<PathInfo | null>;
  /**
   * Read a regular file through one descriptor (opened without following a
   * symlink, without blocking); anything else is refused. With `size`, the
   * bytes are read only when the file has exactly that size.
   */
  readFile(path: string, size?: number): Promise<FileRead>;
  /**
   * Write a regular file atomically: a new temporary file in the same directory
   * (never opened through a symlink), data written, owner and mode set and data
   * synced on its descriptor, then `beforeRename()` (which may throw to abandon
   * the write), then, in the directory at that path (proven again), the temporary
   * name checked to still be the file written and renamed over the last name.
   * The temporary file never survives a failure, unless its directory was swapped
   * away meanwhile (then it is left where it was made).
   */
  writeFileAtomic(
    path: string,
    data: Uint8Array,
    attributes: Attributes,
    beforeRename?: () => Promise<void>,
  ): Promise<void>;
  /** Remove what an interrupted `writeFileAtomic(path, …)` may have left beside `path`. */
  discardPartialWrite(path: string): Promise<void>;
  /**
   * mkdir (not recursive, private at first), then owner and mode set on the new
   * directory's descriptor; fails (NotFound) if the parent is missing.
   */
  makeDirectory(path: string, attributes: Attributes): Promise<void>;
  /** Set owner and mode of an existing DIRECTORY, on its descriptor (never through a symlink). */
  setAttributes(path: string, attributes: Attributes): Promise<void>;
  /**
   * Remove a file (unlink; a directory there is refused) or an EMPTY directory
   * (rmdir: one with entries is `"not-empty"` and stays); never recursive, never
   * through a symlink. `"gone"` when nothing was there.
   */
  remove(path: string, kind: "file" | "directory"): Promise<Removal>;
  /** Whether a directory has no entries (what a removal would find; `plan` asks). */
  isEmptyDirectory(path: string): Promise<boolean>;
  /** fsync a directory so renames and creations in it are durable. */
  syncDirectory(path: string): Promise<void>;
  /** The numeric id of a user name on this machine, `undefined` when unknown. */
  userId(name: string): Promise<number | undefined>;
  /** The numeric id of a group name on this machine, `undefined` when unknown. */
  groupId(name: string): Promise<number | undefined>;
}

/** What {@link FileSystem.remove} did. */
export type Removal = "removed" | "not-empty" | "gone";

/**
 * A path the file system refused to work on: not the kind of thing the verb
 * works on (a symlink, a FIFO, a device), or swapped for something else while
 * the host worked on it. Nothing was done through it.
 */
export class UnsafePathError extends HostError {
  constructor(path: string, what: string, hint?: string) {
    super("fs.unsafe-path", `${path} ${what}`, { hint });
  }
}

/** An installed package, as the package database reports it. */
export interface InstalledPackage {
  name: string;
  /** Exactly as the package manager prints it (pacman "1.2-3", "1:2.0-1"; apk "1.2.3-r0"). */
  version: string;
  /**
   * Set when `version` is installed but takes effect only when the host is next started
   * (the tarball's own package: an upgrade staged for the launcher): why, for people.
   */
  pending?: string;
}

/** A package manager (pacman, apk). Installs; never uninstalls. */
export interface PackageManager {
  readonly name: string;
  /** Ask the package database; `null` when not installed. */
  installed(name: string): Promise<InstalledPackage | null>;
  /**
   * Install from the configured repositories, at exactly `version` when given
   * (falling back to a package file of that exact version in the adapter's
   * package-file directories). Throws {@link PackageNotFoundError} when no
   * repository or file offers it. With `file` (a package declared by digest), an
   * adapter that installs from files installs exactly that one (the tarball's);
   * pacman and apk ignore it.
   */
  install(name: string, version?: string, file?: PackageFile): Promise<void>;
  /**
   * Refresh the repositories' indexes alone (apk update), only where that is safe:
   * absent where it is not. On Arch `pacman -Sy` followed by `pacman -S` is a
   * partial upgrade (a new package built against libraries the machine does not
   * have yet), which Arch does not support; pacman offers no refresh.
   */
  refresh?: () => Promise<void>;
  /**
   * Refresh the indexes and upgrade every installed package to them (pacman -Syu,
   * apk upgrade --update-cache): what a package declared with `upgrade: "full"`
   * opts into before it is installed.
   */
  upgradeAll(): Promise<void>;
  /**
   * A version without this package manager's release suffix, as the launcher
   * records the host's own versions: "0.2.0-1" (pacman's pkgrel) or "0.2.0-r1"
   * (apk's -rN) → "0.2.0".
   */
  upstreamVersion(version: string): string;
}

/**
 * The package file a declaration names by digest (content by reference, DESIGN.md §19):
 * the host's own tarball on a tarball installation. pacman and apk install from their
 * repositories and never ask for it; the tarball adapter installs exactly these bytes
 * and checks them against `sha256` and `size` itself before it unpacks anything.
 */
export interface PackageFile {
  /** SHA-256 (lowercase hex) of the file. */
  sha256: string;
  size: number;
  /** The bytes, from the host's content sources (verified by them, verified again by the adapter). */
  bytes(): Promise<Uint8Array>;
}

/** No repository (or package file) offers the package, or not at that version. */
export class PackageNotFoundError extends HostError {
  constructor(what: string, hint?: string) {
    super("package.not-found", what, { hint });
  }
}

/** What the service manager says about one service. */
export interface ServiceState {
  /** Whether a unit/script of this name exists at all. */
  exists: boolean;
  enabled: boolean;
  running: boolean;
  /** The service manager holds an older definition than the one on disk (systemd). */
  reloadNeeded: boolean;
  /**
   * Which running instance this is, so a restart can be proven: systemd's
   * InvocationID, OpenRC's "pid N" of the supervised or pidfile'd daemon. `null`
   * when not running, or when the manager offers no identity for it.
   */
  process: string | null;
  /** The manager's own words for the state, for messages (e.g. "disabled, inactive"). */
  detail: string;
}

/**
 * An init system's service manager (systemd, OpenRC). Every verb refuses the
 * host's own service (the installation owns it, never a declaration).
 */
export interface ServiceManager {
  readonly name: string;
  state(name: string): Promise<ServiceState>;
  enable(name: string): Promise<void>;
  disable(name: string): Promise<void>;
  start(name: string): Promise<void>;
  stop(name: string): Promise<void>;
  /** Make the manager read definitions changed on disk (systemd daemon-reload; else nothing). */
  reload(name: string): Promise<void>;
  /** Stop and start the running service: a new process (read back with `state().process`). */
  restart(name: string): Promise<void>;
  /** Ask the running service to re-read its configuration, keeping its process. */
  reloadService(name: string): Promise<void>;
}

/** What the runtime reports about one container. */
export interface ContainerInfo {
  name: string;
  /** The image reference it was created from, as the runtime reports it. */
  image: string;
  running: boolean;
  /** The runtime's own word for its state ("running", "exited", "created" …). */
  status: string;
  labels: Record<string, string>;
  /** When its current run started, as the runtime reports it ("" when never started). */
  startedAt: string;
}

/** What the host asks the runtime to create. */
export interface ContainerSpec {
  name: string;
  image: string;
  args: string[];
  env: Record<string, string>;
  mounts: { source: string; target: string; readOnly?: boolean }[];
  restart: "no" | "always" | "on-failure" | "unless-stopped";
  labels: Record<string, string>;
}

/** A container runtime (podman, docker). */
export interface ContainerRuntime {
  readonly name: string;
  /** `null` when no container has this name. */
  inspect(name: string): Promise<ContainerInfo | null>;
  /** Create (with the spec's labels) and start. */
  create(spec: ContainerSpec): Promise<void>;
  /** Start an existing, stopped container. */
  start(name: string): Promise<void>;
  /** Stop and start a running container (a new run: read back with `inspect().startedAt`). */
  restart(name: string): Promise<void>;
  /** Stop and remove (forcefully). */
  remove(name: string): Promise<void>;
}

/** The outcome of running a program. */
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the programs of `action` resources (the bundle only): an argv, never a shell. */
export interface CommandRunner {
  run(argv: readonly string[]): Promise<CommandResult>;
}

/** The adapters available on this machine. A missing one means "no provider here". */
export interface Providers {
  fs: FileSystem;
  packages?: PackageManager;
  services?: ServiceManager;
  containers?: ContainerRuntime;
  commands?: CommandRunner;
  /** WireGuard (only when the profile proved it working). */
  overlay?: OverlayNetwork;
  /** nftables (only when the profile proved it working). */
  firewall?: Firewall;
  /** Kernel settings. */
  sysctl?: KernelSettings;
}

/** One WireGuard peer, as declared or as the device reports it. */
export interface OverlayPeer {
  /** base64 of 32 bytes. */
  publicKey: string;
  /** "address:port" (the device reports the address it last used). */
  endpoint?: string;
  /** CIDRs, as given (the kind normalises them before comparing). */
  allowedIps: string[];
  /** Seconds; absent or 0 means off. */
  persistentKeepalive?: number;
}

/** What `ip` says about a network link. */
export interface OverlayLink {
  /** The kernel's kind of link ("wireguard", "tun" for wireguard-go, "veth" …; "" when none). */
  kind: string;
  /** The link's alias (`ip link set … alias`), where the host puts its marker. */
  alias?: string;
  up: boolean;
  mtu: number;
  /** Global addresses as CIDRs ("10.60.0.7/24"); link-local ones left out. */
  addresses: string[];
}

/** What `wg show IF dump` says about a WireGuard device. */
export interface OverlayDevice {
  publicKey: string;
  listenPort: number;
  peers: OverlayPeer[];
}

/** What the host asks a WireGuard device to hold (the whole peer set; others are removed). */
export interface OverlayConfig {
  /** A file holding the base64 private key (read by the tool, never sent anywhere). */
  privateKeyFile: string;
  listenPort?: number;
  peers: OverlayPeer[];
  /** Public keys of peers the device holds that are not declared. */
  removePeers: string[];
}

/** WireGuard interfaces: made in the kernel, or by the userspace wireguard-go. */
export interface OverlayNetwork {
  /** "kernel" or "userspace": how interfaces are made here. */
  readonly mode: "kernel" | "userspace";
  /** The link of that name, or `null` when there is none. */
  link(name: string): Promise<OverlayLink | null>;
  /** The WireGuard side of the link, or `null` when it is not a WireGuard device. */
  device(name: string): Promise<OverlayDevice | null>;
  /** Make a WireGuard interface carrying `alias` (the host's marker). */
  create(name: string, alias: string): Promise<void>;
  /** Delete the interface. */
  remove(name: string): Promise<void>;
  /** Key, port and exactly these peers. */
  configure(name: string, config: OverlayConfig): Promise<void>;
  /** Add and delete addresses (CIDRs). */
  setAddresses(name: string, add: string[], remove: string[]): Promise<void>;
  /** MTU (when given) and up. */
  setLink(name: string, settings: { mtu?: number; up: true }): Promise<void>;
}

/** A syntax check of a table's rules failed: where and what nft said. */
export interface RulesProblem {
  /** 1-based line of the declared rules text (0 when nft named no line of it). */
  line: number;
  message: string;
}

/** What the kernel holds for one nftables table. */
export interface FirewallTable {
  /** The table's comment (the host's marker), when it has one. */
  comment?: string;
  /** The kernel's JSON form of the table, handles and counter values dropped, canonical. */
  ruleset: string;
}

/** nftables: one table at a time, replaced whole. */
export interface Firewall {
  readonly name: string;
  /** Syntax-check `rules` as the body of the table (`nft -c`); changes nothing. */
  checkRules(family: string, table: string, rules: string): Promise<RulesProblem | null>;
  /** The table as the kernel holds it, or `null` when there is none. */
  read(family: string, table: string): Promise<FirewallTable | null>;
  /** Replace the table (created when missing) by `rules`, with `comment`, in ONE transaction. */
  replace(family: string, table: string, rules: string, comment: string): Promise<void>;
  /** Delete the table. */
  remove(family: string, table: string): Promise<void>;
}

/** Kernel settings (sysctl). */
export interface KernelSettings {
  /** The value as the kernel gives it, or `null` when the key does not exist. */
  read(key: string): Promise<string | null>;
  write(key: string, value: string): Promise<void>;
}
