/**
 * The mesh's object store as a content source (DESIGN.md §19, §20): an object named by
 * its SHA-256 (hex) is asked for on the node's own subject, part by part (OBJECT_READS:
 * its description, then its chunks one by one, never more bytes than were declared),
 * and the control plane answers with the object store's bytes once it checked that the
 * node's declaration names the object (403 otherwise). What it returns is verified by
 * the engine's resolver.
 */
import type { MsgHdrs } from "@nats-io/transport-node";
import { type ContentSource, WRONG_SIZE } from "../store/content.ts";
import { CONTENT_STREAM, OBJECT_READS } from "./subjects.ts";

/** One request/reply over the link (the connection's `request`). */
export type Requester = (
  subject: string,
  body: string,
) => Promise<{ data: Uint8Array; headers?: MsgHdrs }>;

/** The description the object store keeps for an object (the fields read here). */
interface ObjectMeta {
  size?: unknown;
  chunks?: unknown;
  deleted?: unknown;
}

const status = (headers?: MsgHdrs): number => headers?.code ?? 0;

/**
 * How long to wait before asking again when the object store answered "no such
 * object" or "no such chunk" (ms, one per retry). Any replica of the stream answers
 * a direct get, one that lags behind the others included (a server just restarted,
 * a follower after its leader went away), so an object put a moment before the
 * declaration that names it can be missing from the first answer and there in the
 * next. A missing object costs these waits before the apply fails.
 */
export const STALE_RETRY_MS: readonly number[] = [250, 1000];

/**
 * How many times one read (a description or a chunk) is asked when no answer comes
 * in time or nobody answers. An answer can be lost without anything being wrong with
 * the object: the broker reloading its configuration (an enrolment), a server of a
 * cluster going away, a stream electing its leader, a control plane that restarts.
 * Each ask waits the link's request timeout, so a broker that is really gone costs
 * that many timeouts before the apply fails.
 */
export const LOST_ANSWER_ASKS = 3;

/** True for an ask that got no answer: timed out, or no responder at the time. */
function lostAnswer(error: unknown): boolean {
  const e = error as { name?: string; message?: string; code?: unknown; cause?: { name?: string } };
  return e?.name === "TimeoutError" || e?.name === "NoRespondersError" ||
    /^timeout$|no responders/i.test(`${e?.message ?? ""}`) ||
    e?.cause?.name === "NoRespondersError";
}

/** `request` asked again, up to `asks` times in all, while its answers are lost. */
function askedAgain(request: Requester, asks: number): Requester {
  return async (subject, body) => {
    for (let ask = 1;; ask++) {
      try {
        return await request(subject, body);
      } catch (error) {
        if (!lostAnswer(error)) throw error;
        if (ask >= asks) {
          throw new Error(
            `the object store did not answer the read of ${subject} (asked ${ask} times; ` +
              `${(error as Error).message}): check that the broker is up, this node's ` +
              "link to it, and the control plane's object service (it answers these reads); " +
              "the next apply asks again",
            { cause: error },
          );
        }
      }
    }
  };
}

/** A replica's "not here" (404): maybe not yet; `notYet` is what it means if it stays. */
interface NotYet {
  notYet: null | typeof WRONG_SIZE;
}

/** The mesh's object store, read by `node` through `request`. */
export function objectStoreSource(
  node: string,
  ask: Requester,
  retryMs: readonly number[] = STALE_RETRY_MS,
  asks: number = LOST_ANSWER_ASKS,
): ContentSource {
  const request = askedAgain(ask, asks);
  return {
    name: `the mesh's object store (stream ${CONTENT_STREAM})`,
    async get(sha256, size) {
      for (let attempt = 0;; attempt++) {
        const got = await readObject(request, node, sha256, size);
        if (!isNotYet(got)) return got;
        if (attempt >= retryMs.length) return got.notYet;
        await new Promise((resolve) => setTimeout(resolve, retryMs[attempt]));
      }
    },
  };
}

function isNotYet(got: Uint8Array | null | typeof WRONG_SIZE | NotYet): got is NotYet {
  return typeof got === "object" && got !== null && "notYet" in got;
}

/** One read of an object: its description, then its chunks. */
async function readObject(
  request: Requester,
  node: string,
  sha256: string,
  size: number,
): Promise<Uint8Array | null | typeof WRONG_SIZE | NotYet> {
  const described = await request(OBJECT_READS.meta(node, sha256), "");
  if (status(described.headers) === 404) return { notYet: null };
  if (status(described.headers) === 403) {
    throw new Error(
      `the control plane refused to give object ${sha256} to this node: ${
        described.headers?.description ?? "not declared"
      } (it gives only the objects the node's current declaration names)`,
    );
  }
  if (status(described.headers) >= 300) {
    throw new Error(
      `the object store answered ${status(described.headers)} ${
        described.headers?.description ?? ""
      }`,
    );
  }
  const meta = JSON.parse(new TextDecoder().decode(described.data)) as ObjectMeta;
  if (meta.deleted === true) return null;
  if (meta.size !== size || !Number.isSafeInteger(meta.chunks) || (meta.chunks as number) < 0) {
    return WRONG_SIZE;
  }
  const bytes = new Uint8Array(size);
  let done = 0;
  for (let index = 0; index < (meta.chunks as number); index++) {
    const reply = await request(OBJECT_READS.chunk(node, sha256, index), "");
    if (status(reply.headers) === 404) return { notYet: WRONG_SIZE };
    if (status(reply.headers) !== 0 && status(reply.headers) !== 200) return WRONG_SIZE;
    if (reply.data.length === 0 || done + reply.data.length > size) return WRONG_SIZE;
    bytes.set(reply.data, done);
    done += reply.data.length;
  }
  return done === size ? bytes : WRONG_SIZE;
}
