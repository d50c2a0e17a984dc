/**
 * A seeded fuzzer of the declaration parse: mutates valid declarations in-process
 * and holds every outcome to the oracle of DESIGN.md §4. Either the parse refuses
 * with its own error (DeclarationRefused), or what it returns satisfies every
 * invariant: paths absolute, normalised, within the byte limits, inside a managed
 * root, neither an own path nor above one; ids and keys unique; modes in the
 * documented form; command-line strings with no leading "-", NUL or line break;
 * images pinned by digest; no action outside the bundle. Anything else (another
 * exception, a broken invariant) is a finding, reported with its seed and case.
 *
 * `deno task fuzz [cases] [seed]` runs it for as long as asked; the test
 * (declaration_fuzz_test.ts) runs a few thousand cases on every `deno task test`.
 */
import { posix } from "node:path";
import { DeclarationRefused, type ParseOptions } from "../src/declaration/envelope.ts";
import { parseDeclaration, parseTrustedDeclaration } from "../src/engine/parse.ts";
import type { Resource } from "../src/resources/mod.ts";
import { ALL_OWN_PATHS } from "../packaging/own_paths_by_os.ts";

const ROOTS = ["/etc", "/srv", "/opt", "/var/lib", "/var/log", "/usr/local", "/home"];
const OWN = [...ALL_OWN_PATHS, "/var/lib/mesh-host", "/etc/mesh-host"];

/** The options every case is parsed with. */
export const FUZZ_OPTIONS: ParseOptions = {
  managedRoots: ROOTS,
  own: { paths: OWN, services: ["nox-mesh-host"] },
  origin: "fuzz",
};

/** A small, fast, seedable PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const DIGEST = "a".repeat(64);

/** Valid declarations to start from (the last one only the trusted parse accepts). */
function seeds(): Record<string, unknown>[] {
  return [
    {
      version: 1,
      node: "node-1",
      serial: 7,
      resources: [
        { type: "directory", id: "d", path: "/etc/app", mode: "0755", owner: "root", group: "0" },
        {
          type: "file",
          id: "f",
          path: "/etc/app/app.conf",
          content: "a = 1\n",
          mode: "0640",
          owner: "root",
          group: "root",
        },
        { type: "package", id: "p", name: "wireguard-tools", version: "1.0.2-1" },
        { type: "service", id: "s", name: "wg-quick@wg0", enabled: true, running: true },
      ],
    },
    {
      version: 1,
      resources: [
        {
          type: "container",
          id: "c",
          name: "registry",
          image: `localhost/registry@sha256:${DIGEST}`,
          args: ["--port", "5000"],
          env: { HOME: "/root", A_1: "x" },
          mounts: [{ source: "/srv/registry", target: "/data", readOnly: true }],
          restart: "always",
        },
        {
          type: "directory",
          id: "shared",
          path: "/srv/shared",
          mode: "0775",
          setgid: true,
          sticky: true,
          owner: "1000",
          group: "1000",
        },
        {
          type: "file",
          id: "bin",
          path: "/usr/local/lib/tool",
          contentBase64: "AAEC",
          mode: "0755",
          setuid: true,
          owner: "root",
          group: "root",
        },
      ],
    },
    {
      version: 1,
      resources: [
        {
          type: "action",
          id: "a",
          run: ["/usr/bin/true"],
          verify: ["/usr/bin/test", "-f", "/etc/x"],
        },
        { type: "service", id: "t", name: "backup.timer", enabled: true, running: false },
      ],
    },
  ];
}

