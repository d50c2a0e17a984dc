/**
 * One list: lab/setup.sh (the README's first command) installs everything the lab and the
 * tests run, and CI (.ci/run) installs nothing of its own, so a newcomer's fresh machine runs
 * what CI runs. The programs the test and lab processes start are checked as they start
 * (tests/_setup_preload.ts); here: the checker itself, on this machine's real dpkg database,
 * and CI's script against the README.
 */
import assert from "node:assert/strict";
import {
  expectedPackages,
  NotFromSetupError,
  owners,
  programChecker,
  setupPackages,
} from "./_setup_programs.ts";

const read = (p: string) => Deno.readTextFileSync(new URL(`../${p}`, import.meta.url));
const LIST = setupPackages(read("lab/setup.sh"));
const DENO = Deno.realPathSync(Deno.execPath());

Deno.test("setup list: every package lab/setup.sh names is installed here (it ran)", () => {
  // Debian's Node.js and npm (NPM_PACKAGES) only where the machine had no npm of its own.
  const listed = LIST.filter((p) => p !== "nodejs" && p !== "npm");
  assert.ok(
    new Deno.Command("sh", { args: ["-c", "command -v npm"], stdout: "null" }).outputSync().success,
    "npm is found",
  );
  const out = new Deno.Command("dpkg-query", {
    args: ["-W", "-f", "${Package} ${db:Status-Status}\n", ...listed],
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  const installed = new Set(
    new TextDecoder().decode(out.stdout).split("\n").filter((l) => l.endsWith(" installed"))
      .map((l) => l.split(" ")[0]),
  );
  assert.deepEqual(listed.filter((p) => !installed.has(p)), []);
});

Deno.test("setup list: a program from a package the list lacks stops the test that runs it", () => {
  const ownerOf = owners();
  const full = programChecker(expectedPackages(LIST), ownerOf, DENO);
  assert.equal(full("shellcheck"), undefined);
  assert.equal(full("sh"), undefined, "sh is in every Debian (dash is Essential)");
  const without = programChecker(
    expectedPackages(LIST.filter((p) => p !== "shellcheck")),
    ownerOf,
    DENO,
  );
  const error = without("shellcheck");
  assert.ok(error instanceof NotFromSetupError);
  assert.match(error.message, /Debian package shellcheck, not installed by lab\/setup\.sh/);
  assert.equal(without("nats-server"), undefined, "the rest of the list still counts");
});

Deno.test("setup list: a dependency of a listed package counts; a program built by a test does not need one", async () => {
  // podman pulls in conmon (a Depends), which the list does not name itself.
  const check = programChecker(expectedPackages(LIST), owners(), DENO);
  assert.equal(check("conmon"), undefined);
  const dir = await Deno.makeTempDir({ prefix: "nox-setup-" });
  try {
    await Deno.writeTextFile(`${dir}/tool`, "#!/bin/sh\n", { mode: 0o755 });
    assert.equal(check(`${dir}/tool`), undefined);
    assert.equal(check("./tool", dir), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("setup list: CI installs nothing of its own and runs exactly the README's two commands", () => {
  const ci = read(".ci/run");
  const code = ci.split("\n").filter((l) => !l.trimStart().startsWith("#")).join("\n");
  assert.doesNotMatch(code, /apt-get|npm install|dpkg -i|pip install/);
  const readme = read("README.md");
  const block = readme.match(/## The two commands[\s\S]*?```sh\n([\s\S]*?)```/);
  assert.ok(block, "the README has a 'The two commands' section with a sh block");
  const commands = block[1].split("\n").map((l) => l.replace(/#.*/, "").trim()).filter(Boolean);
  assert.deepEqual(commands, ["sh lab/setup.sh && deno task lab", "deno task test"]);
  for (const command of commands) {
    assert.ok(code.includes(command), `.ci/run runs '${command}' as the README gives it`);
  }
  assert.ok(code.includes("deno task check"));
});
