/**
 * Kernel settings (the `KernelSettings` port) with the `sysctl` program:
 * `sysctl -n KEY` reads, `sysctl -w KEY=VALUE` writes. Deno grants /proc only
 * to a process allowed everything, which the host never is, so the program
 * is the narrow grant. Keys are refused here too unless they are dotted names,
 * or paths with "/" (whose parts may hold dots: both procps and busybox read
 * those as paths under /proc/sys), that stay there: no empty, "." or ".."
 * parts, never an option.
 */
import type { KernelSettings } from "../../src/providers.ts";
import { mustRun, runProgram, type RunVia } from "../_run.ts";

/** Options of {@link sysctl}. */
export interface SysctlOptions extends RunVia {
  timeoutMs?: number;
}

const KEY = /^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$/;
const PATH = /^[A-Za-z0-9_][A-Za-z0-9_-]*(\/(?!\.+(\/|$))[A-Za-z0-9_.-]+)+$/;

/** Refuse a key that could name anything but a setting under /proc/sys. */
export function checkKey(key: string): string {
  if (!(KEY.test(key) || PATH.test(key)) || key.length > 255) {
    throw new TypeError(
      `"${key}" is not a kernel setting name (dotted words, or a path of words under /proc/sys)`,
    );
  }
  return key;
}

/**
 * The sysctl adapter.
 *
 * @example
 * ```ts
 * await sysctl().read("net.ipv4.ip_forward"); // "0"
 * ```
 */
export function sysctl(options: SysctlOptions = {}): KernelSettings {
  const base = { env: options.env, via: options.via, timeoutMs: options.timeoutMs ?? 30_000 };
  return {
    async read(key) {
      const r = await runProgram(["sysctl", "-n", checkKey(key)], base);
      if (r.code !== 0) {
        if (/cannot stat|No such file|unknown key|not found/i.test(r.stderr)) return null;
        await mustRun(["sysctl", "-n", key], base); // throws, naming it
      }
      return r.stdout.replace(/\n$/, "");
    },

    async write(key, value) {
      if (/[\n\r\0]/.test(value)) throw new TypeError("a kernel setting's value is one line");
      await mustRun(["sysctl", "-q", "-w", `${checkKey(key)}=${value}`], base);
    },
  };
}
