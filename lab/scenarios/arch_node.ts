import {
  apply,
  assertFile,
  assertPackage,
  assertUnit,
  fail,
  json,
  run,
  type Scenario,
  type Step,
  waitFor,
} from "../lib/scenario.ts";

const IMAGE = "localhost/lab/busybox";
const SERVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"];

const UNIT = `[Unit]
Description=nox-mesh-host lab: says hello every second
[Service]
ExecStart=/bin/sh -c 'while :; do /usr/bin/noxlab-hello > /run/noxlab-hello.out; sleep 1; done'
[Install]
WantedBy=multi-user.target
`;

/** The declaration of this scenario, for an image digest known only once imported. */
function declaration(digest: string, containerArgs: string[] = SERVE): string {
  return json({
    version: 1,
    resources: [
      { type: "package", id: "hello", name: "noxlab-hello" },
      {
        type: "file",
        id: "hello-unit",
        path: "/etc/systemd/system/noxlab-hello.service",
        content: UNIT,
        mode: "0644",
        owner: "root",
        group: "root",
      },
      { type: "service", id: "hello-svc", name: "noxlab-hello", enabled: true, running: true },
      {
        type: "container",
        id: "web",
        name: "noxlab-web",
        image: `${IMAGE}@${digest}`,
        args: containerArgs,
        env: { ROLE: "lab" },
        mounts: [],
        restart: "no",
      },
    ],
  });
}

/**
 * Imports a busybox-static root (the lab host's /bin/busybox) into the machine's podman,
 * then writes the declaration (and a variant with other container args) with its real digest.
 */
function importImageAndDeclare(machine: string): Step {
  return {
    title: `import ${IMAGE}:1 into podman on ${machine}; write /root/decl.json with its digest`,
    async run(ctx) {
      const m = ctx.machine(machine);
      await m.copyIn("/bin/busybox", "/root/image/bin/busybox", "0755");
      await m.exec([
        "/bin/sh",
        "-c",
        'cd /root/image/bin && for a in sh sleep; do ln -sf busybox "$a"; done && ' +
        "tar -C /root/image -cf /root/image.tar . && " +
        `podman import --quiet /root/image.tar ${IMAGE}:1 >/dev/null`,
      ], { check: true });
      const r = await m.exec([
        "podman",
        "image",
        "inspect",
        "--format",
        "{{.Digest}}",
        `${IMAGE}:1`,
      ], {
        check: true,
      });
      const digest = r.stdout.trim();
      if (!/^sha256:[a-f0-9]{64}$/.test(digest)) fail("an image digest", r.stdout);
      await m.writeFile("/root/decl.json", declaration(digest));
      await m.writeFile(
        "/root/decl-changed.json",
        declaration(digest, ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 2; done"]),
      );
      await m.writeFile("/root/decl-empty.json", json({ version: 1, resources: [] }));
    },
  };
}

/** Asserts the container runs and carries the host's labels. */
function assertContainer(machine: string, name: string): Step {
  return {
    title: `assert container ${name} on ${machine} runs with the host's labels`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec([
        "podman",
        "container",
        "inspect",
        "--format",
        '{{.State.Running}} {{index .Config.Labels "nox-mesh-host.owner"}}',
        name,
      ]);
      if (r.stdout.trim() !== "true nox-mesh-host") {
        fail("running, labelled nox-mesh-host.owner=nox-mesh-host", `${r.stdout}${r.stderr}`);
      }
    },
  };
}

/** A systemd machine with pacman and podman: package, file, service and container in one declaration. */
export const scenario: Scenario = {
  name: "arch-node",
  summary: "a systemd machine gets a package (pacman, lab repo), a unit file, its service and " +
    "a podman container from one declaration; re-apply is a no-op; drift is restored",
  machines: { arch: { flavour: "systemd", hostFrom: "pacman", host: true, containers: true } },
  steps: [
    run("arch", ["nox-mesh-host", "profile", "--json"], {
      stdoutIncludes: '"containers":{"state":"working","provider":"podman"',
    }),
    importImageAndDeclare("arch"),
    apply("arch", "/root/decl.json", { outcome: "converged", changed: 4, failed: 0 }),
    assertPackage("arch", "noxlab-hello", { version: "1.1-1" }),
    assertFile("arch", "/etc/systemd/system/noxlab-hello.service", { content: UNIT, mode: "0644" }),
    assertUnit("arch", "noxlab-hello", { enabled: true, running: true }),
    waitFor(assertFile("arch", "/run/noxlab-hello.out", { content: "noxlab-hello 1.1-1\n" }), 20),
    assertContainer("arch", "noxlab-web"),
    apply("arch", "/root/decl.json", { outcome: "converged", changed: 0, unchanged: 4 }),
    run("arch", ["systemctl", "stop", "noxlab-hello"]),
    run("arch", ["podman", "rm", "--force", "--time", "0", "noxlab-web"]),
    apply("arch", "/root/decl.json", { outcome: "converged", changed: 2, unchanged: 2 }),
    assertUnit("arch", "noxlab-hello", { running: true }),
    assertContainer("arch", "noxlab-web"),
    apply("arch", "/root/decl-changed.json", { outcome: "converged", changed: 1, unchanged: 3 }),
    assertContainer("arch", "noxlab-web"),
    apply("arch", "/root/decl-empty.json", { outcome: "converged", removed: 2, forgotten: 2 }),
    run("arch", ["podman", "container", "exists", "noxlab-web"], { code: 1 }),
    assertPackage("arch", "noxlab-hello", { version: "1.1-1" }),
    assertFile("arch", "/etc/systemd/system/noxlab-hello.service", { absent: true }),
  ],
};
