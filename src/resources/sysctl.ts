/**
 * The sysctl resource (DESIGN.md §17): one kernel setting, written and read
 * back from the kernel ("conntrack is asked what timeout it holds"). The value
 * seen before the host first changes it is recorded (a kind note, written
 * before the change) and restored when the resource is no longer declared.
 * Keys are dotted names of settings under /proc/sys, or their paths there with
 * "/" where a part holds a dot (`net/ipv4/conf/eth0.100/forwarding`); a key
 * that is not there fails the apply (and the plan), naming it. Two keys are one
 * setting when they differ only in their separators (busybox's sysctl turns dots
 * into slashes until a path exists), so keys are compared with every separator a dot.
 *
 * Refused over the link (the safe parse), accepted from the bundle or where
 * host.json's `permit` names the setting: settings that make the kernel run a
 * program as root, and values that turn a kernel protection off. Refused
 * everywhere unless declared `permanent`: values the kernel never lowers again
 * (the restore on release could never succeed); a permanent setting is left as
 * it is when released.
 */
import * as v from "valibot";
import { resourceId } from "../declaration/fields.ts";
import type { KernelSettings } from "../providers.ts";
import type {
  Change,
  Diff,
  KindContext,
  Release,
  ReleaseOptions,
  ResourceKind,
  RuleScope,
} from "./kind.ts";
import { NoProviderError, ResourceError } from "./kind.ts";

/**
 * Dotted setting names: words of letters, digits, _ and -, joined by single dots; not
 * starting with - (sysctl would read it as an option: -a, -p FILE; the adapter refuses
 * it too).
 */
export const SYSCTL_KEY = /^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$/;

/**
 * A setting's path under /proc/sys, for a name whose parts hold dots (an
 * interface `eth0.100`): parts of letters, digits, _, - and ., joined by single
 * slashes, none of them only dots.
 */
export const SYSCTL_PATH = /^[A-Za-z0-9_][A-Za-z0-9_-]*(\/(?!\.+(\/|$))[A-Za-z0-9_.-]+)+$/;

/** Whether `key` names a setting in one of the two forms. */
export function isSettingName(key: string): boolean {
  return SYSCTL_KEY.test(key) || SYSCTL_PATH.test(key);
}

/**
 * The name the sysctl program is given for `key`: the dotted form, unless a part
 * holds a dot (then the path form).
 */
export function settingName(key: string): string {
  if (!key.includes("/")) return key;
  const parts = key.split("/");
  return parts.some((part) => part.includes(".")) ? key : parts.join(".");
}

/**
 * The form two keys are compared in: every separator a dot. `net/ipv4/ip_forward`,
 * `net/ipv4.ip_forward` and `net.ipv4.ip_forward` may all be one setting (procps reads
 * a key by its first separator, busybox turns dots into slashes until a path exists),
 * and keys that differ here never name one file.
 *
 * @example
 * ```ts
 * canonicalSetting("net/ipv4.ip_forward"); // "net.ipv4.ip_forward"
 * ```
 */
export function canonicalSetting(key: string): string {
  return key.replaceAll("/", ".");
}

/** What a guarded setting is, and which of its values are refused (all when `refuses` is absent). */
interface Guard {
  /** The setting's canonical name, or a prefix ending in "." for every setting below it. */
  name: string;
  /** Whether this value is refused; absent: every value is. */
  refuses?: (value: string) => boolean;
  /** Why, in words that end the sentence "… is refused: …". */
  why: string;
}

/**
 * A value as the kernel reads one integer (decimal, 0x hex or 0 octal, as proc_dointvec
 * does); `undefined` for anything else, words after it included.
 */
export function kernelInteger(value: string | number): number | undefined {
  const text = normalValue(value);
  const m = /^(-?)(0[xX][0-9a-fA-F]{1,15}|0[0-7]{0,20}|[1-9][0-9]{0,17})$/.exec(text);
  if (!m) return undefined;
  const digits = m[2];
  const n = /^0[xX]/.test(digits)
    ? parseInt(digits.slice(2), 16)
    : digits.length > 1 && digits.startsWith("0")
    ? parseInt(digits, 8)
    : Number(digits);
  return m[1] === "-" ? -n : n;
}

