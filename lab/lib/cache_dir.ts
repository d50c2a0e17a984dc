/**
 * Where the lab caches what it builds once (base images, the lab's keys, repositories, host
 * builds): outside the repository, surviving runs. A module of its own so that the images
 * (base.ts) and the keys they carry (keys.ts) both read it and neither imports the other.
 */
export const CACHE_DIR: string = Deno.env.get("NOXLAB_CACHE_DIR") ??
  "/var/cache/nox-mesh-host-lab";
