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

/**
 * The aarch64 code at 0x400078 (aarch64 Linux has no pause(2): ppoll with no descriptors
 * and no timeout sleeps until a signal the same way):
 *   rt_sigaction(SIGTERM, &act, NULL, 8); rt_sigaction(SIGINT, &act, NULL, 8);
 *   for (;;) ppoll(NULL, 0, NULL, NULL, 0);
 *   handler: exit_group(0)
 *   act: { sa_handler = handler, sa_flags = 0, sa_restorer = 0, sa_mask = 0 }
 * The handler never returns, so it needs no restorer (the kernel's vDSO one would do).
 */
const CODE_AARCH64 = [
  0xd28010c8, // 0x00 movz x8, #134 (rt_sigaction)
  0xd28001e0, // 0x04 movz x0, #15 (SIGTERM)
  0x100002c1, // 0x08 adr x1, act (+0x58)
  0xd2800002, // 0x0c movz x2, #0
  0xd2800103, // 0x10 movz x3, #8
  0xd4000001, // 0x14 svc #0
  0xd28010c8, // 0x18 movz x8, #134
  0xd2800040, // 0x1c movz x0, #2 (SIGINT)
  0x10000201, // 0x20 adr x1, act (+0x40)
  0xd2800002, // 0x24 movz x2, #0
  0xd2800103, // 0x28 movz x3, #8
  0xd4000001, // 0x2c svc #0
  0xd2800000, // 0x30 loop: movz x0, #0
  0xd2800001, // 0x34 movz x1, #0
  0xd2800002, // 0x38 movz x2, #0
  0xd2800003, // 0x3c movz x3, #0
  0xd2800004, // 0x40 movz x4, #0
  0xd2800928, // 0x44 movz x8, #73 (ppoll)
  0xd4000001, // 0x48 svc #0
  0x17fffff9, // 0x4c b loop (-0x1c)
  0xd2800000, // 0x50 handler: movz x0, #0
  0xd2800bc8, // 0x54 movz x8, #94 (exit_group)
  0xd4000001, // 0x58 svc #0
  0xd503201f, // 0x5c nop (act is 8-aligned at 0x60)
] as const;

/** The machine architectures the image carries a program for (Deno.build.arch's spelling). */
export type ImageArch = "x86_64" | "aarch64";

/** Each architecture's program: ELF machine, OCI platform, code, handler and sigaction. */
const PROGRAMS: Record<ImageArch, {
  machine: number;
  platform: { architecture: string; os: "linux"; variant?: string };
  code: Uint8Array;
  handler: number;
  flags: bigint;
  align: bigint;
}> = {
  x86_64: {
    machine: 62, // EM_X86_64
    platform: { architecture: "amd64", os: "linux" },
    code: new Uint8Array(CODE),
    handler: 63,
    flags: 0x04000000n, // SA_RESTORER
    align: 0x1000n,
  },
  aarch64: {
    machine: 183, // EM_AARCH64
    platform: { architecture: "arm64", os: "linux", variant: "v8" },
    code: new Uint8Array(new Uint32Array(CODE_AARCH64).buffer), // little-endian words
    handler: 0x50,
    flags: 0n,
    align: 0x10000n, // kernels with 64 KiB pages load it too
  },
};

/** Every architecture of the image, in the order its index lists them. */
export const IMAGE_ARCHES: readonly ImageArch[] = ["x86_64", "aarch64"];

const BASE = 0x400000;
const HEADERS = 64 + 56;

/**
 * The `/pause` program for `arch`: ELF header, one PT_LOAD (R+X) of the whole file, code,
 * sigaction.
 */
