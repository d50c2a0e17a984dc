import { apply, assertFile, json, run, type Scenario, writeFile } from "../lib/scenario.ts";

const MOTD = "hello from the nox-mesh-host lab\n";
const CONF = "key=value\n";

const declaration = (withConf: boolean) =>
  json({
    version: 1,
    resources: [
      {
        type: "directory",
        id: "demo-dir",
        path: "/srv/noxlab-demo",
        mode: "0755",
        owner: "root",
        group: "root",
      },
      {
        type: "file",
        id: "motd",
        path: "/srv/noxlab-demo/motd",
        content: MOTD,
        mode: "0644",
        owner: "root",
        group: "root",
      },
      ...(withConf
        ? [{
          type: "file",
          id: "conf",
          path: "/etc/noxlab-demo.conf",
          content: CONF,
          mode: "0600",
          owner: "root",
          group: "root",
        }]
        : []),
    ],
  });

/** The host from this checkout applies files and directories on a systemd machine. */
export const scenario: Scenario = {
  name: "apply-files",
  summary: "the host (installed from its .deb) applies files/directories on a systemd " +
    "machine; a second apply changes nothing; drift is restored; undeclared files go; a file outside the managed roots is refused",
  machines: {
    node1: {
      flavour: "systemd",
      host: true,
      files: {
        "/root/decl.json": declaration(true),
        "/root/decl-smaller.json": declaration(false),
        "/root/decl-outside.json": json({
          version: 1,
          resources: [{
            type: "file",
            id: "x",
            path: "/root/x",
            content: "",
            mode: "0644",
            owner: "root",
            group: "root",
          }],
        }),
      },
    },
  },
  steps: [
    apply("node1", "/root/decl.json", { outcome: "converged", changed: 3, failed: 0 }),
    assertFile("node1", "/srv/noxlab-demo", { type: "directory", mode: "0755" }),
    assertFile("node1", "/srv/noxlab-demo/motd", { content: MOTD, mode: "0644", owner: "root" }),
    assertFile("node1", "/etc/noxlab-demo.conf", { content: CONF, mode: "0600" }),
    apply("node1", "/root/decl.json", { outcome: "converged", changed: 0, unchanged: 3 }),
    writeFile("node1", "/srv/noxlab-demo/motd", "tampered\n"),
    run("node1", ["chmod", "0644", "/etc/noxlab-demo.conf"]),
    apply("node1", "/root/decl.json", { outcome: "converged", changed: 2, unchanged: 1 }),
    assertFile("node1", "/srv/noxlab-demo/motd", { content: MOTD, mode: "0644" }),
    assertFile("node1", "/etc/noxlab-demo.conf", { content: CONF, mode: "0600" }),
    apply("node1", "/root/decl-smaller.json", { outcome: "converged", removed: 1 }),
    assertFile("node1", "/etc/noxlab-demo.conf", { absent: true }),
    apply("node1", "/root/decl-outside.json", {
      outcome: "refused",
      errorIncludes: "outside the managed roots",
    }),
    assertFile("node1", "/root/x", { absent: true }),
  ],
};
