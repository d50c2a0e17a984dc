// Shared bits of the link scenarios (first-node, join, disconnected, isolation, self-upgrade).

/** A file resource under /srv. */
export function srvFile(id: string, path: string, content: string): Record<string, unknown> {
  return { type: "file", id, path, content, mode: "0644", owner: "root", group: "root" };
}

/** A declaration of files (node and serial are filled in by the control plane). */
export function files(...resources: Record<string, unknown>[]): Record<string, unknown> {
  return { version: 1, resources };
}
