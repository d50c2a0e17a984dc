import { join } from "node:path";
import { ensureBase, type Flavour, type MachineArch } from "./base.ts";
import { Broker, type BrokerOptions } from "./lab_broker.ts";
import { BrokerCluster, type ClusterOptions } from "./cluster.ts";
import { LabError } from "./errors.ts";
import { DENO_BINARY, type HostFrom, Machine, MACHINE_DENO, type PlacedFile } from "./machine.ts";
import { ALPINE_FILES, installHost } from "./host.ts";
import {
  hostAlpineFiles,
  type HostBuild,
  hostDeb,
  hostPackage,
  hostTarball,
} from "./host_builds.ts";
import { APT_ADDRESS, APT_HOST, LabSwitch, SITE_PREFIX, SUBNET_PREFIX } from "./net.ts";
import { ensureTestDebs, signedAptRepo } from "./apt_repo.ts";
import { bundle, PROBE_FLAGS } from "./bundle.ts";
import { addToRepo, copyRepo, ensureRepo } from "./repo.ts";

/** What to raise. */
export interface MachineSpec {
  /** Host name inside the lab: lowercase letters, digits and "-", at most 20 characters. */
  name: string;
  flavour: Flavour;
  /** Plug the machine into the lab switch (default true). */
  network?: boolean;
  /**
   * Plug it into the site's switch instead (10.251.0.x): it reaches the cluster only
   * through the site's leaf server (lab.cluster().startLeaf).
   */
  site?: boolean;
  /** Files placed in the machine's root before it boots. */
  files?: Record<string, PlacedFile>;
  /** Seconds to wait for boot (default 90). */
  bootTimeoutS?: number;
  /**
   * systemd machines: boot with a cgroup2-only hierarchy (SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1)
   * so podman (runc) can create containers inside; v1 controllers are read-only in nspawn.
   */
  containers?: boolean;
  /**
   * How the host comes onto this machine (lab.installHost, the scenarios' steps): ("deb")
   * its Debian package from the lab's apt repository, ("pacman") the Arch package from
   * /lab/repo, ("tarball") the tarball in /lab/tarball, or ("alpine-files") the files the
   * Alpine package installs, bound read-only at /lab-alpine (copied into the root by
   * lab.installHost). A native systemd machine is Debian as a Debian user has it (lib/base.ts
   * DEBIAN_RECIPE: apt its package manager, apt's only source the lab repository, served in
   * the lab network; no pacman) unless it is raised with "pacman": then it is the Arch-like
   * machine (lib/base.ts RECIPES.systemd: Debian with pacman standing in for Arch), the only
   * way this lab has to run the Arch package. Default: "deb" on systemd machines, the tarball
   * on the others.
   */
  hostFrom?: HostFrom;
  /**
   * false: the machine's root has no glibc at all, only Debian's busybox-static and musl's
   * loader (a plain machine, with `deno: false`; lib/base.ts noGlibcRecipe). Default true.
   */
  glibc?: boolean;
  /**
   * Bind this host's deno in at /usr/local/bin/deno for the lab's own clients (probes;
   * default true). false: the machine has no deno anywhere (the tarball floor).
   */
  deno?: boolean;
  /**
   * "aarch64": an arm64 Debian machine whose programs run under QEMU's user-mode emulation
   * (binfmt_misc; lib/base.ts ARM64_RECIPES); it gets the aarch64 tarball at
   * /lab/tarball-aarch64 and never the lab repository (default "native").
   */
  arch?: MachineArch;
}

/** The static busybox (Debian's busybox-static) whose httpd serves the apt repository. */
const BUSYBOX = "/bin/busybox";

/** Seconds an emulated machine may take to boot (its systemd runs under QEMU). */
const EMULATED_BOOT_TIMEOUT_S = 300;

/** Verdict of {@link Lab.probeBroker}. */
export interface ProbeResult {
  ok: boolean;
  /** Why it failed (from the client), when not ok. */
  error?: string;
  /** Milliseconds the probe took. */
  ms?: number;
}

