// restart-on-change (issue 13, DESIGN.md §19): a service named with `restartOn` is restarted
// when its config file or its unit file changed in the apply, and only then; the new process
// is proven by systemd's InvocationID, which this scenario reads itself.
import {
  apply,
  assertFile,
  fail,
  json,
  run,
  type Scenario,
  type Step,
  waitFor,
  writeFile,
} from "../lib/scenario.ts";

const CONF = "/etc/noxlab-echo.conf";
const UNIT_PATH = "/etc/systemd/system/noxlab-echo.service";
const SEEN = "/run/noxlab-echo.seen";

/** A tiny service that reads its config once, at start, and says what it read. */
const unit = (label: string) =>
  `[Unit]
Description=nox-mesh-host lab: reads ${CONF} at start (${label})
[Service]
ExecStart=/bin/sh -c 'printf "%%s %%s\\\\n" "${label}" "$$(cat ${CONF})" > ${SEEN}; exec sleep infinity'
[Install]
WantedBy=multi-user.target
`;

function declaration(greeting: string, label: string): string {
  const file = (id: string, path: string, content: string) => ({
    type: "file",
    id,
    path,
    content,
    mode: "0644",
    owner: "root",
    group: "root",
  });
  return json({
    version: 1,
    resources: [
      file("echo-conf", CONF, `${greeting}\n`),
      file("echo-unit", UNIT_PATH, unit(label)),
      {
        type: "service",
        id: "echo",
        name: "noxlab-echo",
        enabled: true,
        running: true,
        restartOn: ["echo-conf", "echo-unit"],
      },
    ],
  });
}

/** InvocationIDs seen so far, by label. */
const seen = new Map<string, string>();

/** Reads the unit's InvocationID and checks it is new (`fresh`) or the one read as `same`. */
function invocation(label: string, expect: { fresh: true } | { same: string }): Step {
  return {
    title: `InvocationID of noxlab-echo (${label}): ${
      "fresh" in expect ? "a new process" : `the same as "${expect.same}"`
    }`,
    async run(ctx) {
      const r = await ctx.machine("node").exec(
        ["systemctl", "show", "-p", "InvocationID", "--value", "noxlab-echo"],
        { check: true },
      );
      const id = r.stdout.trim();
      if (!/^[0-9a-f]{32}$/.test(id)) fail("an InvocationID", r.stdout);
      if ("fresh" in expect) {
        const old = [...seen.entries()].find(([, v]) => v === id);
        if (old) fail("a new InvocationID", `the one of "${old[0]}" (${id})`);
      } else if (seen.get(expect.same) !== id) {
        fail(`InvocationID ${seen.get(expect.same)}`, id);
      }
      seen.set(label, id);
    },
  };
}

/** A systemd machine with the packaged host: restart on a config change and a unit change. */
export const scenario: Scenario = {
  name: "restart-on-change",
  summary: "a service with restartOn is restarted when its config file changed (it reads the " +
    "new one) and when its unit changed; an unchanged apply restarts nothing (same InvocationID)",
  machines: { node: { flavour: "systemd", host: true } },
  steps: [
    {
      title: "forget InvocationIDs of an earlier run",
      run: () => Promise.resolve(seen.clear()),
    },
    writeFile("node", "/root/one.json", declaration("greeting=one", "v1")),
    writeFile("node", "/root/two.json", declaration("greeting=two", "v1")),
    writeFile("node", "/root/three.json", declaration("greeting=two", "v2")),
    apply("node", "/root/one.json", { outcome: "converged", changed: 3 }),
    waitFor(assertFile("node", SEEN, { content: "v1 greeting=one\n" }), 20),
    invocation("first", { fresh: true }),
    apply("node", "/root/one.json", { outcome: "converged", changed: 0, unchanged: 3 }),
    invocation("unchanged", { same: "first" }),
    run("node", ["/bin/sh", "-c", "exec nox-mesh-host plan - < /root/two.json"], {
      stdoutIncludes: "restart (echo-conf changed)",
    }),
    invocation("after plan", { same: "first" }),
    apply("node", "/root/two.json", { outcome: "converged", changed: 2, unchanged: 1 }),
    waitFor(assertFile("node", SEEN, { content: "v1 greeting=two\n" }), 20),
    invocation("config changed", { fresh: true }),
    apply("node", "/root/three.json", { outcome: "converged", changed: 2, unchanged: 1 }),
    waitFor(assertFile("node", SEEN, { content: "v2 greeting=two\n" }), 20),
    invocation("unit changed", { fresh: true }),
    apply("node", "/root/three.json", { outcome: "converged", changed: 0, unchanged: 3 }),
    invocation("unchanged again", { same: "unit changed" }),
  ],
};
