/** `status`: identity, the current declaration, the last apply, what is held. */
import { META } from "../store/meta.ts";
import type { Command } from "./command.ts";
import { EXIT } from "./io.ts";

/** `status`. */
export const statusCommand: Command = {
  name: "status",
  summary: "show identity, the current declaration, the last apply and what is held",
  usage: "status",
  help: `Show what this node's store says: its identity, the declaration it holds the
machine to, the last apply and its outcome, how many resources it holds, whether
the service runs, the link's state and last error, and the next drift check.
Reads the store only; changes nothing.
Exit codes: 0 shown, 70 the store cannot be opened, 78 configuration.
`,
  options: {},
  positionals: [0, 0],
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
      held: store.heldCount(),
      ...linkStatus(store),
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
          ? `#${last.id} ${last.outcome} at ${
            last.endedAt ?? last.startedAt
          }: ${last.counts.changed} changed, ` +
            `${last.counts.unchanged} unchanged, ${last.counts.removed} removed, ${last.counts.failed} failed` +
            (last.error ? `\n${" ".repeat(13)}${last.error}` : "")
          : "none yet",
      ],
      ["held", `${status.held} resources`],
      ...linkRows(status),
    ];
    ctx.io.stdout(rows.map(([k, v]) => `${k.padEnd(13)}${v}\n`).join(""));
    return EXIT.ok;
  },
};