/** Refuses a value unless it is one integer that `ok` accepts. */
const unless = (ok: (n: number) => boolean) => (value: string) => {
  const n = kernelInteger(value);
  return n === undefined || !ok(n);
};

/**
 * Settings that make the kernel run a program as root (or hand it what root's processes
 * hold): a declaration over the link may not run programs, as it may not declare an action.
 */
export const RUNS_A_PROGRAM: readonly Guard[] = [
  {
    name: "kernel.core_pattern",
    refuses: (value) => value.startsWith("|") || value.startsWith("@"),
    why: "a pattern starting with | makes the kernel run that program as root for every " +
      "crash (@ hands the dump to a socket)",
  },
  { name: "kernel.modprobe", why: "the kernel runs this program as root to load modules" },
  { name: "kernel.poweroff_cmd", why: "the kernel runs this program as root to power off" },
  { name: "kernel.hotplug", why: "the kernel runs this program as root for device events" },
  {
    name: "kernel.usermodehelper.",
    why: "they bound what the programs the kernel runs as root may do",
  },
  {
    name: "fs.binfmt_misc.",
    why: "it registers interpreters the kernel runs for matching programs, setuid ones included",
  },
];

/** Settings whose value turns a kernel protection off. */
export const PROTECTIONS: readonly Guard[] = [
  {
    name: "kernel.randomize_va_space",
    refuses: unless((n) => n >= 2),
    why: "below 2 it turns address space randomisation (partly) off",
  },
  {
    name: "kernel.kptr_restrict",
    refuses: unless((n) => n >= 1),
    why: "0 shows kernel addresses to every user",
  },
  {
    name: "kernel.dmesg_restrict",
    refuses: unless((n) => n >= 1),
    why: "0 lets every user read the kernel's log",
  },
  {
    name: "fs.suid_dumpable",
    refuses: unless((n) => n === 0),
    why: "above 0 programs that changed their privileges dump core",
  },
  ...["symlinks", "hardlinks", "fifos", "regular"].map((what) => ({
    name: `fs.protected_${what}`,
    refuses: unless((n) => n >= 1),
    why: `0 turns off the protection of ${what} in sticky world-writable directories`,
  })),
  {
    name: "kernel.yama.ptrace_scope",
    refuses: unless((n) => n >= 1),
    why: "0 lets a process trace (and read the memory of) every process of its user",
  },
  {
    name: "kernel.unprivileged_bpf_disabled",
    refuses: unless((n) => n >= 1),
    why: "0 lets every user load BPF programs into the kernel",
  },
  {
    name: "kernel.perf_event_paranoid",
    refuses: unless((n) => n >= 2),
    why: "below 2 lets every user observe the kernel through performance events",
  },
  {
    name: "vm.mmap_min_addr",
    refuses: unless((n) => n >= 4096),
    why: "below 4096 lets a user map the lowest page, where a kernel bug's NULL pointer lands",
  },
  {
    name: "vm.unprivileged_userfaultfd",
    refuses: unless((n) => n === 0),
    why: "above 0 lets every user stall the kernel in the middle of a copy (userfaultfd), a " +
      "staple of kernel exploits",
  },
];

/**
 * The kernel's hardening settings, as families: over the link (and from a file) a value that
 * moves one of them the weaker way from what the kernel holds now is refused at the check,
 * unless host.json's `permit.sysctls` names it; the bundle may. A list of keys would always
 * trail the kernel, so every `kernel.*` setting is one (higher is harder, as for
 * kptr_restrict, perf_event_paranoid, yama.ptrace_scope …), with the few below where lower is
 * harder. Each with its words for nox-mesh-host-declaration(5).
 */
