/** What the container runtime adapter needs from a permission set (packaging/<os>/permissions). */
import type { AdapterNeeds } from "../needs.ts";

/** podman's and docker's programs and paths. */
export const NEEDS: AdapterNeeds = {
  run: {
    podman: "containers: container inspect, create, start, restart, rm --force; profile: info",
    docker: "the same verbs as podman; profile: version",
  },
  read: {
    "/run/docker.sock": "containers: docker's daemon socket (running, not answering)",
    "/var/run/docker.sock": "containers: the same, older location",
  },
};
