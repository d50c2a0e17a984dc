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
 * The file system, as the file and directory resources need it (DESIGN.md §18). A path
 * is as safe as the least safe directory above it: an adapter acts as root only where
 * every directory from / down to the one holding the path is one only root can change;
 * below a directory one other user alone can change, it acts with that user's
 * privileges (and refuses, before doing anything, what that user could not do: a file
 * owned by root there, a group the user is not in: {@link AsOwnerError}); anywhere
 * else it refuses. It never follows a symlink at the path it is given, never sets
 * owner or mode by name (only on a descriptor it opened), and never blocks on a FIFO.
 * What it finds at a path that is not the kind of thing the verb works on, a symlink
 * or a non-directory above it, a directory above it that several users can change, or
 * a name swapped while it worked, it refuses with {@link UnsafePathError}; a missing
 * directory above the path is NotFound.
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
   * the write), then the temporary name checked to still be the file written and
   * renamed over the last name. Where the adapter acts as another user it awaits
   * `beforeRename()` first and then writes the whole file (so it never holds that
   * user's process while another write waits for its turn). The temporary file
   * never survives a failure, unless its directory was swapped away meanwhile
   * (then it is left where it was made). With `deferSync`, the caller promises that
   * `beforeRename()` resolves only after a {@link FileSystem.syncWrites} that began once
   * this file was written: the adapter then leaves the data's sync to that one pass
   * (it still syncs the file itself before the rename when no such pass covered it).
   */
  writeFileAtomic(
    path: string,
    data: Uint8Array,
    attributes: Attributes,
    beforeRename?: () => Promise<void>,
    options?: { deferSync?: boolean },
  ): Promise<void>;
  /**
   * Make the data of every file written with `deferSync` and not yet renamed durable, all
   * at once: one sync of each file system they are on, where the adapter can; else each
   * one's own. Its writes await it (through their `beforeRename`) before renaming.
   */
  syncWrites?(): Promise<void>;
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
  /**
   * Who the adapter acts as for `path`: root (uid and gid 0), or the user who alone can
   * change a directory above it (that user's uid and primary group). A writer that picks
   * no owner of its own (the metrics file) gives the file to this one.
   */
  actsAs?(path: string): Promise<{ uid: number; gid: number }>;
  /**
   * End what the adapter started for the pass that ends now (the processes acting as
   * owners) and forget what it learnt in it; the next verb starts afresh. The engine calls
   * it at the end of every apply and plan.
   */
  release?(): Promise<void>;
}

/** What {@link FileSystem.remove} did. */
export type Removal = "removed" | "not-empty" | "gone";

/**
 * A path the file system refused to work on: not the kind of thing the verb
 * works on (a symlink, a FIFO, a device), or swapped for something else while
 * the host worked on it. Nothing was done through it.
 */
export class UnsafePathError extends HostError {
  /** The path refused, and what about it (the message is the two, then the hint). */
  readonly path: string;
  readonly what: string;

  constructor(path: string, what: string, hint?: string) {
    super("fs.unsafe-path", `${path} ${what}`, { hint });
    this.path = path;
    this.what = what;
  }
}

/**
 * An act refused before anything was done: the path lies below a directory that one user
 * alone can change, so the host acts there as that user, who cannot do what was asked
 * (own a file as root or as another user, give it a group the user is not in).
 */
