/**
 * One container runtime adapter over the podman or docker command line (they
 * share these verbs): inspect, create (with labels) then start, start, rm -f.
 * The image must be pinned by digest; the adapter refuses anything else.
 */
import type { ContainerInfo, ContainerRuntime, ContainerSpec } from "../../src/ports.ts";
import { mustRun, programFailed, refuseOption, runProgram, type RunVia } from "../_run.ts";

/** Which CLI, and its environment (e.g. CONTAINERS_CONF for podman). */
export interface ContainerCliOptions {
  /** "podman" or "docker" (or a path to either). */
  program: string;
  /** Extra environment, and an argv prefix to run the tool elsewhere (tests: a lab machine). */
  env?: Record<string, string>;
  via?: readonly string[];
}

const PINNED = /@sha256:[a-f0-9]{64}$/;

/**
 * Create the container runtime adapter.
 *
 * @example
 * ```ts
 * const runtime = containerCli({ program: "podman" });
 * await runtime.inspect("registry"); // null when there is no such container
 * ```
 */
export function containerCli(options: ContainerCliOptions): ContainerRuntime {
  const { program } = options;
  const run: RunVia = { env: options.env, via: options.via };
  const name = program.slice(program.lastIndexOf("/") + 1);
  return {
    name,

    async inspect(container: string): Promise<ContainerInfo | null> {
      refuseOption("container name", container);
      const r = await runProgram([program, "container", "inspect", container], run);
      if (r.code !== 0) {
        if (/no such (container|object)/i.test(r.stderr)) return null;
        throw programFailed(r);
      }
      return parseInspect(r.stdout, container);
    },

    async create(spec: ContainerSpec): Promise<void> {
      await mustRun([program, ...createArgs(spec)], run);
      await mustRun([program, "start", spec.name], run);
    },

    async start(container: string): Promise<void> {
      refuseOption("container name", container);
      await mustRun([program, "start", container], run);
    },

    async remove(container: string): Promise<void> {
      refuseOption("container name", container);
      await mustRun([program, "rm", "--force", container], run);
    },
  };
}

/** The arguments of `<runtime> create` for a spec (labels, env, mounts, restart, then image and args). */
export function createArgs(spec: ContainerSpec): string[] {
  refuseOption("container name", spec.name);
  if (!PINNED.test(spec.image)) {
    throw new TypeError(`image "${spec.image}" is not pinned by digest (…@sha256:<64 hex>)`);
  }
  for (const m of spec.mounts) {
    if (`${m.source}${m.target}`.includes(",")) {
      throw new TypeError(`mount ${m.source}:${m.target} has a comma, which --mount cannot carry`);
    }
  }
  const labels = Object.entries(spec.labels).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
  return [
    "create",
    "--name",
    spec.name,
    ...labels.flatMap(([k, v]) => ["--label", `${k}=${v}`]),
    ...Object.entries(spec.env).flatMap(([k, v]) => ["--env", `${k}=${v}`]),
    ...spec.mounts.flatMap((m) => [
      "--mount",
      `type=bind,source=${m.source},target=${m.target}${m.readOnly ? ",readonly" : ""}`,
    ]),
    "--restart",
    spec.restart,
    "--",
    spec.image,
    ...spec.args,
  ];
}

interface InspectRecord {
  Name?: string;
  Image?: string;
  ImageName?: string;
  Config?: { Image?: string; Labels?: Record<string, string> | null };
  State?: { Running?: boolean; Status?: string };
}

/** Parse `<runtime> container inspect NAME` (a JSON array of one object; podman or docker). */
export function parseInspect(stdout: string, container: string): ContainerInfo | null {
  const records = JSON.parse(stdout) as InspectRecord[];
  const record = records.find((r) => (r.Name ?? "").replace(/^\//, "") === container);
  if (!record) return null;
  return {
    name: container,
    image: record.ImageName ?? record.Config?.Image ?? record.Image ?? "",
    running: record.State?.Running === true,
    status: record.State?.Status ?? "unknown",
    labels: { ...(record.Config?.Labels ?? {}) },
  };
}
