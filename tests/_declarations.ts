/** Resource builders shared by the declaration tests: a valid resource of each kind, with overrides. */

type Extra = Record<string, unknown>;

/** A valid file resource. */
export const file = (extra: Extra = {}): Extra => ({
  type: "file",
  id: "f",
  path: "/etc/example.conf",
  content: "x\n",
  mode: "0644",
  owner: "root",
  group: "root",
  ...extra,
});

/** A valid directory resource. */
export const directory = (extra: Extra = {}): Extra => ({
  type: "directory",
  id: "d",
  path: "/srv/data",
  mode: "0755",
  owner: "root",
  group: "root",
  ...extra,
});

/** A valid container resource. */
export const container = (extra: Extra = {}): Extra => ({
  type: "container",
  id: "c",
  name: "registry",
  image: `localhost/registry@sha256:${"a".repeat(64)}`,
  args: [],
  env: {},
  mounts: [],
  restart: "always",
  ...extra,
});
