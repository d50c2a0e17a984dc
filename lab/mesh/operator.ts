/**
 * The mesh's broker in NATS's operator mode (DESIGN.md §20, issue 35, item 1): the
 * accounts and users as JWTs, minted with npm `@nats-io/jwt` and `@nats-io/nkeys`, and
 * the server configuration that trusts them. Nothing about a node is in any server's
 * configuration: a user JWT minted at any time connects at once, an account JWT pushed
 * through the system account (`$SYS.REQ.CLAIMS.UPDATE`) is taken live by every server
 * (a NATS-based full resolver), and a revocation is an account JWT pushed again.
 *
 * The layout:
 * - `SYS`: the system account (its user pushes account JWTs).
 * - `CONTROL`: the control plane's user, the JetStream streams (limits -1: an account
 *   JWT without them takes no connection and has no JetStream, LAB-NOTES.md), and public
 *   exports of what nodes use, each one wildcard for every node: their reports,
 *   inventories, heartbeats and object reads (services), the catch-up direct get of a
 *   declaration (a service), and where a stored declaration is republished (a stream).
 * - `NODES`: every node, a user of this one account whose JWT permits only its own
 *   subjects (`nodeUserClaims`); it imports each of CONTROL's exports once, for all nodes
 *   (the account JWT does not grow with the fleet). The catch-up direct get is imported
 *   under the node's own subject, `mesh.node.<node>.decl`: a JetStream API subject never
 *   crosses a leaf connection (nats-server denies `$JS.API.>` there), a node's own does.
 *   Its revocation list holds the revoked nodes; a site's leaf logs in as a user of a
 *   signing key scoped to that site (`siteScope`): the scope lists the site's nodes'
 *   subjects, and a change of it makes every server close that leaf's connection, which
 *   reconnects under the new scope.
 * - `JOIN`: each token's one-time join key, a user with only its enrolment subject and
 *   its own inbox, expiring with the token; used ones are revoked.
 *
 * Not yet wired into the stand-in control plane (lab/mesh/control.ts still renders the
 * accounts into auth.conf): tests/operator_mode_test.ts holds nats-server 2.9.10 to each
 * property this layout relies on.
 */
import {
  type Account,
  encodeAccount,
  encodeOperator,
  encodeUser,
  type Export,
  fmtCreds,
  type Import,
  type User,
} from "@nats-io/jwt";
import { createAccount, createOperator, createUser, fromSeed, type KeyPair } from "@nats-io/nkeys";
import { DECLARATION_STREAM, NODE_LIMITS } from "../../src/link/subjects.ts";

/** The seeds of the operator, the accounts and the control plane's and system's users. */
export interface OperatorSeeds {
  operator: string;
  sys: string;
  control: string;
  nodes: string;
  join: string;
  sysUser: string;
  controlUser: string;
  /** A signing key of NODES per site (its leaf logs in as a user it signed, in its scope). */
  sites: Record<string, string>;
}

const text = (seed: Uint8Array) => new TextDecoder().decode(seed);
const pair = (seed: string): KeyPair => fromSeed(new TextEncoder().encode(seed));

/** Fresh keys for a mesh in operator mode (kept 0600 with the control plane's state). */
export function newOperatorSeeds(): OperatorSeeds {
  return {
    operator: text(createOperator().getSeed()),
    sys: text(createAccount().getSeed()),
    control: text(createAccount().getSeed()),
    nodes: text(createAccount().getSeed()),
    join: text(createAccount().getSeed()),
    sysUser: text(createUser().getSeed()),
    controlUser: text(createUser().getSeed()),
    sites: {},
  };
}

/** Where a node's declaration is republished once stored (the stream's `republish`). */
export const PUSH_SUBJECTS = { all: "mesh.push.*", node: (n: string) => `mesh.push.${n}` };

/**
 * The republish of the declaration stream: every declaration stored for `mesh.decl.<n>` is
 * sent again, once stored, on `mesh.push.<n>` with headers naming the stream, the stored
 * subject and its sequence (`Nats-Stream`, `Nats-Subject`, `Nats-Sequence`): a node's
 * plain subscription gets it, and tells it from anything else sent there.
 */
export const DECLARATION_REPUBLISH = { src: "mesh.decl.*", dest: "mesh.push.{{wildcard(1)}}" };

