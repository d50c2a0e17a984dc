import assert from "node:assert/strict";
import { mustRun, PROGRAM_ERRORS, ProgramError, runProgram } from "../../os/_run.ts";

Deno.test("runProgram returns the exit code and output of a real program", async () => {
  const r = await runProgram(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"]);
  assert.equal(r.code, 3);
  assert.equal(r.stdout, "out\n");
  assert.equal(r.stderr, "err\n");
});

Deno.test("runProgram passes stdin and runs in the C locale", async () => {
  const r = await runProgram(["/bin/sh", "-c", 'cat; echo "$LC_ALL"'], { input: "in\n" });
  assert.equal(r.stdout, "in\nC\n");
});

Deno.test("mustRun names what ran, its exit code and its last stderr lines", async () => {
  const script = "for i in 1 2 3 4 5 6 7; do echo line$i >&2; done; exit 4";
  const error = await mustRun(["/bin/sh", "-c", script]).then(() => null, (e) => e);
  assert.ok(error instanceof ProgramError);
  assert.equal(error.code, PROGRAM_ERRORS.failed);
  assert.equal(error.exitCode, 4);
  assert.match(
    error.message,
    /^`\/bin\/sh -c "for i in .*"` exited 4: line3 \| line4 \| line5 \| line6 \| line7/,
  );
  assert.doesNotMatch(error.message, /line2/);
});

Deno.test("mustRun accepts the exit codes it is told are fine", async () => {
  const r = await mustRun(["/bin/sh", "-c", "exit 3"], { okCodes: [3] });
  assert.equal(r.code, 3);
});

Deno.test("a missing program is a ProgramError saying what to install", async () => {
  const error = await runProgram(["noxad-no-such-program", "x"]).then(() => null, (e) => e);
  assert.ok(error instanceof ProgramError);
  assert.equal(error.code, PROGRAM_ERRORS.missing);
  assert.match(error.message, /noxad-no-such-program is not installed or not on PATH/);
});

Deno.test("a program that runs too long is killed and reported", async () => {
  const error = await runProgram(["/bin/sleep", "30"], { timeoutMs: 200 }).then(
    () => null,
    (e) => e,
  );
  assert.ok(error instanceof ProgramError);
  assert.equal(error.code, PROGRAM_ERRORS.timeout);
  assert.match(error.message, /`\/bin\/sleep 30` did not finish within 200 ms and was killed/);
});

Deno.test("via prefixes the argv (how tests reach a lab machine)", async () => {
  const r = await runProgram(["echo", "hi"], { via: ["/usr/bin/env", "--"] });
  assert.deepEqual(r.argv, ["/usr/bin/env", "--", "echo", "hi"]);
  assert.equal(r.stdout, "hi\n");
});

Deno.test("a program outside --allow-run is refused as not permitted, without a prompt", async () => {
  const dir = await Deno.makeTempDir({ prefix: "noxad-perm-" });
  try {
    const script = `${dir}/probe.ts`;
    await Deno.writeTextFile(
      script,
      `import { runProgram } from "${new URL("../../os/_run.ts", import.meta.url).href}";\n` +
        `try { await runProgram(["/bin/sh", "-c", "true"]); console.log("ran"); }\n` +
        `catch (e) { console.log(e.code); console.log(e.message); }\n`,
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-read", "--allow-run=/bin/true", script],
      stdin: "inherit", // a prompt would need a terminal; the runner must not ask
      stdout: "piped",
      stderr: "piped",
    }).output();
    const [code, message] = new TextDecoder().decode(out.stdout).trim().split("\n");
    assert.equal(code, PROGRAM_ERRORS.notPermitted);
    assert.match(message, /permission set does not allow running \/bin\/sh/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
