/**
 * The container image the Arch and Alpine packages carry for their substrate
 * bundle (packaging/<os>/substrate.lock): `localhost/nox-mesh-host/pause:1`, made
 * byte for byte by this module, so its manifest digest is fixed and the bundle
 * names it statically (`…@sha256:<IMAGE_DIGEST>`). No registry is involved: the
 * package installs the archive as /usr/share/nox-mesh-host/images/pause.oci.tar,
 * and the bundle's action loads it with `podman load -i`.
 *
 * The image holds one file, `/pause`: a 224-byte static x86-64 ELF written here
 * (no libc, no shell) that sets SIGTERM and SIGINT to exit 0 and otherwise sleeps
 * in pause(2). As a container's PID 1 it waits for ever and stops at once on
 * `podman stop`. The archive is an OCI archive (oci-layout, index.json, blobs):
 * `podman load` keeps an OCI manifest as it is, so the loaded image's digest is
 * the manifest's and `name@sha256:…` resolves (a docker-archive has no manifest
 * to keep: its load digest is made up on the spot). Every tar header has
 * uid/gid 0 and mtime 0, so the archive is the same on every build.
 *
 * Known limit: the program is x86-64 code; an aarch64 machine can load the image
 * but the container does not start.
 */

/** The image's name in the bundle and in the runtime's store. */
export const IMAGE_NAME = "localhost/nox-mesh-host/pause";
/** Its tag (the bundle pins the digest; the tag is for people). */
export const IMAGE_TAG = "1";
/** Where the packages install the archive; the bundle's action loads it from there. */
export const IMAGE_FILE = "pause.oci.tar";
/** The directory the packages install images into. */
export const IMAGE_DIR = "/usr/share/nox-mesh-host/images";

/**
 * The x86-64 code at 0x400078 (right after the ELF and program headers):
 *   rt_sigaction(SIGTERM, &act, NULL, 8); rt_sigaction(SIGINT, &act, NULL, 8);
 *   for (;;) pause();
 *   handler: exit_group(0)
 *   act: { sa_handler = handler, sa_flags = SA_RESTORER, sa_restorer = handler, sa_mask = 0 }
 * x86-64 Linux refuses to deliver a signal without a restorer (the process gets
 * SIGSEGV instead); the handler never returns, so it is its own restorer.
 */
const CODE = [
  // mov eax,13 ; mov edi,15 ; lea rsi,[rip+0x37] ; xor edx,edx ; mov r10d,8 ; syscall
  0xb8,
  0x0d,
  0x00,
  0x00,
  0x00,
  0xbf,
  0x0f,
  0x00,
  0x00,
  0x00,
  0x48,
  0x8d,
  0x35,
  0x37,
  0x00,
  0x00,
  0x00,
  0x31,
  0xd2,
  0x41,
  0xba,
  0x08,
  0x00,
  0x00,
  0x00,
  0x0f,
  0x05,
  // the same for SIGINT (2): lea rsi,[rip+0x1c]
  0xb8,
  0x0d,
  0x00,
  0x00,
  0x00,
  0xbf,
  0x02,
  0x00,
  0x00,
  0x00,
  0x48,
  0x8d,
  0x35,
  0x1c,
  0x00,
  0x00,
  0x00,
  0x31,
  0xd2,
  0x41,
  0xba,
  0x08,
  0x00,
  0x00,
  0x00,
  0x0f,
  0x05,
  // 0x4000ae: mov eax,34 (pause) ; syscall ; jmp 0x4000ae
  0xb8,
  0x22,
  0x00,
  0x00,
  0x00,
  0x0f,
  0x05,
  0xeb,
  0xf7,
  // 0x4000b7 handler: mov eax,231 (exit_group) ; xor edi,edi ; syscall
  0xb8,
  0xe7,
  0x00,
  0x00,
  0x00,
  0x31,
  0xff,
  0x0f,
  0x05,
] as const;

const BASE = 0x400000;
const HEADERS = 64 + 56;
const HANDLER = BASE + HEADERS + 63;

