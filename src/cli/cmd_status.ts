/** `status`: identity, the current declaration, the last apply, what is held. */
import { tally } from "../engine/types.ts";
import { lastRescue, pendingRescue, readHold, type Rescue } from "../engine/hold.ts";
import { META } from "../store/meta.ts";
import { readPending, readRefused } from "../store/confirm_records.ts";
import type { Command } from "./command.ts";
import { EXIT } from "./io.ts";

/** `status`. */
export const statusCommand: Command = {
  name: "status",
  summary: "show identity, the current declaration, the last apply and what is held",
  usage: "status",
  help: `Show what this node's store says: its identity, the declaration it holds the
machine to, the last apply and its outcome, how many resources it holds, whether
the service runs, the link's state and last error, the next drift check, a hold
(who, why, since when), a rescue waiting for its declaration, and a network
change waiting for the link to confirm it (or the last one refused because it
was not confirmed: see confirmWindowSeconds in host.json(5)).
Reads the store only; changes nothing.
Exit codes: 0 shown, 70 the store cannot be opened, 78 configuration.
`,
  options: {},
  positionals: [0, 0],
  // Long because: the status table's rows in the order they are shown, for text and --json alike.
  async run(ctx) {
    // The link's code is loaded only where it is used: it costs every start otherwise.
    const [{ linkRows, linkStatus }, { openEngine }] = await Promise.all([
      import("./_link.ts"),
      import("./_engine.ts"),
    ]);
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
    const { store } = host;
    const current = store.current();
    const last = store.lastApply();
    const open = readPending(store).record;
    const owed = store.admitted().record;
    const status = {
      node: store.meta(META.node) ?? null,
      stateDir: host.config.stateDir,
      schema: store.schemaVersion,
      declaration: current && {
        source: current.source,
        origin: current.origin,
        serial: current.serial ?? null,
        digest: current.digest,
        acceptedAt: current.acceptedAt,
      },
      lastApply: last,
      held: store.managedCount(),
      hold: readHold(store),
      admitted: owed ? { serial: owed.serial, digest: owed.digest, at: owed.at } : null,
      rescue: { pending: pendingRescue(store), last: lastRescue(store) },
      ...linkStatus(store),
      confirm: {
        open: open
          ? {
            serial: open.serial,
            deadline: open.deadline,
            goesBackTo: open.restore?.serial ?? null,
            changed: open.changed.map((c) => `${c.type} "${c.id}"`),
          }
          : null,
        refused: readRefused(store).record ?? null,
      },
    };
    if (ctx.json) {
      ctx.io.stdout(JSON.stringify(status) + "\n");
      return EXIT.ok;
    }
    const rows: [string, string][] = [
      ["node", status.node ?? "no identity (not enrolled)"],
      ["store", `${store.path} (schema ${status.schema})`],
      [
        "declaration",
        current
          ? `${current.source} ${current.origin}, serial ${current.serial ?? "-"}, ${
            current.digest.slice(0, 19)
          }…, accepted ${current.acceptedAt}`
          : "none yet",
      ],
      [
        "last apply",
        last
          ? `#${last.id} ${last.outcome} at ${last.endedAt ?? last.startedAt}: ${
            tally(last.counts)
          }` +
            (last.error ? `\n${" ".repeat(13)}${last.error}` : "")
          : "none yet",
      ],
      ["held", `${status.held} resources`],
      [
        "hold",
        status.hold
          ? `HELD by ${status.hold.by} since ${status.hold.since}: ${status.hold.reason} ` +
            "(nothing is applied; unhold lifts it)"
          : "none",
      ],
      ...(owed
        ? [[
          "admitted",
          `serial ${owed.serial} at ${owed.at}: not applied yet (the service applies it when it ` +
          "next reconciles, with or without its link)",
        ] as [string, string]]
        : []),
      ...rescueRows(status.rescue),
      ...linkRows(status),
      ...confirmRows(status.confirm),
    ];
    ctx.io.stdout(rows.map(([k, v]) => `${k.padEnd(13)}${v}\n`).join(""));
    return EXIT.ok;
  },
};

/** The rescue rows: one waiting for its apply, or the last one answered. */
function rescueRows(r: { pending: Rescue | null; last: Rescue | null }): [string, string][] {
  if (r.pending) {
    return [[
      "rescue",
      `by ${r.pending.by} at ${r.pending.at}: ${r.pending.forgot} forgotten; ` +
      "waiting for the declaration that answers it",
    ]];
  }
  if (r.last) return [["last rescue", `by ${r.last.by} at ${r.last.at}`]];
  return [];
}

/** The confirm window's rows: a change waiting for the link, the last serial refused. */
function confirmRows(
  { open, refused }: {
    open:
      | { serial: number; deadline: string | null; goesBackTo: number | null; changed: string[] }
      | null;
    refused: { serial: number; at: string } | null;
  },
): [string, string][] {
  const rows: [string, string][] = [];
  if (open) {
    const back = open.goesBackTo === null ? "what was held before" : `serial ${open.goesBackTo}`;
    rows.push([
      "unconfirmed",
      open.deadline === null
        ? `serial ${open.serial}: what can cut this node off is not applied yet; its window ` +
          `runs from the apply that reaches it (then back to ${back} unless confirmed)`
        : `serial ${open.serial} (${open.changed.join(", ") || "its apply did not end"}): goes ` +
          `back to ${back} at ${open.deadline} unless the broker answers a heartbeat`,
    ]);
  }
  if (refused) {
    rows.push(["refused", `serial ${refused.serial} at ${refused.at} (not confirmed in time)`]);
  }
  return rows;
}