/** The subjects a node asks on for its own catch-up: imported as the declaration's direct get. */
export const CATCH_UP = {
  all: "mesh.node.*.decl",
  node: (n: string) => `mesh.node.${n}.decl`,
  /** What it is in CONTROL: the direct get of the node's stored declaration. */
  remote: `$JS.API.DIRECT.GET.${DECLARATION_STREAM}.mesh.decl.*`,
};

/** What NODES imports from CONTROL (and CONTROL exports), one wildcard each. */
const NODE_SERVICES = [
  "mesh.node.*.report",
  "mesh.node.*.inventory",
  "mesh.node.*.heartbeat",
  "mesh.node.*.obj.>",
];

/** Unlimited, as an account JWT must say (without it an account takes no connection). */
const NO_LIMITS = {
  subs: -1,
  data: -1,
  payload: -1,
  conn: -1,
  leaf: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
};

/** Unlimited JetStream, for the account that holds the streams. */
const JETSTREAM = { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 };

/** The public keys of the layout. */
export function publicKeys(seeds: OperatorSeeds) {
  return {
    operator: pair(seeds.operator).getPublicKey(),
    sys: pair(seeds.sys).getPublicKey(),
    control: pair(seeds.control).getPublicKey(),
    nodes: pair(seeds.nodes).getPublicKey(),
    join: pair(seeds.join).getPublicKey(),
  };
}

/** The operator's JWT, naming the system account. */
export function operatorJwt(seeds: OperatorSeeds): Promise<string> {
  const op = pair(seeds.operator);
  return encodeOperator("nox-mesh", op, { system_account: publicKeys(seeds).sys });
}

/** A site's scope: what its leaf may carry, its nodes' own subjects only. */
export function siteScope(nodes: readonly string[]): Partial<User> {
  return {
    pub: { allow: nodes.map((n) => `mesh.node.${n}.>`) },
    sub: { allow: nodes.flatMap((n) => [PUSH_SUBJECTS.node(n), `_INBOX.${n}.>`]) },
    allowed_connection_types: ["LEAFNODE"],
  };
}

/** What the account JWTs say at one moment (revocations, sites' scopes). */
export interface AccountState {
  /** Revoked node user keys (public) and when (seconds since the epoch). */
  revokedNodes?: Record<string, number>;
  /** Used or withdrawn join keys and when. */
  revokedJoins?: Record<string, number>;
  /** Each site's nodes (its scoped signing key's template). */
  sites?: Record<string, string[]>;
}

/** Every account's JWT (SYS, CONTROL, NODES, JOIN) for `state`, signed by the operator. */
export async function accountJwts(
  seeds: OperatorSeeds,
  state: AccountState = {},
): Promise<Record<"sys" | "control" | "nodes" | "join", string>> {
  const op = pair(seeds.operator);
  const keys = publicKeys(seeds);
  const exports: Export[] = [
    ...NODE_SERVICES.map((subject): Export => ({ name: subject, subject, type: "service" })),
    { name: "catch-up", subject: CATCH_UP.remote, type: "service" },
    { name: "enrolment", subject: "mesh.enrol.*.*", type: "service" },
    { name: "pushes", subject: PUSH_SUBJECTS.all, type: "stream" },
  ];
  const imports: Import[] = [
    ...NODE_SERVICES.map((subject): Import => ({
      name: subject,
      subject,
      account: keys.control,
      type: "service",
    })),
    // The catch-up: asked on the node's own subject, answered by the direct get.
    {
      name: "catch-up",
      subject: CATCH_UP.remote,
      local_subject: CATCH_UP.all,
      account: keys.control,
      type: "service",
    },
    { name: "pushes", subject: PUSH_SUBJECTS.all, account: keys.control, type: "stream" },
  ];
  const siteKeys = Object.keys(state.sites ?? {}).sort().map((site) => {
    const signer = pair(seeds.sites[site]);
    return {
      kind: "user_scope" as const,
      key: signer.getPublicKey(),
      role: `site-${site}`,
      template: siteScope(state.sites![site]),
    };
  });
  const sign = (name: string, seed: string, account: Partial<Account>) =>
    encodeAccount(name, pair(seed), account, { signer: op });
  return {
    sys: await sign("SYS", seeds.sys, { limits: NO_LIMITS }),
    control: await sign("CONTROL", seeds.control, {
      limits: { ...NO_LIMITS, ...JETSTREAM },
      exports,
    }),
    nodes: await sign("NODES", seeds.nodes, {
      limits: { ...NO_LIMITS, payload: NODE_LIMITS.maxPayload },
      imports,
      ...(siteKeys.length ? { signing_keys: siteKeys } : {}),
      ...(state.revokedNodes ? { revocations: state.revokedNodes } : {}),
    }),
    join: await sign("JOIN", seeds.join, {
      limits: { ...NO_LIMITS, payload: 4096 },
      imports: [{
        name: "enrolment",
        subject: "mesh.enrol.*.*",
        account: keys.control,
        type: "service",
      }],
      ...(state.revokedJoins ? { revocations: state.revokedJoins } : {}),
    }),
  };
}