/** Options of {@link Lab.start}. */
export interface LabOptions {
  /** Prefix of every namespace, cgroup and interface (default "noxlab"; tests use "noxlt"). */
  prefix?: string;
  /** Leave machines, broker and files in place on stop (for inspection). */
  keep?: boolean;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

/**
 * Where a lab machine's network service is told to fail at boot (the machine's own file:
 * scenario offline-boot writes it, then reboots).
 */
export const NET_FAILS_MARK = "/etc/lab-net-fails";

/**
 * OpenRC machines: a service that provides "net" (as Alpine's networking does), so
 * services that use or need net are ordered after it. The lab configures the machine's
 * link from outside; the service fails, as a networking that cannot bring its interfaces
 * up does, while {@link NET_FAILS_MARK} exists.
 */
const OPENRC_NET: ReadonlyArray<readonly [string, PlacedFile]> = [
  ["/etc/init.d/lab-net", {
    mode: "0755",
    content: `#!/sbin/openrc-run
description="the lab machine's network (its link is set up from outside by the lab)"
depend() {
	provide net
}
start() {
	ebegin "lab network"
	if [ -e ${NET_FAILS_MARK} ]; then
		eend 1 "failed: ${NET_FAILS_MARK} says so"
		return 1
	fi
	eend 0
}
`,
  }],
  ["/etc/runlevels/boot/lab-net", { symlink: "/etc/init.d/lab-net" }],
];

/**
 * Emulated systemd machines: systemd's credentials (LoadCredential=, set up in a mount of
 * their own before the unit's program runs) fail under QEMU's user-mode emulation with
 * "Failed to set up credentials: Invalid argument" (status 243/CREDENTIALS), so the early
 * units that ask for optional credentials are told to ask for none; the lab passes none.
 */
const EMULATED_SYSTEMD: ReadonlyArray<readonly [string, PlacedFile]> = [
  "systemd-sysctl",
  "systemd-sysusers",
  "systemd-tmpfiles-setup",
  "systemd-tmpfiles-setup-dev",
  "systemd-tmpfiles-clean",
  "procps",
].map((unit) => [
  `/etc/systemd/system/${unit}.service.d/lab-no-credentials.conf`,
  "[Service]\nLoadCredential=\n",
]);

const live = new Set<Lab>();
let handlers: Array<[Deno.Signal, () => void]> = [];
let interrupted: Promise<void> | undefined;

/**
 * A lab: one switch namespace, optionally a broker, and machines. Everything it
 * creates is prefixed with its id and removed by {@link Lab.stop} (also on SIGINT/SIGTERM).
 */
export class Lab implements AsyncDisposable {
  /** Prefix + random suffix; every namespace, cgroup and veth starts with it. */
  readonly id: string;
  /** The lab's temp directory on the host (machines' overlays, broker state). */
  readonly dir: string;
  /** Mounted read-only at /lab in every machine (bundles, CA, pacman repo under repo/). */
  readonly shareDir: string;
  readonly keep: boolean;
  readonly log: (line: string) => void;
  readonly net: LabSwitch;
  readonly machines: Map<string, Machine> = new Map();
  private brokerInstance: Broker | undefined;
  private clusterInstance: BrokerCluster | undefined;
  private probeBundled: Promise<void> | undefined;
  private repoCopied: Promise<void> | undefined;
  private tarballCopied: Promise<void> | undefined;
  private aarch64Copied: Promise<void> | undefined;
  private readonly published = new Map<string, Promise<void>>();
  private aptServed: Promise<void> | undefined;
  private aptServer: Deno.ChildProcess | undefined;
  private readonly aptDebs: string[] = [];
  private repoChange: Promise<unknown> = Promise.resolve();
  private readonly pending = new Set<Promise<Machine>>();
  private nextAddress = 10;
  private nextSiteAddress = 10;
  private siteSwitch: Promise<LabSwitch> | undefined;
  /** What steps started that must stop before the broker does (teardown runs them first). */
  private readonly atTeardown: (() => Promise<void>)[] = [];
  private stopped: Promise<void> | undefined;

  private constructor(id: string, dir: string, net: LabSwitch, options: LabOptions) {
    this.id = id;
    this.dir = dir;
    this.shareDir = join(dir, "share");
    this.net = net;
    this.keep = options.keep ?? false;
    this.log = options.log ?? (() => {});
  }

