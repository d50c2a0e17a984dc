/**
 * A bench's worker process (a Deno script given its input file), whose stdout is one JSON
 * event per line: each event is handed to `onEvent` as it comes; a line that is not JSON is
 * not an event and is skipped.
 */
export function spawnWorker(
  worker: string,
  input: string,
  onEvent: (event: Record<string, unknown>) => void,
): Deno.ChildProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", worker, input],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  (async () => {
    let buffer = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        let event;
        try {
          event = JSON.parse(line);
        } catch {
          continue; // not an event
        }
        onEvent(event);
      }
    }
  })();
  return child;
}
