// Proof that the lab leaves nothing behind: no namespace, veth, mount, cgroup directory,
// process or temp dir named with the run's prefix, after a passing run, a failing
// scenario, Ctrl-C (SIGINT), and --keep followed by --clean.
import assert from "node:assert/strict";
import { join } from "node:path";
import { isClean, leftovers } from "../lab/lib/clean.ts";
import { runScenario } from "../lab/lib/runner.ts";
import { run, type Scenario } from "../lab/lib/scenario.ts";

const root = Deno.uid() === 0;
const checkout = join(import.meta.dirname!, "..");
const prefix = () => "noxlt" + crypto.randomUUID().slice(0, 3);

function lab(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", join(checkout, "lab/main.ts"), ...args],
    cwd: checkout,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

async function assertNothingLeft(tag: string): Promise<void> {
  const left = await leftovers(tag);
  assert.ok(isClean(left), `lab ${tag} left: ${JSON.stringify(left, null, 2)}`);
}

Deno.test({
  name: root
    ? "lab teardown: nothing left after a passing run"
    : "lab teardown (skipped: needs root)",
  ignore: !root,
  async fn() {
    const tag = prefix();
    const out = await lab(["--prefix", tag, "openrc-boot"]).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, text + new TextDecoder().decode(out.stderr));
    assert.match(text, /openrc-boot\s+pass/);
    await assertNothingLeft(tag);
  },
});

Deno.test({
  name: root
    ? "lab teardown: a failing scenario names the step, keeps logs, leaves nothing"
    : "lab teardown on failure (skipped: needs root)",
  ignore: !root,
  async fn() {
    const tag = prefix();
    const logsRoot = await Deno.makeTempDir({ prefix: "noxlt-logs-" });
    const failing: Scenario = {
      name: "deliberately-failing",
      summary: "fails on purpose",
      broker: true,
      machines: { s: { flavour: "systemd" }, o: { flavour: "openrc" } },
      steps: [run("o", ["true"]), run("s", ["sh", "-c", "echo nope >&2; exit 4"])],
    };
    const result = await runScenario(failing, { prefix: tag, logsRoot, out: () => {} });
    try {
      await checkFailure(result);
    } finally {
      await Deno.remove(logsRoot, { recursive: true });
    }
    await assertNothingLeft(tag);
  },
});

async function checkFailure(result: Awaited<ReturnType<typeof runScenario>>): Promise<void> {
  assert.equal(result.ok, false);
  assert.match(result.failure ?? "", /step 2 "run on s: sh -c/);
  assert.match(result.failure ?? "", /expected exit 0; saw exit 4, stderr "nope"/);
  assert.ok(result.logsDir);
  const journal = await Deno.readTextFile(join(result.logsDir, "s", "journalctl.log"));
  assert.match(journal, /systemd/);
  await Deno.stat(join(result.logsDir, "o", "rc-status.log"));
  await Deno.stat(join(result.logsDir, "broker-nats.log"));
}

Deno.test({
  name: root
    ? "lab teardown: Ctrl-C (SIGINT) in the middle of a run leaves nothing"
    : "lab teardown on SIGINT (skipped: needs root)",
  ignore: !root,
  async fn() {
    const tag = prefix();
    const child = lab(["--prefix", tag, "link-cut"]);
    let seen = "";
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    while (!/raised \w+ \(systemd\)/.test(seen)) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += value;
    }
    child.kill("SIGINT");
    reader.releaseLock();
    await child.stdout.cancel().catch(() => {});
    const stderr = await new Response(child.stderr).text();
    const status = await child.status;
    assert.equal(status.code, 130, seen + stderr);
    await assertNothingLeft(tag);
  },
});

Deno.test({
  name: root
    ? "lab teardown: --keep leaves machines up; --clean removes them"
    : "lab --keep/--clean (skipped: needs root)",
  ignore: !root,
  async fn() {
    const tag = prefix();
    const kept = await lab(["--prefix", tag, "--keep", "openrc-boot"]).output();
    const decode = (b: Uint8Array) => new TextDecoder().decode(b);
    assert.equal(kept.code, 0, decode(kept.stdout) + decode(kept.stderr));
    const left = await leftovers(tag);
    assert.equal(left.netns.length, 2, JSON.stringify(left));
    assert.ok(left.processes.length > 0);
    const cleaned = await lab(["--prefix", tag, "--clean"]).output();
    assert.equal(cleaned.code, 0);
    assert.match(new TextDecoder().decode(cleaned.stdout), new RegExp(`cleaned ${tag}`));
    await assertNothingLeft(tag);
  },
});

Deno.test({
  name: root
    ? "lab --clean: a process the lab started outside its machines (the control plane's serve-nodes) is stopped, known by the lab directory in its arguments"
    : "lab --clean of a process outside the machines (skipped: needs root)",
  ignore: !root,
  async fn() {
    const tag = prefix();
    // As serve-nodes is left by a --keep run whose directory is gone: no namespace, no
    // cgroup, no directory, only `--dir /tmp/<lab id>/mesh` among its arguments.
    const stray = new Deno.Command("sh", {
      args: ["-c", "while :; do sleep 1; done", "serve-nodes", "--dir", `/tmp/${tag}0a1b/mesh`],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      const cleaned = await lab(["--prefix", tag, "--clean"]).output();
      assert.equal(cleaned.code, 0);
      assert.match(new TextDecoder().decode(cleaned.stdout), new RegExp(`cleaned ${tag}0a1b`));
      assert.equal((await stray.status).signal, "SIGKILL");
      await assertNothingLeft(tag);
    } finally {
      try {
        stray.kill("SIGKILL");
      } catch { /* stopped by the clean */ }
    }
  },
});
