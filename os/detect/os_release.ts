/** The OS from os-release(5), plus architecture, kernel and host name. */
import type { OsInfo } from "../../src/profile.ts";
import { readText } from "./_probe.ts";

/** Parse os-release text (KEY=value, values optionally quoted). */
export function parseOsRelease(text: string): OsInfo {
  const values = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (!match) continue;
    let value = match[2];
    const quote = value[0];
    if ((quote === '"' || quote === "'") && value.endsWith(quote) && value.length >= 2) {
      value = value.slice(1, -1);
      if (quote === '"') value = value.replace(/\\(["\\$`])/g, "$1");
    }
    values.set(match[1], value);
  }
  return {
    id: values.get("ID") || "linux",
    ...(values.has("VERSION_ID") ? { versionId: values.get("VERSION_ID") } : {}),
    ...(values.has("PRETTY_NAME") ? { prettyName: values.get("PRETTY_NAME") } : {}),
    like: (values.get("ID_LIKE") ?? "").split(/\s+/).filter(Boolean),
  };
}

/** The OS of this machine (/etc/os-release, else /usr/lib/os-release). */
export async function detectOs(): Promise<OsInfo> {
  for (const path of ["/etc/os-release", "/usr/lib/os-release"]) {
    const text = await readText(path);
    if (typeof text === "string") return parseOsRelease(text);
  }
  return { id: "linux", like: [] };
}

/** Kernel release and host name, when the permission set allows them (--allow-sys=osRelease,hostname). */
export function detectKernel(): { kernel?: string; hostname?: string } {
  const ask = (kind: "osRelease" | "hostname", read: () => string) => {
    try {
      return Deno.permissions.querySync({ name: "sys", kind }).state === "granted"
        ? read()
        : undefined;
    } catch {
      return undefined;
    }
  };
  const kernel = ask("osRelease", () => Deno.osRelease());
  const hostname = ask("hostname", () => Deno.hostname());
  return { ...(kernel ? { kernel } : {}), ...(hostname ? { hostname } : {}) };
}