export const HARDENING: readonly { prefix: string; why: string }[] = [
  { prefix: "kernel.", why: "kernel.*, every one of which the host counts as such" },
  { prefix: "fs.protected_", why: "the protections of sticky and world-writable directories" },
  { prefix: "fs.suid_dumpable", why: "core dumps of programs that changed privileges" },
  { prefix: "vm.mmap_min_addr", why: "the lowest address a user may map" },
  { prefix: "vm.unprivileged_userfaultfd", why: "userfaultfd for every user" },
  { prefix: "net.core.bpf_jit_harden", why: "the hardening of BPF's JIT" },
  { prefix: "net.core.bpf_jit_kallsyms", why: "BPF's JIT symbols shown to users" },
  { prefix: "dev.tty.", why: "what users may do with terminals" },
  { prefix: "user.max_", why: "how many namespaces users may make" },
];

/** Settings of the {@link HARDENING} families where a lower value is the harder one. */
export const LOWER_IS_HARDER: ReadonlySet<string> = new Set([
  "fs.suid_dumpable",
  "kernel.sysrq",
  "kernel.unprivileged_userns_clone",
  "kernel.ftrace_enabled",
  "net.core.bpf_jit_kallsyms",
  "vm.unprivileged_userfaultfd",
  "dev.tty.ldisc_autoload",
  "dev.tty.legacy_tiocsti",
]);

/** The hardening family a setting (canonical name) belongs to, if any. */
export function hardeningOf(name: string): { why: string; lowerIsHarder: boolean } | undefined {
  const family = HARDENING.find((f) =>
    f.prefix.endsWith(".") || f.prefix.endsWith("_")
      ? name.startsWith(f.prefix) && name.length > f.prefix.length
      : name === f.prefix
  );
  if (family === undefined) return undefined;
  return {
    why: family.why,
    lowerIsHarder: LOWER_IS_HARDER.has(name) || name.startsWith("user.max_"),
  };
}

/**
 * Why setting `name` from `now` to `want` weakens the kernel (in words ending "… is refused:
 * …"), or undefined: both one integer, and `want` on the weaker side of a hardening setting.
 */
export function weakens(name: string, now: string, want: string): string | undefined {
  const family = hardeningOf(name);
  if (family === undefined) return undefined;
  const [from, to] = [kernelInteger(now), kernelInteger(want)];
  if (from === undefined || to === undefined || from === to) return undefined;
  const weaker = family.lowerIsHarder ? to > from : to < from;
  if (!weaker) return undefined;
  return `it would ${to < from ? "lower" : "raise"} ${name} from ${from} to ${to}, and ` +
    `${name} is a hardening setting (${family.why}) where a ${
      family.lowerIsHarder ? "lower" : "higher"
    } value is the harder one`;
}

/**
 * Values the kernel never lowers again until it boots (io_uring_disabled 2 on hardened
 * kernels): the restore a release promises could never succeed, so they are accepted only
 * as `permanent`.
 */
export const ONE_WAY: readonly { name: string; value: number; why: string }[] = [
  { name: "kernel.modules_disabled", value: 1, why: "modules stay disabled" },
  { name: "kernel.kexec_load_disabled", value: 1, why: "kexec stays disabled" },
  { name: "kernel.yama.ptrace_scope", value: 3, why: "tracing stays off" },
  { name: "kernel.unprivileged_bpf_disabled", value: 1, why: "unprivileged BPF stays off" },
  {
    name: "kernel.io_uring_disabled",
    value: 2,
    why: "io_uring stays disabled, on hardened kernels",
  },
];

/** The first guard of `list` that refuses `value` for the setting `key`, if any. */
export function guardFor(list: readonly Guard[], key: string, value: string | number) {
  const name = canonicalSetting(key);
  const text = normalValue(value);
  return list.find((g) =>
    (g.name.endsWith(".") ? name.startsWith(g.name) : name === g.name) &&
    (g.refuses === undefined || g.refuses(text))
  );
}

/**
 * Whether `name` (canonical) is a setting the safe parse or the check guards (one that runs a
 * program, turns a protection off, or hardens the kernel), so that host.json may permit it.
 */
export function isGuardedSetting(name: string): boolean {
  return [...RUNS_A_PROGRAM, ...PROTECTIONS].some((g) =>
    g.name.endsWith(".") ? name.startsWith(g.name) && name.length > g.name.length : name === g.name
  ) || hardeningOf(name) !== undefined;
}

