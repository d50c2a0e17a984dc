/**
 * The mesh's object store as a content source (DESIGN.md §19): an object named by
 * its SHA-256 (hex) is read by direct gets only, which is all the broker lets a node
 * do there: its description by name, then its chunks one by one, never more bytes
 * than were declared. What it returns is verified by the engine's resolver.
 */
import type { MsgHdrs } from "@nats-io/transport-node";
import { type ContentSource, WRONG_SIZE } from "../store/content.ts";
import { CONTENT_BUCKET, CONTENT_SUBJECTS } from "./subjects.ts";

/** One request/reply over the link (the connection's `request`). */
export type Requester = (
  subject: string,
  body: string,
) => Promise<{ data: Uint8Array; headers?: MsgHdrs }>;

/** The description the object store keeps for an object (the fields read here). */
interface ObjectMeta {
  nuid?: unknown;
  size?: unknown;
  deleted?: unknown;
}

const status = (headers?: MsgHdrs): number => headers?.code ?? 0;

/** The mesh's object store, read through `request`. */
export function objectStoreSource(request: Requester): ContentSource {
  return {
    name: `the mesh's object store (bucket "${CONTENT_BUCKET}")`,
    async get(sha256, size) {
      const name = CONTENT_SUBJECTS.meta(sha256).split(".").pop()!;
      const described = await request(CONTENT_SUBJECTS.metaGet.replace(/\*$/, name), "");
      if (status(described.headers) === 404) return null;
      if (status(described.headers) >= 300) {
        throw new Error(
          `the object store answered ${status(described.headers)} ${
            described.headers?.description ?? ""
          }`,
        );
      }
      const meta = JSON.parse(new TextDecoder().decode(described.data)) as ObjectMeta;
      if (meta.deleted === true) return null;
      if (meta.size !== size || typeof meta.nuid !== "string") return WRONG_SIZE;
      const chunks = CONTENT_SUBJECTS.chunks(meta.nuid);
      const bytes = new Uint8Array(size);
      let done = 0;
      let seq = 1;
      while (done < size) {
        const reply = await request(
          CONTENT_SUBJECTS.directGet,
          JSON.stringify({ seq, next_by_subj: chunks }),
        );
        if (status(reply.headers) !== 0 && status(reply.headers) !== 200) return WRONG_SIZE;
        if (done + reply.data.length > size) return WRONG_SIZE;
        bytes.set(reply.data, done);
        done += reply.data.length;
        seq = Number(reply.headers?.get("Nats-Sequence")) + 1;
        if (!Number.isSafeInteger(seq)) return WRONG_SIZE;
        if (reply.data.length === 0) return WRONG_SIZE;
      }
      return bytes;
    },
  };
}
