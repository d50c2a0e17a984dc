/**
 * `deno task bench --peers`: the same one-shot workload with CFEngine's cf-agent, where it is
 * installed (`apt-get install cfengine3` on this machine, for this bench only: never in the
 * tests, never in lab/setup.sh). The policy promises exactly what the host's declaration
 * declares (each directory with its mode and owner, each file with its content, mode and
 * owner); cf-agent runs it with `-K` (its locks would skip a promise kept less than a minute
 * ago) and `-f`, as root, under the same /usr/bin/time. Its floor is cf-agent with an empty
 * policy, in the same run.
 */

/** cf-agent's path, or undefined when it is not installed. */
export async function cfAgent(): Promise<string | undefined> {
  for (const path of ["/usr/bin/cf-agent", "/usr/sbin/cf-agent", "/var/cfengine/bin/cf-agent"]) {
    try {
      if ((await Deno.stat(path)).isFile) return path;
    } catch { /* not there */ }
  }
  return undefined;
}

/** A file or directory as both tools are told to make it. */
export type W1Item =
  | { type: "directory"; path: string; mode: string }
  | { type: "file"; path: string; mode: string; content: string };

/** CFEngine's string for `text`: its own escapes ($ and @ and quotes), newlines as $(const.n). */
function cfString(text: string): string {
  return text.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\$/g, "$(const.dollar)")
    .replace(/@/g, "$(const.at)").replace(/\n/g, "$(const.n)");
}

/** The policy that promises `items` (root:root, as the host's declaration does). */
export function cfPolicy(items: W1Item[]): string {
  const promises = items.map((item) =>
    item.type === "directory"
      ? `    "${item.path}/." create => "true", perms => m("${item.mode}");`
      : `    "${item.path}" create => "true", content => "${cfString(item.content)}", ` +
        `perms => m("${item.mode}");`
  );
  return [
    'body common control { bundlesequence => { "w1" }; }',
    "bundle agent w1 {",
    "  files:",
    ...promises,
    "}",
    'body perms m(mode) { mode => "$(mode)"; owners => { "root" }; groups => { "root" }; ' +
    'rxdirs => "false"; }',
    "",
  ].join("\n");
}

/** Write `policy` where cf-agent accepts it (root's, writable by nobody else); its path. */
export async function writePolicy(dir: string, name: string, policy: string): Promise<string> {
  const path = `${dir}/${name}.cf`;
  await Deno.writeTextFile(path, policy, { mode: 0o600 });
  await Deno.chmod(path, 0o600);
  return path;
}

/** The argv that runs `policy` once. */
export const cfArgv = (agent: string, policy: string): string[] => [agent, "-K", "-f", policy];
