// accounts (issue 26): a service runs as a system user the declaration makes, with a config
// file owned by it; the user's shell changed by hand and the user deleted by hand are
// repaired (back with the same uid); dropped, the user and its group are removed and what
// it wrote is kept. shadow's tools of the machine (the Debian build runs /usr/sbin/useradd …).
import {
  apply,
  assertFile,
  fail,
  json,
  run,
  type Scenario,
  type Step,
  waitFor,
} from "../lib/scenario.ts";

const UNIT_PATH = "/etc/systemd/system/noxlab-app.service";
const UNIT = `[Unit]
Description=nox-mesh-host lab: runs as the declared user app, copies its config
[Service]
User=app
Group=app
ExecStart=/bin/sh -c 'cat /etc/app/app.conf > /var/lib/app/seen; exec sleep infinity'
[Install]
WantedBy=multi-user.target
`;

const root = (type: string, id: string, path: string, extra: Record<string, unknown> = {}) => ({
  type,
  id,
  path,
  mode: "0755",
  owner: "root",
  group: "root",
  ...extra,
});

function declaration(running: boolean): string {
  const service = {
    type: "service",
    id: "app",
    name: "noxlab-app",
    enabled: running,
    running,
  };
  const unit = root("file", "app-unit", UNIT_PATH, { mode: "0644", content: UNIT });
  if (!running) return json({ version: 1, resources: [unit, service] });
  return json({
    version: 1,
    resources: [
      { type: "group", id: "app-group", name: "app", system: true },
      {
        type: "user",
        id: "app-user",
        name: "app",
        group: "app",
        system: true,
        home: "/var/lib/app",
        shell: "/usr/sbin/nologin",
        password: "locked",
      },
      root("directory", "app-home", "/var/lib/app", { mode: "0750", owner: "app", group: "app" }),
      root("directory", "app-etc", "/etc/app"),
      root("file", "app-conf", "/etc/app/app.conf", {
        mode: "0640",
        group: "app",
        content: "greeting = hello\n",
      }),
      unit,
      { ...service, restartOn: ["app-conf", "app-unit"] },
    ],
  });
}

/** The uid the host gave "app" first: it must come back with it. */
let firstUid = "";

function passwdLine(expect: RegExp, title: string, remember = false): Step {
  return {
    title,
    async run(ctx) {
      const r = await ctx.machine("node").exec(["getent", "passwd", "app"]);
      const line = r.stdout.trim();
      if (!expect.test(line)) fail(`a passwd line matching ${expect}`, line || "none");
      const uid = line.split(":")[2];
      if (remember) firstUid = uid;
      else if (uid !== firstUid) fail(`uid ${firstUid} (recorded)`, `uid ${uid}`);
    },
  };
}

export const scenario: Scenario = {
  name: "accounts",
  summary: "a service runs as a declared system user with a config file it owns; its shell " +
    "changed by hand and the user deleted by hand are repaired (the same uid); dropped, the " +
    "user and its group are removed and what it wrote is kept",
  machines: {
    node: {
      flavour: "systemd",
      host: true,
      files: {
        "/root/decl-app.json": declaration(true),
        "/root/decl-dropped.json": declaration(false),
      },
    },
  },
  steps: [
    apply("node", "/root/decl-app.json", { outcome: "converged", changed: 7 }),
    passwdLine(
      /^app:x:\d+:\d+::\/var\/lib\/app:\/usr\/sbin\/nologin$/,
      "app is a system user",
      true,
    ),
    waitFor(
      {
        title: "the service, running as app, read its config into its home",
        async run(ctx) {
          const r = await ctx.machine("node").exec(["stat", "-c", "%U %G", "/var/lib/app/seen"]);
          if (r.stdout.trim() !== "app app") fail("/var/lib/app/seen owned by app", r.stdout);
        },
      },
      20,
    ),
    assertFile("node", "/var/lib/app/seen", { owner: "app", content: "greeting = hello\n" }),
    apply("node", "/root/decl-app.json", { outcome: "converged", unchanged: 7 }),
    run("node", ["usermod", "--shell", "/bin/bash", "app"]),
    apply("node", "/root/decl-app.json", { outcome: "converged", changed: 1 }),
    passwdLine(/:\/usr\/sbin\/nologin$/, "app's shell is nologin again"),
    run("node", ["systemctl", "stop", "noxlab-app"]),
    run("node", ["userdel", "app"]),
    apply("node", "/root/decl-app.json", { outcome: "converged", changed: 3 }),
    passwdLine(/^app:x:/, "app is back, with the uid the host recorded"),
    assertFile("node", "/var/lib/app/seen", { owner: "app", group: "app" }),
    apply("node", "/root/decl-dropped.json", { outcome: "converged", removed: 4, forgotten: 1 }),
    run("node", ["sh", "-c", "! getent passwd app && ! getent group app"]),
    {
      title: "what app wrote is kept, owned by its old uid",
      async run(ctx) {
        const r = await ctx.machine("node").exec(["stat", "-c", "%u", "/var/lib/app/seen"]);
        if (r.stdout.trim() !== firstUid) fail(`owner ${firstUid}`, r.stdout || r.stderr);
      },
    },
    assertFile("node", "/etc/app/app.conf", { absent: true }),
  ],
};
