/** podman or docker, as container runtimes: everything about this provider (os/provider.ts). */
import { posix } from "node:path";
import type { ProviderDescriptor } from "../provider.ts";
import { containerCli } from "./mod.ts";

/** The private directory, inside the state directory, for container env files. */
export const CONTAINER_ENV_DIR = "container-env";

/** The container runtime provider. */
export const PROVIDER: ProviderDescriptor<"containers"> = {
  folder: "container-cli",
  port: "containers",
  names: ["podman", "docker"],
  builds: ["every"],
  confine: { capability: "containers" },
  programs: {
    podman: { why: "container resources (podman, when installed); profile: podman info" },
    docker: { why: "container resources (docker, when installed); profile: docker version" },
  },
  reads: {
    "/run/docker.sock": "containers: docker's socket (running, not answering)",
    "/var/run/docker.sock": "containers: the same, older location",
  },
  open: ({ name, env, stateDir }) =>
    containerCli({
      program: name,
      env,
      envDir: posix.join(stateDir ?? "/var/lib/mesh-host", CONTAINER_ENV_DIR),
    }),
};