export function pauseElf(arch: ImageArch = "x86_64"): Uint8Array {
  const p = PROGRAMS[arch];
  const size = HEADERS + p.code.length + 32;
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  out.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]); // ELF64, little-endian, version 1, SysV
  v.setUint16(16, 2, true); // ET_EXEC
  v.setUint16(18, p.machine, true);
  v.setUint32(20, 1, true); // EV_CURRENT
  v.setBigUint64(24, BigInt(BASE + HEADERS), true); // entry
  v.setBigUint64(32, 64n, true); // program headers at 64
  v.setUint16(52, 64, true); // ehsize
  v.setUint16(54, 56, true); // phentsize
  v.setUint16(56, 1, true); // phnum
  // PT_LOAD, flags R+X, offset 0, vaddr = paddr = BASE, filesz = memsz = size
  v.setUint32(64, 1, true);
  v.setUint32(68, 5, true);
  v.setBigUint64(80, BigInt(BASE), true);
  v.setBigUint64(88, BigInt(BASE), true);
  v.setBigUint64(96, BigInt(size), true);
  v.setBigUint64(104, BigInt(size), true);
  v.setBigUint64(112, p.align, true);
  out.set(p.code, HEADERS);
  const handler = BigInt(BASE + HEADERS + p.handler);
  const act = HEADERS + p.code.length;
  v.setBigUint64(act, handler, true); // sa_handler
  v.setBigUint64(act + 8, p.flags, true); // sa_flags
  v.setBigUint64(act + 16, p.flags ? handler : 0n, true); // sa_restorer
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

/** The OCI archive and the digest the bundles pin (what `podman image inspect` lists). */
export interface ImageArchive {
  archive: Uint8Array;
  /**
   * sha256:<64 hex> of the image index naming one manifest per architecture: the digest the
   * bundle pins, the same on every machine; `podman load` keeps the instance for the
   * machine's architecture and answers to this digest as well as to the instance's own.
   */
  digest: string;
  /** Each architecture's manifest digest. */
  manifests: Record<ImageArch, string>;
}

/** Makes the OCI archive of the pause image; the same bytes on every call. */
export async function pauseImage(): Promise<ImageArchive> {
  const blobs: Array<{ digest: string; data: Uint8Array }> = [];
  const put = async (data: Uint8Array) => {
    const digest = await sha256(data);
    if (!blobs.some((b) => b.digest === digest)) blobs.push({ digest, data });
    return { digest, size: data.length };
  };
  const manifests = {} as Record<ImageArch, string>;
  const entries = [];
  for (const arch of IMAGE_ARCHES) {
    const { platform } = PROGRAMS[arch];
    const layer = tar([{ name: "pause", data: pauseElf(arch), mode: 0o755 }]);
    const layerBlob = await put(layer);
    const config = await put(json({
      ...platform,
      config: { Cmd: ["/pause"], StopSignal: "SIGTERM" },
      rootfs: { type: "layers", diff_ids: [layerBlob.digest] },
    }));
    const manifest = await put(json({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layerBlob }],
    }));
    manifests[arch] = manifest.digest;
    entries.push({
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      ...manifest,
      platform,
    });
  }
  const indexBlob = await put(json({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: entries,
  }));
  const index = json({
    schemaVersion: 2,
    manifests: [{
      mediaType: "application/vnd.oci.image.index.v1+json",
      ...indexBlob,
      annotations: { "org.opencontainers.image.ref.name": `${IMAGE_NAME}:${IMAGE_TAG}` },
    }],
  });
  const blob = (d: string) => `blobs/sha256/${d.slice("sha256:".length)}`;
  const archive = tar([
    { name: "oci-layout", data: json({ imageLayoutVersion: "1.0.0" }), mode: 0o644 },
    { name: "index.json", data: index, mode: 0o644 },
    { name: "blobs/", data: null, mode: 0o755 },
    { name: "blobs/sha256/", data: null, mode: 0o755 },
    ...blobs.map((b) => ({ name: blob(b.digest), data: b.data, mode: 0o644 })),
  ]);
  return { archive, digest: indexBlob.digest, manifests };
}

if (import.meta.main) {
  const { archive, digest } = await pauseImage();
  const out = Deno.args[0];
  if (out) await Deno.writeFile(out, archive);
  console.log(`${IMAGE_NAME}@${digest}`);
}
