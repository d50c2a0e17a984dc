/** `enrol --token -|--token-file FILE`: join the mesh once (src/link/enrol.ts). */
import { UsageError } from "../errors.ts";
import type { Command } from "./command.ts";
import { EXIT } from "./io.ts";

/** `enrol --token -` (stdin) or `enrol --token-file FILE`; never the token itself in argv. */
export const enrolCommand: Command = {
  name: "enrol",
  summary: "join the mesh with a one-time token (makes this node's own key)",
  usage: "enrol --token -|--token-file FILE  [--replace]",
  help: `Enrol this node with a one-time token from the control plane. The token names
the node, the broker's address, the broker's CA certificate and the SHA-256
fingerprint of its certificate (both checked before anything secret is sent), and
a one-time right to join, and the control plane's signing key, which this host then
trusts for every declaration (whoever holds that key holds root here). This host
makes its own key pair; the private seed is written to <state-dir>/node.nk (mode
0600) and never leaves the machine. It also makes its WireGuard key pair
(<state-dir>/wireguard.key, 0600, never sent; the public key is shown by
"inventory"). A running service picks the identity up within seconds.

Options:
  --token -          read the token from standard input (keeps it out of ps and /proc)
  --token-file FILE  read the token from FILE
                     (the token itself on the command line is refused: any local user
                     can read a command line from ps or /proc while enrol runs)
  --replace          enrol again although this node already has an identity (a new key;
                     a running service restarts itself within a heartbeat interval so
                     that its link uses the new key)
Exit codes: 0 enrolled, 64 usage or an unusable token, 69 the broker or control plane
  refused or cannot be reached (the message says which side and why), 70 store.
`,
  options: {
    token: { type: "string" },
    "token-file": { type: "string" },
    replace: { type: "boolean" },
  },
  positionals: [0, 0],
  // Long because: the command's steps in their order (where the token comes from, enrol, what is
  // said of each way it ends); each is a few lines.
  async run(ctx) {
    const given = ctx.values.token;
    const file = ctx.values["token-file"];
    if (typeof given === "string" && typeof file === "string") {
      throw new UsageError("give the token once: --token - (stdin) or --token-file FILE");
    }
    let token: string;
    if (typeof file === "string" && file !== "") {
      try {
        token = (await Deno.readTextFile(file)).trim();
      } catch (error) {
        throw new UsageError(
          `cannot read the token file ${file}: ${(error as Error).message}; ` +
            "give a readable file, or --token - to read the token from stdin",
        );
      }
    } else if (given === "-") {
      token = new TextDecoder().decode(await ctx.io.stdin()).trim();
    } else if (typeof given === "string" && given !== "") {
      throw new UsageError(
        "a token on the command line can be read by any local user (ps, /proc/<pid>/cmdline) " +
          "while enrol runs, so it was not used: give it on standard input " +
          "(nox-mesh-host enrol --token - < token.txt) or in a file readable only by root " +
          "(--token-file token.txt); where others can log in, make a new token, since this " +
          "one was visible for a moment",
      );
    } else {
      throw new UsageError(
        "give the enrolment token: --token - (read stdin) or --token-file FILE",
      );
    }
    if (token === "") throw new UsageError("the enrolment token is empty");
    const [{ openEngine, ensureOverlayKey }, { enrol, brokerList }] = await Promise.all([
      import("./_engine.ts"),
      import("./_link.ts"),
    ]);
    using host = await openEngine({ ...ctx.flags, providers: ctx.io.providers });
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
          brokers: identity.brokers,
        }) + "\n",
      );
    } else {
      ctx.io.stdout(
        `enrolled as ${identity.node} (key ${identity.publicKey}) with ${brokerList(identity)}\n` +
          `the service takes declarations from there; "status" shows the link\n`,
      );
    }
    return EXIT.ok;
  },
};
