/**
 * The routes between the servers of a NATS cluster (the lab's in namespaces, the
 * stand-in's on loopback): TLS under the mesh's CA both ways, and route
 * authorisation with a password that is random per mesh. The `cluster` block itself is
 * written by lab/lib/nats_config.ts (`NatsCluster`): a certificate alone is not enough to
 * join, since a site's leaf server holds one from the same CA. (nats-server 2.9 can also
 * map a certificate to the route user, `verify_and_map`, one name for the whole cluster:
 * that would need a route-only name in every member's certificate; the password leaves
 * the certificates as they are.)
 */

/** The user the servers of a cluster log in as on each other's route port. */
export const ROUTE_USER = "route";

/** What a server needs to open a route to its peers and to accept theirs. */
export interface RouteCredentials {
  user: string;
  password: string;
}

/**
 * Fresh route credentials for one cluster: the user and a random password (hex, so
 * that it stands in a route URL as it is). Keep them with the mesh's state (0600).
 */
export function newRouteCredentials(): RouteCredentials {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return {
    user: ROUTE_USER,
    password: Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(""),
  };
}