  /** Creates the lab switch. Call `stop()` (or `await using`) to tear everything down. */
  static async start(options: LabOptions = {}): Promise<Lab> {
    const prefix = options.prefix ?? "noxlab";
    if (!/^[a-z][a-z0-9]{1,7}$/.test(prefix)) {
      throw new LabError("usage", `lab prefix "${prefix}" must be 2-8 lowercase letters/digits`);
    }
    if (Deno.uid() !== 0) {
      throw new LabError("usage", "the lab needs root (namespaces, mounts, cgroups); run as root");
    }
    const id = prefix + crypto.randomUUID().slice(0, 4);
    const dir = join("/tmp", id);
    await Deno.mkdir(join(dir, "share"), { recursive: true, mode: 0o755 });
    await Deno.writeTextFile(join(dir, "owner"), `${Deno.pid}\n`);
    let net: LabSwitch;
    try {
      net = await LabSwitch.create(id);
    } catch (error) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      throw error;
    }
    const lab = new Lab(id, dir, net, options);
    live.add(lab);
    if (handlers.length === 0) installSignalHandlers();
    return lab;
  }

  /** Raises a machine and waits until it has booted. */
  raise(spec: MachineSpec): Promise<Machine> {
    if (this.stopped) {
      return Promise.reject(new LabError("usage", `lab ${this.id} is stopping; cannot raise`));
    }
    const raising = this.raiseNow(spec);
    this.pending.add(raising);
    const forget = () => this.pending.delete(raising);
    raising.then(forget, forget);
    return raising;
  }

  private async raiseNow(spec: MachineSpec): Promise<Machine> {
    if (!/^[a-z][a-z0-9-]{0,19}$/.test(spec.name)) {
      throw new LabError("usage", `machine name "${spec.name}": use [a-z][a-z0-9-], ≤ 20 chars`);
    }
    if (this.machines.has(spec.name)) {
      throw new LabError("usage", `machine ${spec.name} already exists in lab ${this.id}`);
    }
    const arch = spec.arch ?? "native";
    if (spec.glibc === false && spec.deno !== false) {
      throw new LabError("usage", `machine ${spec.name}: with no glibc, deno must be false too`);
    }
    const hostFrom: HostFrom = arch === "aarch64"
      ? "tarball"
      : spec.hostFrom ?? (spec.flavour === "systemd" ? "deb" : "tarball");
    if ((hostFrom === "deb" || hostFrom === "pacman") && spec.flavour !== "systemd") {
      throw new LabError(
        "usage",
        `machine ${spec.name}: hostFrom "${hostFrom}" is a systemd machine's (an ${spec.flavour} ` +
          'machine gets the tarball or "alpine-files")',
      );
    }
    // A native systemd machine is Debian unless it stands in for Arch (the Arch package).
    const debian = spec.flavour === "systemd" && arch === "native" && hostFrom !== "pacman";
    const base = await ensureBase(spec.flavour, this.log, arch, {
      glibc: spec.glibc ?? true,
      debian,
    });
    if (base.built) this.log(`base ${base.key} built in ${(base.buildMs / 1000).toFixed(1)} s`);
    if (hostFrom === "deb") {
      await this.aptRepo();
    } else if (hostFrom === "pacman") {
      this.repoCopied ??= this.copyRepo();
      await this.repoCopied;
    }
    if (arch === "aarch64") {
      this.aarch64Copied ??= this.copyTarball("current", "aarch64");
      await this.aarch64Copied;
    } else if (hostFrom === "tarball") {
      await this.publishTarball("current");
    }
    const alpineFiles = hostFrom === "alpine-files" ? await hostAlpineFiles(this.log) : undefined;
    const netns = `${this.id}-${spec.name}`;
    const sw = spec.site ? await this.site() : this.net;
    const address = spec.site
      ? `${SITE_PREFIX}.${this.nextSiteAddress++}`
      : `${SUBNET_PREFIX}.${this.nextAddress++}`;
    const port = spec.network === false
      ? (await this.net.addNetns(netns), undefined)
      : await sw.attach(netns, address);
    const hosts = [
      "127.0.0.1 localhost",
      `${port ? address : "127.0.1.1"} ${spec.name}`,
      `${SUBNET_PREFIX}.2 broker.lab broker`,
      `${APT_ADDRESS} ${APT_HOST}`,
      "",
    ].join("\n");
    try {
      const machine = await Machine.start({
        name: spec.name,
        flavour: spec.flavour,
        unitName: netns,
        netns,
        port,
        dir: join(this.dir, "machines", spec.name),
        lower: base.rootfs,
        // The tarball carries its own runtime; the Arch package pulls the repository's deno.
        binds: [
          ...(spec.deno === false ? [] : [[DENO_BINARY, MACHINE_DENO] as const]),
          [this.shareDir, "/lab"],
          ...(alpineFiles ? [[alpineFiles, ALPINE_FILES] as const] : []),
        ],
        hostFrom,
        preload: [
          ["/etc/hostname", `${spec.name}\n`],
          ["/etc/hosts", hosts],
          ...(spec.flavour === "openrc" ? OPENRC_NET : []),
          ...(spec.flavour === "systemd" && arch === "aarch64" ? EMULATED_SYSTEMD : []),
          ...Object.entries(spec.files ?? {}),
        ],
        bootTimeoutMs: (spec.bootTimeoutS ?? (arch === "aarch64" ? EMULATED_BOOT_TIMEOUT_S : 90)) *
          1000,
        unifiedCgroup: spec.containers === true && spec.flavour === "systemd",
        emulated: arch === "aarch64" && Deno.build.arch !== "aarch64",
      });
      this.machines.set(spec.name, machine);
      return machine;
    } catch (error) {
      await sw.removeNetns(netns).catch(() => {});
      throw error;
    }
  }