const valueText = v.pipe(
  v.string(),
  v.maxLength(4096, "a value is at most 4096 characters"),
  v.check((s) => !/[\n\r\0]/.test(s), "a value is one line (no newline, carriage return or NUL)"),
  v.check((s) => s.trim() !== "", "a value is not empty"),
);

/** The sysctl's own fields. */
const SYSCTL_FIELDS = {
  key: v.pipe(
    v.string(),
    v.maxLength(255, "a key is at most 255 characters"),
    v.check(
      isSettingName,
      (i) =>
        `${JSON.stringify(i.input)} is not a setting name such as ` +
        `"net.netfilter.nf_conntrack_tcp_timeout_established" (words joined by dots), or its ` +
        `path under /proc/sys where a part holds a dot, such as ` +
        `"net/ipv4/conf/eth0.100/forwarding" (no empty, "." or ".." parts)`,
    ),
  ),
  value: v.union(
    [valueText, v.pipe(v.number(), v.safeInteger("a numeric value is an integer"))],
    "a value is a string (one line) or an integer",
  ),
};

/** Resource: a kernel setting. */
export const SysctlSchema = v.strictObject({
  type: v.literal("sysctl"),
  id: resourceId,
  ...SYSCTL_FIELDS,
  /**
   * The value is one the kernel never lowers again (modules_disabled 1 …): declared so,
   * a release leaves it as it is, which is all the kernel allows until the next boot.
   */
  permanent: v.optional(v.boolean("permanent is true or false")),
});

/** A sysctl (kernel setting) resource. */
export type SysctlResource = v.InferOutput<typeof SysctlSchema>;

/** What two sysctl resources may not both manage: the setting, in its canonical form. */
export function sysctlKey(resource: Pick<SysctlResource, "key">): string {
  return `sysctl:${canonicalSetting(resource.key)}`;
}

/** What the parse refuses about one setting (see the module's comment). */
function sysctlRules(resource: SysctlResource, at: string, scope: RuleScope): void {
  const { key, value } = resource;
  const name = canonicalSetting(key);
  const shown = `${name} = ${normalValue(value)}`;
  const n = kernelInteger(value);
  const problem = (field: string, message: string) =>
    scope.problems.push({ path: `${at}.${field}`, message });

  if (!scope.trusted && !scope.permit.sysctls.has(name)) {
    const runs = guardFor(RUNS_A_PROGRAM, key, value);
    const off = runs ? undefined : guardFor(PROTECTIONS, key, value);
    const guard = runs ?? off;
    if (guard) {
      const why = off && n === undefined
        ? "the value of this protection is one integer (the kernel would read only part of it)"
        : guard.why;
      problem(
        guard.refuses === undefined ? "key" : "value",
        `${guard.refuses === undefined ? name : shown} is refused: ${why}; a declaration from ` +
          `the link or a file may not ${
            runs ? "make the kernel run programs" : "turn a kernel protection off"
          }: declare it in the bundle the host carries, or name "${name}" in the ` +
          "permit.sysctls of this machine's host.json",
      );
    }
  }

  const oneWay = ONE_WAY.find((w) => w.name === name);
  if (oneWay && n === undefined) {
    problem("value", `${shown}: the value of ${name} is one integer`);
  } else if (oneWay && n === oneWay.value && resource.permanent !== true) {
    problem(
      "value",
      `${shown} is one-way: the kernel never lowers it again until it boots ` +
        `(${oneWay.why}), so the value before could never be restored when it is no longer ` +
        `declared; add "permanent": true to declare that it stays`,
    );
  } else if (resource.permanent === true && (oneWay === undefined || n !== oneWay.value)) {
    problem(
      "permanent",
      `${shown} is not a one-way value (those are ` +
        `${ONE_WAY.map((w) => `${w.name} ${w.value}`).join(", ")}); without "permanent", ` +
        "the value before is restored when it is no longer declared",
    );
  }
}

/** A value as the kernel compares it: words separated by single spaces. */
export function normalValue(value: string | number): string {
  return String(value).trim().split(/\s+/).join(" ");
}