const STRINGS = [
  "",
  "-",
  "--help",
  "-rf",
  "/",
  ".",
  "..",
  "/etc",
  "/var/lib",
  "/usr/local",
  "/etc/systemd/system",
  "/etc/systemd/system/nox-mesh-.service.d/x.conf",
  "/etc/systemd/system/service.d/x.conf",
  "/etc/conf.d/nox-mesh-host.default",
  "/etc/runlevels/boot/nox-mesh-host",
  "/usr/local/sbin/nox-mesh-host",
  "/var/lib/mesh-host/state.db",
  "/var/log/nox-mesh-host.log",
  "/etc/a,b",
  '/srv/a"b',
  "/etc/../root",
  "/etc//x",
  "/etc/x/",
  "etc/x",
  "/root/.ssh/authorized_keys",
  "0644",
  "644",
  "4755",
  "07777",
  "0o644",
  "4294967294",
  "4294967295",
  "99999999999",
  "root",
  "nox-mesh-host",
  "nox-mesh-host.socket",
  "nox-mesh-host@x.service",
  "reboot.target",
  "sshd.socket",
  "x.mount",
  "net.eth0",
  "toString",
  "__proto__",
  "constructor",
  "valueOf",
  "hasOwnProperty",
  "file",
  "directory",
  "action",
  "container",
  `img@sha256:${DIGEST}`,
  "img:latest",
  "\u0000",
  "\n",
  "\r",
  "\t",
  "\u0085",
  "\u009b",
  "\u202e",
  "\u2066",
  "\ud800",
  "\udc00",
  "\ud83d\ude00",
  "é".repeat(128),
  "a".repeat(256),
  "/etc" + `/${"é".repeat(100)}`.repeat(21),
];

const KEYS = [
  "type",
  "id",
  "path",
  "mode",
  "owner",
  "group",
  "content",
  "contentBase64",
  "setuid",
  "setgid",
  "sticky",
  "name",
  "version",
  "enabled",
  "running",
  "image",
  "args",
  "env",
  "mounts",
  "source",
  "target",
  "readOnly",
  "restart",
  "run",
  "verify",
  "__proto__",
  "constructor",
  "node",
  "serial",
  "resources",
];

type Json = unknown;

/** One mutation case: the text handed to the parse, and whether the trusted parse reads it. */
export interface FuzzCase {
  text: string;
  trusted: boolean;
}