  /**
   * The site's switch (created on first use): a second bridge in its own namespace for
   * the "site" network (10.251.0.0/24), joined to the lab network only by a leaf server.
   */
  site(): Promise<LabSwitch> {
    this.siteSwitch ??= LabSwitch.create(`${this.id}s`);
    return this.siteSwitch;
  }

  /** Starts the lab's NATS broker (once; later calls return the same broker). */
  async broker(options: BrokerOptions = {}): Promise<Broker> {
    if (!this.brokerInstance) {
      this.brokerInstance = await Broker.start(this, options);
      await Deno.writeTextFile(join(this.shareDir, "broker-ca.pem"), this.brokerInstance.caPem);
    }
    return this.brokerInstance;
  }

  /**
   * Connects to the broker with a real NATS client over TLS (lab CA trusted, server
   * certificate pinned) from inside a machine, or from the broker's own namespace,
   * and round-trips one message.
   */
  async probeBroker(from: Machine | "broker", timeoutMs = 20_000): Promise<ProbeResult> {
    const broker = await this.broker();
    const probe = join(this.shareDir, "nats-probe.js");
    this.probeBundled ??= bundle("lab/lib/clients/nats_probe.ts", probe);
    await this.probeBundled;
    const result = from === "broker"
      ? await broker.exec(
        [
          "deno",
          "run",
          ...PROBE_FLAGS,
          probe,
          broker.addressUrl,
          join(broker.dir, "ca.pem"),
          broker.fingerprint256,
        ],
        { timeoutMs },
      )
      : await from.exec(
        [
          MACHINE_DENO,
          "run",
          ...PROBE_FLAGS,
          "/lab/nats-probe.js",
          broker.url,
          "/lab/broker-ca.pem",
          broker.fingerprint256,
        ],
        { timeoutMs },
      );
    try {
      return JSON.parse(result.stdout.trim().split("\n").pop() ?? "");
    } catch {
      return {
        ok: false,
        error: `probe exit ${result.code}: ${(result.stderr || result.stdout).trim()}`,
      };
    }
  }

  /**
   * Installs the host from its real package (built from this checkout by packaging/):
   * `apt-get install nox-mesh-host` on Debian machines, `pacman -S nox-mesh-host` on the
   * Arch-like ones, the tarball on the others. It then runs under its OS's permission set
   * (packaging/<os>/permissions); nothing is started.
   */
  async installHost(machine: Machine): Promise<void> {
    await installHost(machine);
  }

  /**
   * Adds a build of the host (lab/lib/host_builds.ts) to this lab's pacman repository,
   * /lab/repo, or (`apt`) to its apt repository, so that machines can install or upgrade to
   * it (once per lab, build and kind).
   */
  publishHost(which: HostBuild, kind: "pacman" | "apt" = "pacman"): Promise<void> {
    let done = this.published.get(`${kind}/${which}`);
    if (!done) {
      done = kind === "apt"
        ? (async () => {
          await this.aptRepo();
          if (which !== "current") await this.addDeb(await hostDeb(which, this.log));
        })()
        : (async () => {
          this.repoCopied ??= this.copyRepo();
          await this.repoCopied;
          if (which !== "current") await this.addHostPackage(which); // the copy holds current
        })();
      this.published.set(`${kind}/${which}`, done);
    }
    return done;
  }

