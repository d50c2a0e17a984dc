/**
 * The graphical session. present = a display server or compositor is
 * installed; running = an X11/Wayland socket exists, a logind session of type
 * x11/wayland exists, or this process itself runs inside one (DISPLAY /
 * WAYLAND_DISPLAY); working = logind reports such a session as active.
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

/** Detect a graphical session. */
export async function detectGraphical(options: { sessionsDir?: string } = {}): Promise<Capability> {
  const dir = options.sessionsDir ?? "/run/systemd/sessions";
  const sessions: Session[] = [];
  const refused: string[] = [];
  const ids = await listDir(dir);
  if (ids === REFUSED) refused.push(dir);
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
  const x11 = await listDir("/tmp/.X11-unix");
  if (x11 === REFUSED) refused.push("/tmp/.X11-unix");
  const sockets = [
    ...(x11 === REFUSED ? [] : x11).filter((n) => /^X\d+$/.test(n)).map((n) => `x11 ${n}`),
    ...(await waylandSockets(refused)),
  ];
  const env = ["WAYLAND_DISPLAY", "DISPLAY"].filter((name) => readEnv(name));
  if (graphical.length || sockets.length || env.length) {
    const evidence = [
      ...graphical.map((s) => `logind session ${s.id} is ${s.type}, state ${s.state || "unknown"}`),
      ...sockets.map((s) => `display socket: ${s}`),
      ...env.map((name) => `this process runs with ${name} set`),
      "no active graphical session reported by logind",
    ];
    const provider = graphical[0]?.type ??
      (sockets.some((s) => s.startsWith("wayland")) ? "wayland" : "x11");
    return { state: "running", provider, evidence };
  }
  const servers: string[] = [];
  for (const name of SERVERS) if (await onDisk(name)) servers.push(name);
  if (servers.length) {
    return {
      state: "present",
      provider: servers[0],
      evidence: [`installed: ${servers.join(", ")}; no graphical session found`],
    };
  }
  return {
    state: "absent",
    evidence: [
      "no graphical session found and no display server or compositor installed",
      ...(refused.length ? [`this build may not look in ${refused.join(", ")}`] : []),
    ],
  };
}

async function waylandSockets(refused: string[]): Promise<string[]> {
  const found: string[] = [];
  const uids = await listDir("/run/user");
  if (uids === REFUSED) refused.push("/run/user");
  for (const uid of uids === REFUSED ? [] : uids) {
    const names = await listDir(`/run/user/${uid}`);
    for (const name of names === REFUSED ? [] : names) {
      if (/^wayland-\d+$/.test(name)) found.push(`wayland /run/user/${uid}/${name}`);
    }
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
