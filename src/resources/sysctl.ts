/**
 * The sysctl resource (DESIGN.md §17): one kernel setting, written and read
 * back from the kernel ("conntrack is asked what timeout it holds"). The value
 * seen before the host first changes it is recorded (a kind note, written
 * before the change) and restored when the resource is no longer declared.
 * Keys are dotted names of settings under /proc/sys, or their paths there with
 * "/" where a part holds a dot (`net/ipv4/conf/eth0.100/forwarding`); a key
 * that is not there fails the apply (and the plan), naming it.
 */
import * as v from "valibot";
import { resourceId } from "../declaration/fields.ts";
import type { KernelSettings } from "../providers.ts";
import type { Change, Diff, KindContext, Release, ReleaseOptions, ResourceKind } from "./kind.ts";
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
 * The one name of the setting `key` names: the dotted form, unless a part holds
 * a dot (then the path form), so `net/ipv4/ip_forward` and `net.ipv4.ip_forward`
 * are the same setting to the parse and the store.
 */
export function settingName(key: string): string {
  if (!key.includes("/")) return key;
  const parts = key.split("/");
  return parts.some((part) => part.includes(".")) ? key : parts.join(".");
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
});

/** A sysctl (kernel setting) resource. */
export type SysctlResource = v.InferOutput<typeof SysctlSchema>;

/** What two sysctl resources may not both manage: the setting. */
export function sysctlKey(resource: Pick<SysctlResource, "key">): string {
  return `sysctl:${settingName(resource.key)}`;
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

/** The sysctl kind. */
export const sysctlKind: ResourceKind<SysctlResource, SysctlChange> = {
  type: "sysctl",
  schema: SysctlSchema,
  needs: "sysctl",
  mayCutLink: true,

  key: sysctlKey,

  async check(ctx: KindContext, resource: SysctlResource): Promise<Diff<SysctlChange>> {
    const have = await current(settings(ctx), resource.key);
    const want = normalValue(resource.value);
    return { exists: true, changes: have === want ? [] : [valueChange(have, want)] };
  },

  async apply(ctx: KindContext, resource: SysctlResource): Promise<void> {
    const s = settings(ctx);
    const before = await current(s, resource.key);
    // Recorded before the first change, so a crash right after it cannot lose it.
    if (ctx.notes.get(originalNote(resource.key)) === undefined) {
      ctx.notes.set(originalNote(resource.key), before);
    }
    await s.write(settingName(resource.key), normalValue(resource.value));
  },

  async release(
    ctx: KindContext,
    { key }: SysctlResource,
    { dryRun }: ReleaseOptions,
  ): Promise<Release> {
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