  /** Where the lab's apt repository lies on this host (served at http://apt.lab/). */
  get aptDir(): string {
    return join(this.dir, "apt");
  }

  /**
   * The lab's apt repository (once): the test packages and the host's current .deb, signed
   * with the lab key (lib/apt_repo.ts), served over HTTP by busybox's httpd in a namespace
   * of its own on the lab switch at APT_ADDRESS (apt.lab in every machine's /etc/hosts).
   */
  aptRepo(): Promise<void> {
    this.aptServed ??= (async () => {
      this.aptDebs.push(...await ensureTestDebs(this.log), await hostDeb("current", this.log));
      await signedAptRepo(this.aptDir, this.aptDebs);
      const netns = `${this.id}-apt`;
      await this.net.attach(netns, APT_ADDRESS);
      this.aptServer = new Deno.Command("/usr/sbin/ip", {
        args: [
          "netns",
          "exec",
          netns,
          BUSYBOX,
          "httpd",
          "-f",
          "-p",
          `${APT_ADDRESS}:80`,
          "-h",
          this.aptDir,
        ],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
    })();
    return this.aptServed;
  }

  /** Adds a package to the apt repository and signs its indexes again (one change at a time). */
  private async addDeb(deb: string): Promise<void> {
    const change = this.repoChange.then(async () => {
      this.aptDebs.push(deb);
      await signedAptRepo(this.aptDir, [deb]);
    });
    this.repoChange = change.catch(() => {});
    await change;
  }

  /**
   * Starts the lab's NATS cluster (once; later calls return the same cluster): three
   * servers, each in its own namespace on the lab switch, routes between them, JetStream
   * clustered. The lab CA goes to /lab/broker-ca.pem as for the single broker.
   */
  async cluster(options: ClusterOptions = {}): Promise<BrokerCluster> {
    if (!this.clusterInstance) {
      this.clusterInstance = await BrokerCluster.start(this, options);
      await Deno.writeTextFile(join(this.shareDir, "broker-ca.pem"), this.clusterInstance.caPem);
    }
    return this.clusterInstance;
  }

  /** The cluster if it was started. */
  get runningCluster(): BrokerCluster | undefined {
    return this.clusterInstance;
  }

  /** The broker if it was started. */
  get runningBroker(): Broker | undefined {
    return this.brokerInstance;
  }

  /** Cuts a machine's link to the switch (the machine keeps its address). */
  cutLink(machine: Machine): Promise<void> {
    return machine.cutLink();
  }

  /** Restores a cut link. */
  restoreLink(machine: Machine): Promise<void> {
    return machine.restoreLink();
  }

  /** Stops one machine and removes its namespace. */
  async stopMachine(machine: Machine): Promise<void> {
    await machine.stop();
    this.machines.delete(machine.name);
    await this.net.removeNetns(machine.netns);
  }

  /**
   * Stop `stop` at teardown, before the machines and the broker (a service a step started
   * in the broker's namespace, say); a failure is reported with the rest.
   */
  onTeardown(stop: () => Promise<void>): void {
    this.atTeardown.push(stop);
  }

  /** True once `stop()` was called (e.g. by SIGINT). */
  get stopping(): boolean {
    return this.stopped !== undefined;
  }

  /** Tears everything down (unless `keep`): machines, broker, namespaces, files. */
  stop(): Promise<void> {
    this.stopped ??= this.teardown();
    return this.stopped;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  private async teardown(): Promise<void> {
    try {
      await this.teardownNow();
    } finally {
      // Only now: a second Ctrl-C during teardown must find the handler and wait for it.
      live.delete(this);
      if (live.size === 0 && !interrupted) removeSignalHandlers();
    }
  }

  private async teardownNow(): Promise<void> {
    if (this.keep) {
      this.log(`--keep: lab ${this.id} left up (files in ${this.dir}); enter a machine with:`);
      for (const m of this.machines.values()) {
        this.log(`  ${m.name} (${m.flavour}): nsenter -t ${m.leader} -a /bin/sh`);
      }
      if (this.brokerInstance) {
        this.log(`  broker: nsenter --net=/run/netns/${this.brokerInstance.netns} …`);
      }
      for (
        const s of [...this.clusterInstance?.servers ?? [], ...this.clusterInstance?.leaves ?? []]
      ) {
        this.log(`  ${s.name}: nsenter --net=/run/netns/${s.netns} … (log ${s.logFile})`);
      }
      this.log("remove it all with: deno task lab --clean");
      return;
    }
    const problems: string[] = [];
    const note = (e: unknown) => problems.push(e instanceof Error ? e.message : String(e));
    await Promise.all(this.atTeardown.splice(0).map((stop) => stop().catch(note)));
    // A raise still in flight registers its machine when it finishes; wait for it.
    await Promise.allSettled([...this.pending]);
    await Promise.all([...this.machines.values()].map((m) => m.stop().catch(note)));
    this.machines.clear();
    if (this.aptServer) {
      try {
        this.aptServer.kill("SIGTERM");
      } catch { /* already gone */ }
      await this.aptServer.status;
    }
    await this.brokerInstance?.stop().catch(note);
    await this.clusterInstance?.stop().catch(note);
    await this.net.destroy().catch(note);
    if (this.siteSwitch) await (await this.siteSwitch).destroy().catch(note);
    await Deno.remove(this.dir, { recursive: true }).catch(note);
    if (problems.length) {
      throw new LabError("machine-failed", `teardown of ${this.id} left:\n${problems.join("\n")}`);
    }
  }

  /** The lab repository (noxlab-hello, deno) plus the host's current package. */
  private async copyRepo(): Promise<void> {
    await copyRepo(await ensureRepo(this.log), join(this.shareDir, "repo"));
    await this.addHostPackage("current");
  }

  private async addHostPackage(which: HostBuild): Promise<void> {
    const file = await hostPackage(which, this.log);
    const target = join(this.shareDir, "repo", file.split("/").pop()!);
    // repo-add rewrites the database: one at a time.
    const change = this.repoChange.then(async () => {
      await Deno.copyFile(file, target);
      await Deno.copyFile(`${file}.sig`, `${target}.sig`);
      await addToRepo(join(this.shareDir, "repo"), [target]);
    });
    this.repoChange = change.catch(() => {});
    await change;
  }

  /**
   * Puts a build's tarball (with SHA256SUMS, its signature and the release key) into the
   * lab share: the current one at /lab/tarball (every tarball machine gets it), another
   * at /lab/tarball-<build>. Returns that directory as machines see it.
   */
  async publishTarball(which: HostBuild): Promise<string> {
    if (which === "current") {
      this.tarballCopied ??= this.copyTarball();
      await this.tarballCopied;
      return "/lab/tarball";
    }
    await this.copyTarball(which);
    return `/lab/tarball-${which}`;
  }

  /**
   * A build's tarball, SHA256SUMS, its minisign signature and public key, into the share
   * (the aarch64 build's at /lab/tarball-aarch64).
   */
  private async copyTarball(
    which: HostBuild = "current",
    arch: MachineArch = "native",
  ): Promise<void> {
    const tarball = await hostTarball(this.log, which, arch);
    const name = which === "current" ? "tarball" : `tarball-${which}`;
    const dir = join(this.shareDir, arch === "aarch64" ? `${name}-aarch64` : name);
    await Deno.mkdir(dir, { recursive: true });
    const from = tarball.slice(0, tarball.lastIndexOf("/"));
    const names = [tarball.split("/").pop()!, "SHA256SUMS", "SHA256SUMS.minisig", "minisign.pub"];
    for (const name of names) {
      await Deno.copyFile(join(from, name), join(dir, name));
    }
  }
}

function installSignalHandlers(): void {
  const onSignal = (code: number) => () => {
    // Every further signal waits for the same teardown instead of exiting halfway.
    interrupted ??= (async () => {
      console.error(`\nlab: interrupted; tearing down ${live.size} lab(s)…`);
      await Promise.allSettled([...live].map((lab) => lab.stop()));
      Deno.exit(code);
    })();
  };
  handlers = [["SIGINT", onSignal(130)], ["SIGTERM", onSignal(143)]];
  for (const [signal, handler] of handlers) Deno.addSignalListener(signal, handler);
}

function removeSignalHandlers(): void {
  for (const [signal, handler] of handlers) Deno.removeSignalListener(signal, handler);
  handlers = [];
}