/** One difference between the declaration and the kernel. */
export type SysctlChange = Change<"value"> & { from: string; to: string };

/** The change of a value, with its words. */
function valueChange(from: string, to: string): SysctlChange {
  return { what: "value", text: `value ${from} -> ${to}`, from, to };
}

function settings(ctx: KindContext): KernelSettings {
  const s = ctx.providers.sysctl;
  if (!s) throw new NoProviderError("sysctl", "the sysctl program");
  return s;
}

const originalNote = (key: string) => `${sysctlKey({ key })}:original`;

async function current(s: KernelSettings, key: string): Promise<string> {
  const value = await s.read(settingName(key));
  if (value === null) {
    throw new ResourceError(
      "resource.sysctl-unknown",
      `"${key}" is not a kernel setting on this machine (nothing at /proc/sys/${
        key.includes("/") ? key : key.replaceAll(".", "/")
      })`,
      { hint: "check the name, or load the kernel module that provides it first" },
    );
  }
  return normalValue(value);
}

/**
 * Over the link (and from a file), refuse moving a hardening setting the weaker way from what
 * the kernel holds now (see {@link HARDENING}), unless host.json permits the setting.
 */
function refuseWeakening(ctx: KindContext, key: string, have: string, want: string): void {
  const name = canonicalSetting(key);
  if (ctx.policy.trusted || ctx.policy.permit.sysctls.has(name)) return;
  const why = weakens(name, have, want);
  if (why === undefined) return;
  throw new ResourceError(
    "resource.sysctl-lowers",
    `${name} = ${want} is refused: ${why}; a declaration from the link or a file may not ` +
      "weaken the kernel",
    {
      hint: `declare it in the bundle the host carries, or name "${name}" in the ` +
        "permit.sysctls of this machine's host.json",
    },
  );
}

/** The sysctl kind. */
export const sysctlKind: ResourceKind<SysctlResource, SysctlChange> = {
  type: "sysctl",
  schema: SysctlSchema,
  needs: "sysctl",
  mayCutLink: true,

  key: sysctlKey,

  rules: sysctlRules,

  async check(ctx: KindContext, resource: SysctlResource): Promise<Diff<SysctlChange>> {
    const have = await current(settings(ctx), resource.key);
    const want = normalValue(resource.value);
    if (have !== want) refuseWeakening(ctx, resource.key, have, want);
    return { exists: true, changes: have === want ? [] : [valueChange(have, want)] };
  },

  async apply(ctx: KindContext, resource: SysctlResource): Promise<void> {
    const s = settings(ctx);
    const before = await current(s, resource.key);
    refuseWeakening(ctx, resource.key, before, normalValue(resource.value));
    // Recorded before the first change, so a crash right after it cannot lose it.
    if (ctx.notes.get(originalNote(resource.key)) === undefined) {
      ctx.notes.set(originalNote(resource.key), before);
    }
    await s.write(settingName(resource.key), normalValue(resource.value));
  },

  async release(
    ctx: KindContext,
    { key, permanent }: SysctlResource,
    { dryRun }: ReleaseOptions,
  ): Promise<Release> {
    if (permanent === true) {
      if (!dryRun) ctx.notes.set(originalNote(key), undefined);
      return {
        outcome: "forgotten",
        detail:
          "declared permanent: the kernel never lowers it again until it boots; left as it is",
      };
    }
    const original = ctx.notes.get(originalNote(key));
    if (original === undefined) {
      return {
        outcome: "forgotten",
        detail: "the host never changed it (it was already as declared); left as it is",
      };
    }
    if (dryRun) return { outcome: "removed", detail: `would restore ${original}` };
    const s = settings(ctx);
    await s.write(settingName(key), original);
    const now = await current(s, key);
    if (now !== original) {
      throw new ResourceError(
        "resource.sysctl-restore",
        `restoring "${key}" to ${original} read back ${now}`,
      );
    }
    ctx.notes.set(originalNote(key), undefined);
    return { outcome: "removed", detail: `restored to ${original}` };
  },
};