export class AsOwnerError extends HostError {
  constructor(path: string, what: string, hint: string) {
    super("fs.as-owner", `${path}: ${what}`, { hint });
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
  /** Users and groups (shadow's or busybox's tools). */
  accounts?: AccountTools;
  /** Mounts, and where the init keeps them for the next boot (only when the init answered). */
  mounts?: MountTable;
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

/** Where the account databases an {@link AccountTools} changes live (read back by the fs adapter). */
export interface AccountFiles {
  passwd: string;
  group: string;
  shadow: string;
}

/** A group to add. */
export interface NewGroup {
  name: string;
  /** Absent: the tool allocates one (in its system range when `system`). */
  gid?: number;
  system: boolean;
}

/** A user to add: never a home directory made, never a password set (created locked). */
export interface NewUser {
  name: string;
  /** Absent: the tool allocates one (in its system range when `system`). */
  uid?: number;
  /** The primary group, by name (it exists). */
  group: string;
  /** Supplementary groups, by name (they exist). */
  groups: readonly string[];
  home?: string;
  shell?: string;
  system: boolean;
}

/** What to change of an existing user (only what is given). */
export interface UserChange {
  group?: string;
  home?: string;
  shell?: string;
  /** The exact supplementary groups. */
  groups?: { add: readonly string[]; remove: readonly string[]; all: readonly string[] };
}

/**
 * The system's account tools (shadow's useradd & co., busybox's adduser & co.): verbs only.
 * They never create or delete a home directory, never set a password, never change an
 * existing id, and removing a user never removes a group (a group of the user's name that
 * the tool drops with it is added back, with its id and members). What they did is read
 * back by the kind from {@link AccountTools.files}, never taken from an exit code.
 */
export interface AccountTools {
  readonly name: string;
  readonly files: AccountFiles;
  addGroup(group: NewGroup): Promise<void>;
  removeGroup(name: string): Promise<void>;
  addUser(user: NewUser): Promise<void>;
  modifyUser(name: string, change: UserChange): Promise<void>;
  /** Lock the user's password (a "!" before it). */
  lockUser(name: string): Promise<void>;
  removeUser(name: string): Promise<void>;
}

/** One mount, as the kernel's mount table says it (a line of /proc/self/mountinfo). */
export interface MountEntry {
  /** The mount's id, and the id of the mount it lies on. */
  id: number;
  parent: number;
  /** The filesystem's device number, "major:minor": the same for every mount of one filesystem. */
  device: string;
  /** The directory of the filesystem this mount shows ("/", or a bind's source within it). */
  root: string;
  /** Where it is mounted. */
  target: string;
  /** Per-mount options: ro or rw, nosuid, nodev, noexec, the atime ones. */
  options: string[];
  /** The optional fields (propagation: shared:N, master:N, unbindable …). */
  optional: string[];
  fstype: string;
  /** The source as the kernel was given it (a device, "tmpfs" …). */
  source: string;
  /** The filesystem's own options (the superblock's ro or rw, size= …). */
  superOptions: string[];
}

/** A mount as the host asks for it (and as its boot record holds it). */
export interface MountRequest {
  /** A device ("/dev/…", "UUID=…", "LABEL=…"), a tmpfs's name, or a bind's source directory. */
  source: string;
  target: string;
  /** A filesystem type ("ext4", "tmpfs" …), or "bind". */
  fstype: string;
  /**
   * Every per-mount flag, said both ways: "ro" or "rw", "nosuid" or "suid", "nodev" or
   * "dev", "noexec" or "exec", then any atime word declared ("noatime" …). Complete, so
   * that neither the tool nor a remount keeps a flag from before.
   */
  flags: string[];
  /** Options for the filesystem itself ("size=64m" …); none for a bind. */
  data: string[];
}

/** Where the boot record of one mount stands (the systemd unit, the OpenRC script). */
export interface BootRecord {
  /** absent; the host's and holding exactly the request, and enabled; the host's but not that; someone else's. */
  state: "absent" | "current" | "stale" | "foreign";
  /** The file it is (or would be), for messages. */
  path: string;
}

/**
 * Mounts: made and undone with mount and umount (util-linux, or busybox), read from the
 * kernel's mount table, and kept for the next boot in the init's own way (a systemd
 * .mount unit, an OpenRC script in the boot runlevel), carrying the host's marker. Boot
 * records are written through `fs`, the host's file system provider (held directories).
 */
export interface MountTable {
  /** The init whose boot records it writes ("systemd", "openrc"). */
  readonly name: string;
  /** Every mount of the host's mount namespace, in the kernel's order. */
  mounts(): Promise<MountEntry[]>;
  /** The device a "UUID=…" or "LABEL=…" names on this machine (findfs); `null` when none. */
  findDevice(tag: string): Promise<string | null>;
  /** Mount (a bind: bound, then its flags set by a remount). */
  mount(request: MountRequest): Promise<void>;
  /** Set the flags and filesystem options of the mount at `request.target` again. */
  remount(request: MountRequest): Promise<void>;
  /** Unmount the topmost mount at `target` (never lazily, never forced). */
  unmount(target: string): Promise<void>;
  /** Where the boot record for `request.target` stands. */
  bootRecord(fs: FileSystem, request: MountRequest): Promise<BootRecord>;
  /** Write the boot record for `request` and enable it (refuses one that is not the host's). */
  writeBootRecord(fs: FileSystem, request: MountRequest): Promise<void>;
  /**
   * Disable and remove the host's boot record for `target`: "removed", or what was there
   * instead ("absent"; "foreign", someone else's, left as it is).
   */
  removeBootRecord(fs: FileSystem, target: string): Promise<"removed" | "absent" | "foreign">;
}
