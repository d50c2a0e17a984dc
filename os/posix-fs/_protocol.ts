/**
 * What the host and its child acting as a directory's owner (./serve.ts) say to each other:
 * one JSON object a line, each way, every line at most {@link MAX_LINE} bytes; bytes travel
 * as base64 in parts of at most {@link PART} bytes. Both sides parse what they get strictly.
 * The host trusts the child's answers only as far as that user's own files go (the user
 * could trace it, or answer in its place): an answer never steers an act of root's.
 */
import type { FileIdentity, PathInfo } from "../../src/providers.ts";

/** The longest line either side accepts. */
export const MAX_LINE = 2 * 1024 * 1024;

/** The most bytes one line carries (base64 makes them 4/3 as many characters). */
export const PART = 1024 * 1024;

/** The hidden command the host's own program serves as an owner under. */
export const AS_OWNER_COMMAND = "__as-owner";

/** What the host asks. `from`: the owner's directory, above `path`, that the walk starts at. */
export type Request =
  | { id: number; verb: "lstat" | "empty" | "sync" | "discard"; path: string; from: string }
  | { id: number; verb: "read"; path: string; from: string; size?: number; max: number }
  | { id: number; verb: "remove"; path: string; from: string; kind: "file" | "directory" }
  | {
    id: number;
    verb: "mkdir" | "attrs" | "create";
    path: string;
    from: string;
    mode: number;
    uid: number;
    gid: number;
  }
  | { id: number; verb: "write"; token: number; data: string }
  | { id: number; verb: "seal" | "commit" | "abort"; token: number };

/** Why an act failed, as the child says it. */
export interface Failure {
  kind: "NotFound" | "AlreadyExists" | "PermissionDenied" | "NotCapable" | "unsafe" | "failed";
  message: string;
  /** For "unsafe": the path and what about it (UnsafePathError's parts). */
  path?: string;
  what?: string;
  hint?: string;
}

/** An answer: a part of a read's bytes, a value, or a failure. */
export type Answer =
  | { id: number; part: string }
  | { id: number; ok: unknown }
  | { id: number; error: Failure };

/** A line the other side sent that breaks the protocol. */
export class ProtocolError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

const isId = (v: unknown): v is number =>
  typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

const isText = (v: unknown, max = 8192): v is string => typeof v === "string" && v.length <= max;

const isPath = (v: unknown): v is string =>
  isText(v, 4096) && v.startsWith("/") && !v.includes("\0");

/** Exactly these keys (the optional ones may be missing). */
function keys(o: Record<string, unknown>, required: string[], optional: string[] = []): boolean {
  const all = new Set([...required, ...optional]);
  return required.every((k) => k in o) && Object.keys(o).every((k) => all.has(k));
}

/** Parse one line of the host's (the child's side). */
export function parseRequest(line: string): Request {
  const o = parseLine(line);
  const bad = () => new ProtocolError(`not a request: ${line.slice(0, 200)}`);
  if (!isId(o.id) || typeof o.verb !== "string") throw bad();
  switch (o.verb) {
    case "lstat":
    case "empty":
    case "sync":
    case "discard":
      if (!keys(o, ["id", "verb", "path", "from"]) || !isPath(o.path) || !isPath(o.from)) {
        throw bad();
      }
      break;
    case "read":
      if (
        !keys(o, ["id", "verb", "path", "from", "max"], ["size"]) || !isPath(o.path) ||
        !isPath(o.from) || !isId(o.max) || (o.size !== undefined && !isId(o.size))
      ) throw bad();
      break;
    case "remove":
      if (
        !keys(o, ["id", "verb", "path", "from", "kind"]) || !isPath(o.path) || !isPath(o.from) ||
        (o.kind !== "file" && o.kind !== "directory")
      ) throw bad();
      break;
    case "mkdir":
    case "attrs":
    case "create":
      if (
        !keys(o, ["id", "verb", "path", "from", "mode", "uid", "gid"]) || !isPath(o.path) ||
        !isPath(o.from) || !isId(o.mode) || o.mode > 0o7777 || !isId(o.uid) || !isId(o.gid)
      ) throw bad();
      break;
    case "write":
      if (
        !keys(o, ["id", "verb", "token", "data"]) || !isId(o.token) || !isText(o.data, MAX_LINE)
      ) {
        throw bad();
      }
      break;
    case "seal":
    case "commit":
    case "abort":
      if (!keys(o, ["id", "verb", "token"]) || !isId(o.token)) throw bad();
      break;
    default:
      throw bad();
  }
  return o as unknown as Request;
}

