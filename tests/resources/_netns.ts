/**
 * Network namespaces for the overlay, firewall and sysctl tests: every address
 * these tests use lives only inside namespaces made here, and `await using`
 * ends the processes left in them (wireguard-go) and deletes them.
 */
import { runProgram, type RunResult } from "../../os/_run.ts";

/** A network namespace this test made. */
export interface Netns extends AsyncDisposable {
  name: string;
  /** The argv prefix that runs a program inside it. */
  via: string[];
  /** Run argv inside it. */
  exec(argv: string[], input?: string): Promise<RunResult>;
  /** Run argv inside it; throws unless it exits 0. */
  must(argv: string[], input?: string): Promise<string>;
}

/** A fresh namespace named `noxnk-<tag>-<random>`, with loopback up. */
export async function netns(tag: string): Promise<Netns> {
  const name = `noxnk-${tag}-${crypto.randomUUID().slice(0, 6)}`;
  const add = await runProgram(["ip", "netns", "add", name]);
  if (add.code !== 0) throw new Error(`ip netns add ${name}: ${add.stderr}`);
  const via = ["ip", "netns", "exec", name];
  const exec = (argv: string[], input?: string) =>
    runProgram(argv, { via, input, timeoutMs: 60_000 });
  const must = async (argv: string[], input?: string) => {
    const r = await exec(argv, input);
    if (r.code !== 0) throw new Error(`${argv.join(" ")} in ${name}: exit ${r.code}: ${r.stderr}`);
    return r.stdout;
  };
  await must(["ip", "link", "set", "lo", "up"]);
  return {
    name,
    via,
    exec,
    must,
    async [Symbol.asyncDispose]() {
      // A process inside (wireguard-go) keeps the namespace alive after `ip netns del`:
      // end every process this test started in it first.
      const pids = await runProgram(["ip", "netns", "pids", name]);
      for (const pid of pids.stdout.split("\n").map(Number).filter((n) => n > 0)) {
        try {
          Deno.kill(pid, "SIGTERM");
        } catch { /* already gone */ }
      }
      await runProgram(["ip", "netns", "del", name]);
    },
  };
}

/** Join two namespaces with a veth pair, each end with its address (CIDR). */
export async function cable(a: Netns, aAddr: string, b: Netns, bAddr: string): Promise<void> {
  const ends = [`nkv${crypto.randomUUID().slice(0, 6)}`, `nkv${crypto.randomUUID().slice(0, 6)}`];
  await a.must([
    "ip",
    "link",
    "add",
    ends[0],
    "type",
    "veth",
    "peer",
    "name",
    ends[1],
    "netns",
    b.name,
  ]);
  await a.must(["ip", "address", "add", aAddr, "dev", ends[0]]);
  await b.must(["ip", "address", "add", bAddr, "dev", ends[1]]);
  await a.must(["ip", "link", "set", ends[0], "up"]);
  await b.must(["ip", "link", "set", ends[1], "up"]);
}