/** The `/pause` program: ELF header, one PT_LOAD (R+X) of the whole file, code, sigaction. */
export function pauseElf(): Uint8Array {
  const size = HEADERS + CODE.length + 32;
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  out.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]); // ELF64, little-endian, version 1, SysV
  v.setUint16(16, 2, true); // ET_EXEC
  v.setUint16(18, 62, true); // EM_X86_64
  v.setUint32(20, 1, true); // EV_CURRENT
  v.setBigUint64(24, BigInt(BASE + HEADERS), true); // entry
  v.setBigUint64(32, 64n, true); // program headers at 64
  v.setUint16(52, 64, true); // ehsize
  v.setUint16(54, 56, true); // phentsize
  v.setUint16(56, 1, true); // phnum
  // PT_LOAD, flags R+X, offset 0, vaddr = paddr = BASE, filesz = memsz = size, align 0x1000
  v.setUint32(64, 1, true);
  v.setUint32(68, 5, true);
  v.setBigUint64(80, BigInt(BASE), true);
  v.setBigUint64(88, BigInt(BASE), true);
  v.setBigUint64(96, BigInt(size), true);
  v.setBigUint64(104, BigInt(size), true);
  v.setBigUint64(112, 0x1000n, true);
  out.set(CODE, HEADERS);
  v.setBigUint64(HEADERS + CODE.length, BigInt(HANDLER), true); // sa_handler
  v.setBigUint64(HEADERS + CODE.length + 8, 0x04000000n, true); // sa_flags = SA_RESTORER
  v.setBigUint64(HEADERS + CODE.length + 16, BigInt(HANDLER), true); // sa_restorer
  return out;
}

/** One ustar entry: a regular file (or a directory when `data` is null), root's, mtime 0. */
function tarEntry(name: string, data: Uint8Array | null, mode: number): Uint8Array {
  const header = new Uint8Array(512);
  const put = (at: number, text: string) => header.set(new TextEncoder().encode(text), at);
  const octal = (at: number, width: number, n: number) =>
    put(at, n.toString(8).padStart(width - 1, "0") + "\0");
  if (name.length > 100) throw new TypeError(`tar name too long: ${name}`);
  put(0, name);
  octal(100, 8, mode);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, data ? data.length : 0);
  octal(136, 12, 0);
  put(148, "        ");
  put(156, data ? "0" : "5");
  put(257, "ustar\0");
  put(263, "00");
  put(265, "root");
  put(297, "root");
  const sum = header.reduce((a, b) => a + b, 0);
  put(148, sum.toString(8).padStart(6, "0") + "\0 ");
  const body = data ? Math.ceil(data.length / 512) * 512 : 0;
  const entry = new Uint8Array(512 + body);
  entry.set(header);
  if (data) entry.set(data, 512);
  return entry;
}

/** A tar of `entries` in the given order, with its two closing zero blocks. */
export function tar(
  entries: ReadonlyArray<{ name: string; data: Uint8Array | null; mode: number }>,
): Uint8Array {
  const parts = entries.map((e) => tarEntry(e.name, e.data, e.mode));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0) + 1024);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function sha256(data: Uint8Array): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
  return "sha256:" + Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

/** The OCI archive and its manifest digest (what `podman image inspect` says after a load). */
export interface ImageArchive {
  archive: Uint8Array;
  /** sha256:<64 hex> of the manifest: the digest the bundle pins. */
  digest: string;
}

/** Makes the OCI archive of the pause image; the same bytes on every call. */
export async function pauseImage(): Promise<ImageArchive> {
  const layer = tar([{ name: "pause", data: pauseElf(), mode: 0o755 }]);
  const layerDigest = await sha256(layer);
  const config = json({
    architecture: "amd64",
    os: "linux",
    config: { Cmd: ["/pause"], StopSignal: "SIGTERM" },
    rootfs: { type: "layers", diff_ids: [layerDigest] },
  });
  const configDigest = await sha256(config);
  const manifest = json({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: configDigest,
      size: config.length,
    },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar",
      digest: layerDigest,
      size: layer.length,
    }],
  });
  const digest = await sha256(manifest);
  const index = json({
    schemaVersion: 2,
    manifests: [{
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      digest,
      size: manifest.length,
      annotations: { "org.opencontainers.image.ref.name": `${IMAGE_NAME}:${IMAGE_TAG}` },
    }],
  });
  const blob = (d: string) => `blobs/sha256/${d.slice("sha256:".length)}`;
  const archive = tar([
    { name: "oci-layout", data: json({ imageLayoutVersion: "1.0.0" }), mode: 0o644 },
    { name: "index.json", data: index, mode: 0o644 },
    { name: "blobs/", data: null, mode: 0o755 },
    { name: "blobs/sha256/", data: null, mode: 0o755 },
    { name: blob(configDigest), data: config, mode: 0o644 },
    { name: blob(layerDigest), data: layer, mode: 0o644 },
    { name: blob(digest), data: manifest, mode: 0o644 },
  ]);
  return { archive, digest };
}

if (import.meta.main) {
  const { archive, digest } = await pauseImage();
  const out = Deno.args[0];
  if (out) await Deno.writeFile(out, archive);
  console.log(`${IMAGE_NAME}@${digest}`);
}
