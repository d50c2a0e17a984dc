/**
 * What a nats-server's Go runtime says of its memory, read from its profiling port
 * (`prof_port`, on loopback): `runtime.MemStats` as the heap profile's text form ends with
 * it, the goroutines, and the live heap by where it was allocated. For the benches that
 * measure the broker's memory per node (broker_floor.ts, scale_bench.ts).
 */

/** Go's own accounts of a server's memory (bytes) and its goroutines. */
export interface GoMemory {
  heapAlloc: number;
  heapInuse: number;
  heapIdle: number;
  heapReleased: number;
  stackInuse: number;
  sys: number;
  numGc: number;
  goroutines: number;
}

async function get(url: string): Promise<string> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return await response.text();
}

/**
 * The heap profile's memory statistics of the server profiling at `address` (`host:port`);
 * `gc`: after a collection the profile forces first; `sites`: its live heap is added in, by
 * site (bySite).
 */
export async function goMemory(
  address: string,
  { gc = false, sites }: { gc?: boolean; sites?: Map<string, number> } = {},
): Promise<GoMemory> {
  const profile = await get(`http://${address}/debug/pprof/heap?debug=1${gc ? "&gc=1" : ""}`);
  const stat = (name: string) => Number(profile.match(new RegExp(`^# ${name} = (\\d+)`, "m"))?.[1]);
  const stack = profile.match(/^# Stack = (\d+) \/ (\d+)/m);
  const goroutines = Number(
    (await get(`http://${address}/debug/pprof/goroutine?debug=1`))
      .match(/^goroutine profile: total (\d+)/m)?.[1],
  );
  if (sites) bySite(profile, sites);
  return {
    heapAlloc: stat("HeapAlloc"),
    heapInuse: stat("HeapInuse"),
    heapIdle: stat("HeapIdle"),
    heapReleased: stat("HeapReleased"),
    stackInuse: Number(stack?.[1]),
    sys: stat("Sys"),
    numGc: stat("NumGC"),
    goroutines,
  };
}

/** Frames that say where memory was asked for only through a container or the runtime. */
const GENERIC =
  /^(runtime|bytes|bufio|strings|sync|reflect|sort|fmt|errors|unicode|math|internal|encoding|strconv)[./]/;

/**
 * Adds a heap profile's live bytes (the debug=1 text: sampled, so each record is scaled as
 * Go's pprof scales it) into `sites`, by the first frame that is not generic.
 */
export function bySite(profile: string, sites: Map<string, number>): void {
  const rate = Number(profile.match(/@ heap\/(\d+)/)?.[1] ?? 1048576) / 2;
  for (const record of profile.split(/\n(?=\d+: \d+ \[)/)) {
    const head = record.match(/^(\d+): (\d+) \[/);
    if (!head) continue;
    const [objects, bytes] = [Number(head[1]), Number(head[2])];
    if (objects === 0 || bytes === 0) continue;
    const scale = 1 / (1 - Math.exp(-(bytes / objects) / rate));
    const frames = [...record.matchAll(/^#\s+0x[0-9a-f]+\s+(\S+?)(\+0x[0-9a-f]+)?\s/gm)]
      .map((m) => m[1]);
    const site = frames.find((f) => !GENERIC.test(f)) ?? frames[0] ?? "?";
    const short = site.replace("github.com/nats-io/nats-server/v2/", "").replace(
      "github.com/nats-io/nats-server/",
      "",
    );
    sites.set(short, (sites.get(short) ?? 0) + bytes * scale);
  }
}

/** The sum of several servers' accounts. */
export function sumGo(gs: GoMemory[]): GoMemory {
  const sum = (f: (g: GoMemory) => number) => gs.reduce((a, g) => a + f(g), 0);
  return {
    heapAlloc: sum((g) => g.heapAlloc),
    heapInuse: sum((g) => g.heapInuse),
    heapIdle: sum((g) => g.heapIdle),
    heapReleased: sum((g) => g.heapReleased),
    stackInuse: sum((g) => g.stackInuse),
    sys: sum((g) => g.sys),
    numGc: sum((g) => g.numGc),
    goroutines: sum((g) => g.goroutines),
  };
}

/** The top `n` sites as "site KiB; …; the rest KiB", in KiB per `per`. */
export function topSites(sites: Map<string, number>, per: number, n = 8): string {
  const kib = (bytes: number) => (bytes / per / 1024).toFixed(1);
  const all = [...sites.entries()].sort((a, b) => b[1] - a[1]);
  const rest = all.slice(n).reduce((a, [, b]) => a + b, 0);
  return `${all.slice(0, n).map(([site, b]) => `${site} ${kib(b)}`).join("; ")}; the rest ${
    kib(rest)
  }`;
}