/** The claims of node `node`'s user: its own subjects and nothing else. */
export function nodeUserClaims(node: string): Partial<User> {
  return {
    pub: { allow: [`mesh.node.${node}.>`] },
    sub: { allow: [PUSH_SUBJECTS.node(node), `_INBOX.${node}.>`] },
    subs: 100,
    payload: NODE_LIMITS.maxPayload,
    allowed_connection_types: ["STANDARD"],
  };
}

/** Node `node`'s user JWT for its public key `userKey` (signed by NODES). */
export function nodeUserJwt(seeds: OperatorSeeds, node: string, userKey: string): Promise<string> {
  return encodeUser(node, userKey, pair(seeds.nodes), nodeUserClaims(node));
}

/** A join key's user JWT: ask to enrol `node` on its own subject, hear on `_JOIN.<key>`. */
export function joinUserJwt(
  seeds: OperatorSeeds,
  node: string,
  joinKey: string,
  expires: Date,
): Promise<string> {
  return encodeUser(`join ${node}`, joinKey, pair(seeds.join), {
    pub: { allow: [`mesh.enrol.${node}.${joinKey}`] },
    sub: { allow: [`_JOIN.${joinKey}.>`] },
    payload: 4096,
    allowed_connection_types: ["STANDARD"],
  }, { exp: Math.floor(expires.getTime() / 1000) });
}

/** The control plane's user (CONTROL) and the system's (SYS), as creds files' text. */
export async function serviceCreds(
  seeds: OperatorSeeds,
): Promise<{ control: string; sys: string }> {
  const control = pair(seeds.controlUser);
  const sys = pair(seeds.sysUser);
  return {
    control: text(
      fmtCreds(await encodeUser("control plane", control, pair(seeds.control)), control),
    ),
    sys: text(fmtCreds(await encodeUser("system", sys, pair(seeds.sys)), sys)),
  };
}

/**
 * The creds of site `site`'s leaf: a user of NODES signed by the site's scoped key (so
 * its permissions are the scope's, changed with the account JWT), and its seed.
 */
export async function siteLeafCreds(seeds: OperatorSeeds, site: string): Promise<string> {
  seeds.sites[site] ??= text(createAccount().getSeed());
  const user = createUser();
  const jwt = await encodeUser(`site ${site}`, user, publicKeys(seeds).nodes, {}, {
    signer: pair(seeds.sites[site]),
    scopedUser: true,
  });
  return text(fmtCreds(jwt, user));
}

/**
 * The lines of a server's configuration for operator mode: the operator, the system
 * account, a NATS-based full resolver keeping JWTs in `dir` (each server its own), and
 * every account preloaded (a newer JWT pushed later is kept over a preload: nats-server
 * stores a preload only when newer).
 */
export async function operatorConfig(
  seeds: OperatorSeeds,
  dir: string,
  state: AccountState = {},
  { resolver = "full" }: { resolver?: "full" | "memory" } = {},
): Promise<string> {
  const keys = publicKeys(seeds);
  const jwts = await accountJwts(seeds, state);
  const preload = [
    [keys.sys, jwts.sys],
    [keys.control, jwts.control],
    [keys.nodes, jwts.nodes],
    [keys.join, jwts.join],
  ].map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`).join("\n");
  return [
    `operator: ${JSON.stringify(await operatorJwt(seeds))}`,
    `system_account: ${JSON.stringify(keys.sys)}`,
    resolver === "full"
      ? `resolver: { type: full, dir: ${JSON.stringify(dir)}, allow_delete: false, interval: "2m" }`
      : "resolver: MEMORY",
    `resolver_preload: {\n${preload}\n}`,
    "",
  ].join("\n");
}