/** Parse one line of the child's (the host's side). */
export function parseAnswer(line: string): Answer {
  const o = parseLine(line);
  const bad = () => new ProtocolError(`not an answer: ${line.slice(0, 200)}`);
  if (!isId(o.id)) throw bad();
  if ("part" in o) {
    if (!keys(o, ["id", "part"]) || !isText(o.part, MAX_LINE)) throw bad();
  } else if ("ok" in o) {
    if (!keys(o, ["id", "ok"])) throw bad();
  } else if ("error" in o) {
    const e = o.error;
    if (
      !keys(o, ["id", "error"]) || !isObject(e) ||
      !keys(e, ["kind", "message"], ["path", "what", "hint"]) ||
      !["NotFound", "AlreadyExists", "PermissionDenied", "NotCapable", "unsafe", "failed"]
        .includes(e.kind as string) ||
      !isText(e.message) ||
      (e.path !== undefined && !isText(e.path)) || (e.what !== undefined && !isText(e.what)) ||
      (e.hint !== undefined && !isText(e.hint))
    ) throw bad();
  } else throw bad();
  return o as unknown as Answer;
}

function parseLine(line: string): Record<string, unknown> {
  if (line.length > MAX_LINE) throw new ProtocolError("a line longer than the protocol allows");
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new ProtocolError(`not JSON: ${line.slice(0, 200)}`);
  }
  if (!isObject(value)) throw new ProtocolError(`not an object: ${line.slice(0, 200)}`);
  return value;
}

/** A PathInfo as it travels (the identity's nanoseconds as decimal strings). */
export function encodeInfo(info: PathInfo | null): unknown {
  if (info === null) return null;
  const { identity, ...rest } = info;
  return identity === undefined ? rest : {
    ...rest,
    identity: {
      ...identity,
      mtimeNs: identity.mtimeNs.toString(),
      ctimeNs: identity.ctimeNs.toString(),
    },
  };
}

const KINDS = new Set(["file", "directory", "symlink", "other"]);

/** A PathInfo from the child, checked field by field; throws on anything else. */
export function decodeInfo(value: unknown): PathInfo | null {
  if (value === null) return null;
  const bad = () => new ProtocolError("an lstat answer that is not one");
  if (!isObject(value) || !keys(value, ["kind", "mode", "uid", "gid", "size"], ["identity"])) {
    throw bad();
  }
  const { kind, mode, uid, gid, size, identity } = value;
  if (
    !KINDS.has(kind as string) || !isId(mode) || mode > 0o7777 || !isId(uid) ||
    uid > 4294967295 || !isId(gid) || gid > 4294967295 || !isId(size)
  ) throw bad();
  const info: PathInfo = { kind: kind as PathInfo["kind"], mode, uid, gid, size };
  if (identity !== undefined) info.identity = decodeIdentity(identity);
  return info;
}

function decodeIdentity(value: unknown): FileIdentity {
  const bad = () => new ProtocolError("a file identity that is not one");
  if (!isObject(value) || !keys(value, ["dev", "ino", "size", "mtimeNs", "ctimeNs"])) throw bad();
  const { dev, ino, size, mtimeNs, ctimeNs } = value;
  const ns = (v: unknown) => typeof v === "string" && /^-?[0-9]{1,25}$/.test(v);
  if (!isId(dev) || !isId(ino) || !isId(size) || !ns(mtimeNs) || !ns(ctimeNs)) throw bad();
  return { dev, ino, size, mtimeNs: BigInt(mtimeNs as string), ctimeNs: BigInt(ctimeNs as string) };
}

/**
 * Lines of text from a stream of bytes, each at most {@link MAX_LINE} bytes: a longer one
 * ends the stream with a {@link ProtocolError}.
 */
export async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let pending: Uint8Array[] = [];
  let pendingLength = 0;
  for await (const chunk of stream) {
    let start = 0;
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, start)) {
      pending.push(chunk.subarray(start, i));
      pendingLength += i - start;
      if (pendingLength > MAX_LINE) {
        throw new ProtocolError("a line longer than the protocol allows");
      }
      yield decoder.decode(concat(pending, pendingLength));
      pending = [];
      pendingLength = 0;
      start = i + 1;
    }
    if (start < chunk.length) {
      pending.push(chunk.slice(start));
      pendingLength += chunk.length - start;
      if (pendingLength > MAX_LINE) {
        throw new ProtocolError("a line longer than the protocol allows");
      }
    }
  }
  if (pendingLength > 0) throw new ProtocolError("the stream ended inside a line");
}

function concat(parts: Uint8Array[], length: number): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
