/**
 * Certificates for a broker (the lab's, the stand-in control plane's): a CA and a server certificate made with
 * openssl (EC P-256), and the server certificate's SHA-256 fingerprint in the
 * "AB:CD:…" form node:tls reports as fingerprint256.
 */
import { X509Certificate } from "node:crypto";
import { join } from "node:path";

/** The files and facts a broker and its tokens need. */
export interface BrokerCertificates {
  caFile: string;
  certFile: string;
  keyFile: string;
  caPem: string;
  fingerprint256: string;
}

/**
 * Make (or reuse, when present) a CA and a server certificate for `names` and
 * `ips` in `dir`. Several servers of one cluster share the CA: give each its
 * own `server` (the file names' stem, default "server"). The certificate serves
 * for both ends of a TLS connection (extended key usage serverAuth and
 * clientAuth): a server presents it on its route and leaf connections too, where
 * its peer verifies it as a client's.
 */
export async function makeCertificates(
  dir: string,
  {
    names = ["localhost"],
    ips = ["127.0.0.1"],
    cn = names[0],
    caName = "nox-mesh stand-in CA",
    server = "server",
  }: {
    names?: string[];
    ips?: string[];
    cn?: string;
    /** The CA certificate's common name. */
    caName?: string;
    /** The stem of the server's files (`<server>.pem`, `<server>.key`). */
    server?: string;
  } = {},
): Promise<BrokerCertificates> {
  const p = (name: string) => join(dir, name);
  const files = {
    caFile: p("ca.pem"),
    certFile: p(`${server}.pem`),
    keyFile: p(`${server}.key`),
  };
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  if (!(await exists(files.caFile))) {
    await Deno.mkdir(dir, { recursive: true });
    await openssl([
      "req",
      "-x509",
      ...ec,
      "-keyout",
      p("ca.key"),
      "-out",
      files.caFile,
      "-days",
      "30",
      "-subj",
      `/CN=${caName}`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    ]);
  }
  if (!(await exists(files.certFile))) {
    await openssl([
      "req",
      ...ec,
      "-keyout",
      files.keyFile,
      "-out",
      p(`${server}.csr`),
      "-subj",
      `/CN=${cn}`,
    ]);
    const san = [...names.map((n) => `DNS:${n}`), ...ips.map((i) => `IP:${i}`)].join(",");
    await Deno.writeTextFile(
      p(`${server}.ext`),
      `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n`,
    );
    await openssl([
      "x509",
      "-req",
      "-in",
      p(`${server}.csr`),
      "-CA",
      files.caFile,
      "-CAkey",
      p("ca.key"),
      "-CAcreateserial",
      "-out",
      files.certFile,
      "-days",
      "30",
      "-extfile",
      p(`${server}.ext`),
    ]);
  }
  const caPem = await Deno.readTextFile(files.caFile);
  const fingerprint256 =
    new X509Certificate(await Deno.readTextFile(files.certFile)).fingerprint256;
  return { ...files, caPem, fingerprint256 };
}

/** The SHA-256 fingerprint of a PEM certificate file. */
export async function fingerprintOf(certFile: string): Promise<string> {
  return new X509Certificate(await Deno.readTextFile(certFile)).fingerprint256;
}

async function openssl(args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}
