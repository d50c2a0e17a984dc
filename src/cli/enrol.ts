/** `enrol --token T`: join the mesh once (src/link/enrol.ts). */
import { UsageError } from "../errors.ts";
import { openHost } from "../host.ts";
import { ensureOverlayKey } from "../overlay_key.ts";
import type { Command } from "./command.ts";
import { EXIT } from "./io.ts";

/** `enrol --token T|-`. */
export const enrolCommand: Command = {
  name: "enrol",
  summary: "join the mesh with a one-time token (makes this node's own key)",
  usage: "enrol --token TOKEN|-  [--replace]",
  help: `Enrol this node with a one-time token from the control plane. The token names
the node, the broker's address, the broker's CA certificate and the SHA-256
fingerprint of its certificate (both checked before anything secret is sent), and
a one-time right to join. This host makes its own key pair; the private seed is
written to <state-dir>/node.nk (mode 0600) and never leaves the machine. It also
makes its WireGuard key pair (<state-dir>/wireguard.key, 0600, never sent; the
public key is shown by "inventory"). A running service picks the identity up
within seconds.

Options:
  --token TOKEN   the token ("-" reads it from standard input, which keeps it out of ps)
  --replace       enrol again although this node already has an identity (a new key;
                  restart a running service afterwards so its link uses the new key)
Exit codes: 0 enrolled, 64 usage or an unusable token, 69 the broker or control plane
  refused or cannot be reached (the message says which side and why), 70 store.
`,
  options: { token: { type: "string" }, replace: { type: "boolean" } },
  positionals: [0, 0],
  async run(ctx) {
    const given = ctx.values.token;
    if (typeof given !== "string" || given === "") {
      throw new UsageError("give the enrolment token: --token TOKEN (or --token - to read stdin)");
    }
    const token = given === "-" ? new TextDecoder().decode(await ctx.io.stdin()).trim() : given;
    using host = await openHost({ ...ctx.flags, providers: ctx.io.providers });
    const { enrol } = await import("../link/enrol.ts");
    const identity = await enrol(host, token, {
      replace: ctx.values.replace === true,
      log: ctx.json ? undefined : (line) => ctx.io.stderr(`enrol: ${line}\n`),
    });
    // The overlay's key pair, so the control plane can read its public half from the
    // inventory before it declares this node's overlay (the first declaration).
    const overlayKey = await ensureOverlayKey(host.config.stateDir);
    if (ctx.json) {
      ctx.io.stdout(
        JSON.stringify({
          outcome: "enrolled",
          node: identity.node,
          publicKey: identity.publicKey,
          wireguardPublicKey: overlayKey.publicKey,
          url: identity.url,
          pin: identity.pin,
        }) + "\n",
      );
    } else {
      ctx.io.stdout(
        `enrolled as ${identity.node} (key ${identity.publicKey}) with ${identity.url}\n` +
          `the service takes declarations from there; "status" shows the link\n`,
      );
    }
    return EXIT.ok;
  },
};
