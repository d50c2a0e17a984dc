/**
 * The graphical session. present = a display server or compositor is installed; running =
 * logind reports a session of type x11/wayland, root's display server has its X11 socket,
 * or this process itself runs inside one (DISPLAY / WAYLAND_DISPLAY); working = logind
 * reports such a session as active.
 *
 * Only what no local user can make counts: logind's session files in a directory only root
 * can write, and X11 sockets that are root's in a /tmp/.X11-unix that is root's. Anyone may
 * put a socket named X0 in /tmp/.X11-unix (it is 1777) or make that directory first, and any
 * logged-in user may put a wayland-0 in their own /run/user/UID: those are said, never counted.
 */
import type { Capability } from "../../src/profile.ts";
import { listDir, onDisk, readText, REFUSED } from "./_probe.ts";

const SERVERS = [
  "Xorg",
  "Xwayland",
  "sway",
  "weston",
  "gnome-shell",
  "kwin_wayland",
  "Hyprland",
  "labwc",
  "wayfire",
  "cage",
];

/** One logind session, from its state file in /run/systemd/sessions. */
export interface Session {
  id: string;
  type: string;
  state: string;
  active: boolean;
  user?: string;
  seat?: string;
}

/** Parse a logind session state file (KEY=value lines). */
export function parseSession(id: string, text: string): Session {
  const v = new Map<string, string>();
  for (const line of text.split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) v.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return {
    id,
    type: v.get("TYPE") ?? "",
    state: v.get("STATE") ?? "",
    active: v.get("ACTIVE") === "1",
    ...(v.has("USER") ? { user: v.get("USER") } : {}),
    ...(v.has("SEAT") ? { seat: v.get("SEAT") } : {}),
  };
}

/** What a directory is, when only root can add or replace entries in it; else why not. */
async function rootsAlone(dir: string): Promise<true | string | typeof REFUSED> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(dir);
  } catch (error) {
    return error instanceof Deno.errors.NotCapable ? REFUSED : "it is missing";
  }
  if (!info.isDirectory) return "it is not a directory";
  if (info.uid !== 0) return `it belongs to uid ${info.uid}`;
  return ((info.mode ?? 0) & 0o022) === 0 ? true : "others may write it";
}

/** Detect a graphical session (the directories are options for tests). */
// Long because: the probes of a graphical session in order (logind's sessions, X11 sockets), each
// noting why it found none.
export async function detectGraphical(
  options: { sessionsDir?: string; x11Dir?: string } = {},
): Promise<Capability> {
  const dir = options.sessionsDir ?? "/run/systemd/sessions";
  const x11Dir = options.x11Dir ?? "/tmp/.X11-unix";
  const sessions: Session[] = [];
  const refused: string[] = [];
  const uncounted: string[] = [];
  const trusted = await rootsAlone(dir);
  const ids = trusted === true ? await listDir(dir) : trusted === REFUSED ? REFUSED : [];
  if (ids === REFUSED) refused.push(dir);
  else if (trusted !== true && trusted !== "it is missing") {
    uncounted.push(`${dir} is not logind's alone (${trusted}): its sessions are not counted`);
  }
  for (const id of ids === REFUSED ? [] : ids) {
    if (id.endsWith(".ref")) continue;
    const text = await readText(`${dir}/${id}`);
    if (typeof text === "string") sessions.push(parseSession(id, text));
  }
  const graphical = sessions.filter((s) => s.type === "x11" || s.type === "wayland");
  const active = graphical.find((s) => s.active || s.state === "active");
  if (active) {
    return {
      state: "working",
      provider: active.type,
      evidence: [
        `logind reports an active ${active.type} session ${active.id}` +
        (active.user ? ` of user ${active.user}` : "") + (active.seat ? ` on ${active.seat}` : ""),
      ],
    };
  }
  const sockets = await x11Sockets(x11Dir, refused, uncounted);
  const env = ["WAYLAND_DISPLAY", "DISPLAY"].filter((name) => readEnv(name));
  if (graphical.length || sockets.length || env.length) {
    const evidence = [
      ...graphical.map((s) => `logind session ${s.id} is ${s.type}, state ${s.state || "unknown"}`),
      ...sockets.map((s) => `display socket: ${s}`),
      ...env.map((name) => `this process runs with ${name} set`),
      "no active graphical session reported by logind",
      ...uncounted,
    ];
    const provider = graphical[0]?.type ??
      (env.includes("WAYLAND_DISPLAY") ? "wayland" : "x11");
    return { state: "running", provider, evidence };
  }
  const servers: string[] = [];
  for (const name of SERVERS) if (await onDisk(name)) servers.push(name);
  if (servers.length) {
    return {
      state: "present",
      provider: servers[0],
      evidence: [`installed: ${servers.join(", ")}; no graphical session found`, ...uncounted],
    };
  }
  return {
    state: "absent",
    evidence: [
      "no graphical session found and no display server or compositor installed",
      ...uncounted,
      ...(refused.length ? [`this build may not look in ${refused.join(", ")}`] : []),
    ],
  };
}

/**
 * Root's X11 sockets (a display server run as root, as display managers run it) in `dir`,
 * when that directory is root's: a socket anyone else made there is said, not counted.
 */
async function x11Sockets(dir: string, refused: string[], uncounted: string[]): Promise<string[]> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(dir);
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) refused.push(dir);
    return [];
  }
  if (!info.isDirectory || info.uid !== 0) {
    uncounted.push(`${dir} is not root's: its sockets are not counted`);
    return [];
  }
  const names = await listDir(dir);
  if (names === REFUSED) {
    refused.push(dir);
    return [];
  }
  const found: string[] = [];
  for (const name of names.filter((n) => /^X\d+$/.test(n))) {
    const socket = await Deno.lstat(`${dir}/${name}`).catch(() => null);
    if (socket?.isSocket && socket.uid === 0) found.push(`x11 ${name}`);
    else uncounted.push(`${dir}/${name} is not root's socket: not counted (anyone may make one)`);
  }
  return found;
}

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // not in this build's --allow-env: a service has no display anyway
  }
}