/** The `index`-th case of a run seeded with `seed` (deterministic). */
export function fuzzCase(seed: number, index: number): FuzzCase {
  const random = prng((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const all = seeds();
  const start = Math.floor(random() * all.length);
  const value = structuredClone(all[start]) as Json;
  const trusted = start === all.length - 1 ? random() < 0.7 : random() < 0.1;

  const randomString = (): string => {
    const r = random();
    if (r < 0.5) return pick(STRINGS);
    if (r < 0.8) return pick(STRINGS) + pick(STRINGS);
    const base = pick(STRINGS);
    const at = Math.floor(random() * (base.length + 1));
    return base.slice(0, at) + pick(STRINGS) + base.slice(at);
  };
  const randomValue = (depth = 0): Json => {
    const r = random();
    if (r < 0.45) return randomString();
    if (r < 0.55) return pick([0, -1, 1.5, 1, 4294967295, 1e21, Number.MAX_SAFE_INTEGER + 2]);
    if (r < 0.65) return random() < 0.5;
    if (r < 0.7) return null;
    if (r < 0.85 && depth < 2) return [randomValue(depth + 1), randomValue(depth + 1)];
    if (depth < 2) return { [pick(KEYS)]: randomValue(depth + 1) };
    return randomString();
  };
  /** Every container (object or array) in the value, with the value itself. */
  const containers = (v: Json, out: (Record<string, Json> | Json[])[] = []) => {
    if (Array.isArray(v)) {
      out.push(v);
      v.forEach((x) => containers(x, out));
    } else if (v !== null && typeof v === "object") {
      out.push(v as Record<string, Json>);
      Object.values(v).forEach((x) => containers(x, out));
    }
    return out;
  };

  const steps = 1 + Math.floor(random() * 3);
  for (let step = 0; step < steps; step++) {
    const target = pick(containers(value));
    const keys = Array.isArray(target) ? target.map((_, i) => i) : Object.keys(target);
    const r = random();
    if (keys.length > 0 && r < 0.45) {
      const key = pick(keys as (string | number)[]);
      const old = (target as Record<string | number, Json>)[key];
      (target as Record<string | number, Json>)[key] = typeof old === "string" && random() < 0.6
        ? (random() < 0.5 ? old + randomString() : randomString() + old)
        : randomValue();
    } else if (keys.length > 0 && r < 0.6) {
      const key = pick(keys as (string | number)[]);
      if (Array.isArray(target)) target.splice(key as number, 1);
      else delete (target as Record<string, Json>)[key as string];
    } else if (r < 0.8) {
      if (Array.isArray(target)) {
        target.push(structuredClone(pick(target.length ? target : [randomValue()])));
      } else {Object.defineProperty(target, pick(KEYS), {
          value: randomValue(),
          enumerable: true,
          writable: true,
          configurable: true,
        });}
    } else if (Array.isArray(target) && target.length > 1) {
      target.reverse();
    } else if (!Array.isArray(target)) {
      (target as Record<string, Json>)[pick(KEYS)] = randomValue();
    }
  }
  let text = JSON.stringify(value);
  // Text-level mutations: a duplicate key, an escaped lone surrogate, a cut.
  const t = random();
  if (t < 0.08) {
    const at = text.indexOf('"', Math.floor(random() * text.length));
    const m = /^"(type|id|path|mode|name|owner)":("[^"]*"|true|false|\d+)/.exec(text.slice(at));
    if (m) {
      text = text.slice(0, at) + `"${m[1]}":${JSON.stringify(randomString())},` + text.slice(at);
    }
  } else if (t < 0.12) {
    text = text.replace(/"(\/[^"]*)"/, `"$1\\u${pick(["d800", "dc00", "202e", "0085"])}"`);
  } else if (t < 0.14) {
    text = text.slice(0, Math.floor(random() * text.length));
  }
  return { text, trusted };
}

/** Whether `path` is `root` or lies below it. */
const within = (path: string, root: string) => path === root || path.startsWith(root + "/");

/** An own-path pattern as a regular expression for one component at a time. */
const ownParts = OWN.map((p) =>
  p.split("/").slice(1).map((c) =>
    new RegExp(
      `^${c.split("*").map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`,
      "s",
    )
  )
);

/** The invariants of a parsed declaration; returns what is broken (empty: nothing). */
export function brokenInvariants(resources: Resource[], trusted: boolean): string[] {
  const broken: string[] = [];
  const encoder = new TextEncoder();
  const checkString = (s: string, what: string) => {
    if (!s.isWellFormed()) broken.push(`${what} is not well-formed`);
  };
  const checkPath = (p: string, what: string, managed: boolean) => {
    checkString(p, what);
    if (!p.startsWith("/") || posix.normalize(p) !== p || p.endsWith("/")) {
      broken.push(`${what} ${JSON.stringify(p)} is not absolute and normalised`);
    }
    if (p.split("/").includes("..")) broken.push(`${what} has ..`);
    // deno-lint-ignore no-control-regex
    if (/[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/.test(p)) {
      broken.push(`${what} has a control`);
    }
    if (encoder.encode(p).length > 4095) broken.push(`${what} is over 4095 bytes`);
    if (p.split("/").some((c) => encoder.encode(c).length > 255)) {
      broken.push(`${what} has a long name`);
    }
    if (!managed) return;
    if (!ROOTS.some((r) => within(p, r))) broken.push(`${what} ${p} is outside the roots`);
    if (ROOTS.some((r) => within(r, p))) broken.push(`${what} ${p} is or contains a root`);
    const names = p.split("/").slice(1);
    for (const parts of ownParts) {
      const n = Math.min(parts.length, names.length);
      if (parts.slice(0, n).every((re, i) => re.test(names[i]))) {
        broken.push(`${what} ${p} is, or is above, an own path`);
        break;
      }
    }
  };
  const commandWord = (s: string, what: string) => {
    checkString(s, what);
    if (s.startsWith("-") || /[\0\n\r]/.test(s)) {
      broken.push(`${what} ${JSON.stringify(s)} is unsafe`);
    }
  };
  const ids = new Set<string>();
  for (const r of resources) {
    if (ids.has(r.id)) broken.push(`duplicate id ${r.id}`);
    ids.add(r.id);
    commandWord(r.id, "id");
    switch (r.type) {
      case "file":
      case "directory":
        checkPath(r.path, `${r.type} path`, true);
        if (!/^0[0-7]{3}$/.test(r.mode)) broken.push(`mode ${r.mode}`);
        for (const who of [r.owner, r.group]) {
          checkString(who, "owner/group");
          if (/^\d+$/.test(who) && Number(who) > 4294967294) broken.push(`id ${who}`);
        }
        if (r.type === "file" && r.content !== undefined) checkString(r.content, "content");
        break;
      case "package":
        commandWord(r.name, "package name");
        if (r.version !== undefined) commandWord(r.version, "package version");
        break;
      case "service": {
        commandWord(r.name, "service name");
        const base = r.name.split(/[.@]/)[0];
        if (base === "nox-mesh-host") broken.push(`own service ${r.name}`);
        if (/\.(target|mount|device|swap|slice|scope|automount)$/.test(r.name)) {
          broken.push(`unit type of ${r.name}`);
        }
        break;
      }
      case "container":
        commandWord(r.name, "container name");
        if (!/^[a-z0-9][a-z0-9._/:-]*@sha256:[a-f0-9]{64}$/.test(r.image)) {
          broken.push(`image ${r.image}`);
        }
        for (const a of r.args) {
          if (/[\0\n\r]/.test(a) || !a.isWellFormed()) broken.push("container arg");
        }
        for (const [k, v] of Object.entries(r.env)) {
          if (/[\0\n\r]/.test(v) || !v.isWellFormed()) broken.push(`env ${k}`);
        }
        for (const m of r.mounts) {
          checkPath(m.source, "mount source", true);
          checkPath(m.target, "mount target", false);
          if (/[,"]/.test(m.source + m.target)) broken.push("mount with a comma or quote");
        }
        break;
      case "action":
        if (!trusted) broken.push("an action outside the bundle");
        for (const a of [...r.run, ...r.verify]) if (a.includes("\0")) broken.push("action NUL");
        checkPath(r.run[0], "action program", false);
        checkPath(r.verify[0], "action program", false);
        break;
      default:
        broken.push(`unknown type ${(r as { type: string }).type}`);
    }
  }
  return broken;
}

/** A case the oracle rejects. */
export interface Finding {
  seed: number;
  index: number;
  text: string;
  trusted: boolean;
  why: string;
}

/** Run `cases` cases from `seed`; returns the findings and how the parse answered. */
export async function fuzz(
  cases: number,
  seed: number,
): Promise<{ findings: Finding[]; accepted: number; refused: number }> {
  const findings: Finding[] = [];
  let accepted = 0, refused = 0;
  for (let index = 0; index < cases; index++) {
    const { text, trusted } = fuzzCase(seed, index);
    const parse = trusted ? parseTrustedDeclaration : parseDeclaration;
    try {
      const declaration = await parse(text, FUZZ_OPTIONS);
      accepted++;
      const broken = brokenInvariants(declaration.resources, trusted);
      if (broken.length > 0) findings.push({ seed, index, text, trusted, why: broken.join("; ") });
    } catch (error) {
      if (error instanceof DeclarationRefused && error.problems.length > 0) {
        refused++;
        continue;
      }
      const why = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      findings.push({ seed, index, text, trusted, why: `unexpected exception ${why}` });
    }
  }
  return { findings, accepted, refused };
}

/** How a finding is shown: enough to replay it (`fuzzCase(seed, index)`). */
export function describe(f: Finding): string {
  const shown = f.text.length > 2000 ? f.text.slice(0, 2000) + "…" : f.text;
  return `seed ${f.seed} case ${f.index}${
    f.trusted ? " (trusted parse)" : ""
  }: ${f.why}\n  ${shown}`;
}

if (import.meta.main) {
  const cases = Number(Deno.args[0] ?? 100_000);
  const seed = Number(Deno.args[1] ?? Math.floor(Math.random() * 2 ** 31));
  if (!Number.isSafeInteger(cases) || cases < 1 || !Number.isSafeInteger(seed)) {
    console.error("usage: deno task fuzz [cases] [seed]");
    Deno.exit(64);
  }
  const started = performance.now();
  const { findings, accepted, refused } = await fuzz(cases, seed);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `fuzz: seed ${seed}, ${cases} cases in ${seconds} s: ${accepted} accepted, ${refused} refused`,
  );
  for (const f of findings.slice(0, 20)) console.error(describe(f));
  if (findings.length > 0) {
    console.error(`${findings.length} findings; replay one with fuzzCase(seed, case)`);
    Deno.exit(1);
  }
}
