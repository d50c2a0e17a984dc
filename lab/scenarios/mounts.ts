// mounts (issue 26): a tmpfs and a read-only bind mount, on a systemd machine (Debian, the
// .deb: .mount units) and an OpenRC machine (the tarball: OpenRC scripts in the boot
// runlevel). Applied and read back from the kernel's mount table; a bind unmounted by hand
// is mounted again; the machine is rebooted with the host's service not started, so what
// is mounted in the new boot is the init's doing alone (the tmpfs new and empty); the next
// apply fills it; dropped, what is inside goes first, then the mounts, then their
// directories and boot records.
import { apply, assertFile, json, run, type Scenario, type Step } from "../lib/scenario.ts";
import { fail, shown } from "../lib/_step.ts";
import { reboot } from "./_reboot.ts";

const owned = (type: string, id: string, path: string, extra: Record<string, unknown> = {}) => ({
  type,
  id,
  path,
  mode: type === "file" ? "0644" : "0755",
  owner: "root",
  group: "root",
  ...extra,
});

const MOUNTS = json({
  version: 1,
  resources: [
    owned("directory", "site", "/srv/site"),
    owned("file", "index", "/srv/site/index.html", { content: "<p>hello</p>\n" }),
    owned("directory", "www-dir", "/srv/www"),
    {
      type: "mount",
      id: "www",
      target: "/srv/www",
      source: "/srv/site",
      fstype: "bind",
      options: ["ro"],
    },
    owned("directory", "cache-dir", "/srv/cache"),
    {
      type: "mount",
      id: "cache",
      target: "/srv/cache",
      source: "lab-cache",
      fstype: "tmpfs",
      options: ["size=8m", "mode=0755"],
    },
    owned("file", "hello", "/srv/cache/hello", { content: "in the tmpfs\n" }),
  ],
});

/** The machine's mount table must (or must not) hold a line for `target` matching `pattern`. */
function assertMounted(machine: string, target: string, pattern: RegExp | null): Step {
  return {
    title: pattern
      ? `assert ${machine} has ${target} mounted: ${pattern}`
      : `assert ${machine} has nothing mounted at ${target}`,
    async run(ctx) {
      const r = await ctx.machine(machine).exec(["cat", "/proc/self/mountinfo"]);
      const line = r.stdout.split("\n").find((l) => l.split(" ")[4] === target);
      if (pattern === null) {
        if (line !== undefined) fail(`nothing at ${target}`, line);
      } else if (line === undefined || !pattern.test(line)) {
        fail(`a line matching ${pattern}`, shown(line ?? "none"));
      }
    },
  };
}

/** The init keeps both mounts for the next boot (the unit enabled, the script in boot). */
function assertKept(machine: string, flavour: "systemd" | "openrc", kept: boolean): Step[] {
  const names = flavour === "systemd"
    ? ["srv-www.mount", "srv-cache.mount"]
    : ["nox-mount-srv-www", "nox-mount-srv-cache"];
  return names.map((name): Step =>
    flavour === "systemd"
      ? kept
        ? run(machine, ["systemctl", "is-enabled", name], { stdoutIncludes: "enabled" })
        : assertFile(machine, `/etc/systemd/system/${name}`, { absent: true })
      : kept
      ? run(machine, ["test", "-L", `/etc/runlevels/boot/${name}`])
      : assertFile(machine, `/etc/init.d/${name}`, { absent: true })
  );
}

function steps(m: string, flavour: "systemd" | "openrc"): Step[] {
  const www = /^\d+ \d+ \S+ \/srv\/site \/srv\/www ro,nosuid,nodev/;
  const cache = /rw,nosuid,nodev,[a-z]+ .*- tmpfs lab-cache rw,.*size=8192k/;
  return [
    apply(m, "/root/decl-mounts.json", { outcome: "converged", changed: 7 }),
    assertMounted(m, "/srv/www", www),
    assertMounted(m, "/srv/cache", cache),
    ...assertKept(m, flavour, true),
    assertFile(m, "/srv/www/index.html", { content: "<p>hello</p>\n" }),
    run(m, ["sh", "-c", "! touch /srv/www/x 2>/dev/null"]),
    apply(m, "/root/decl-mounts.json", { outcome: "converged", unchanged: 7 }),
    run(m, ["umount", "/srv/www"]),
    apply(m, "/root/decl-mounts.json", { outcome: "converged", changed: 1, unchanged: 6 }),
    assertMounted(m, "/srv/www", www),
    ...(flavour === "systemd"
      ? [
        // The unit touched: systemd holds an older one until a reload (as after a crash
        // between the host's write and its daemon-reload); the apply reloads it.
        run(m, ["touch", "/etc/systemd/system/srv-cache.mount"]),
        run(m, ["systemctl", "show", "-p", "NeedDaemonReload", "srv-cache.mount"], {
          stdoutIncludes: "NeedDaemonReload=yes",
        }),
        apply(m, "/root/decl-mounts.json", { outcome: "converged", changed: 1, unchanged: 6 }),
        run(m, ["systemctl", "show", "-p", "NeedDaemonReload", "srv-cache.mount"], {
          stdoutIncludes: "NeedDaemonReload=no",
        }),
      ]
      : []),
    reboot(m, "the host's service is not started: what is mounted is the init's doing"),
    assertMounted(m, "/srv/www", www),
    assertMounted(m, "/srv/cache", cache),
    assertFile(m, "/srv/cache/hello", { absent: true }),
    ...(flavour === "systemd"
      ? [
        run(m, ["systemctl", "is-active", "srv-www.mount", "srv-cache.mount"]),
      ]
      : [
        run(m, ["rc-service", "nox-mount-srv-www", "status"]),
        run(m, ["rc-service", "nox-mount-srv-cache", "status"]),
      ]),
    apply(m, "/root/decl-mounts.json", { outcome: "converged", changed: 1, unchanged: 6 }),
    assertFile(m, "/srv/cache/hello", { content: "in the tmpfs\n" }),
    apply(m, "/root/decl-none.json", { outcome: "converged", removed: 7 }),
    assertMounted(m, "/srv/www", null),
    assertMounted(m, "/srv/cache", null),
    assertFile(m, "/srv/cache", { absent: true }),
    assertFile(m, "/srv/www", { absent: true }),
    ...assertKept(m, flavour, false),
  ];
}

export const scenario: Scenario = {
  name: "mounts",
  summary: "a tmpfs and a read-only bind on systemd (.mount units) and OpenRC (scripts in the " +
    "boot runlevel): applied and read back from the mount table; a bind unmounted by hand " +
    "mounted again; after a reboot with the host not started the init mounts both (the tmpfs " +
    "new and empty), the next apply fills it; dropped, what is inside goes first, then the " +
    "mounts, their directories and boot records",
  machines: {
    sd: {
      flavour: "systemd",
      host: true,
      files: {
        "/root/decl-mounts.json": MOUNTS,
        "/root/decl-none.json": json({ version: 1, resources: [] }),
      },
    },
    rc: {
      flavour: "openrc",
      host: true,
      files: {
        "/root/decl-mounts.json": MOUNTS,
        "/root/decl-none.json": json({ version: 1, resources: [] }),
      },
    },
  },
  steps: [...steps("sd", "systemd"), ...steps("rc", "openrc")],
};
