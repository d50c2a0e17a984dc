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
    await issueServerCertificate({
      caFile: files.caFile,
      caKeyFile: p("ca.key"),
      certFile: files.certFile,
      keyFile: files.keyFile,
      names,
      ips,
      cn,
    });
  }
  const caPem = await Deno.readTextFile(files.caFile);
  const fingerprint256 =
    new X509Certificate(await Deno.readTextFile(files.certFile)).fingerprint256;
  return { ...files, caPem, fingerprint256 };
}

/** Where a server's certificate lives and what it names (to issue it again: a renewal). */
export interface ServerCertificate {
  certFile: string;
  keyFile: string;
  names: string[];
  ips: string[];
}

/**
 * Issue a server certificate (a new key, `days` of validity, serverAuth and clientAuth)
 * for `names` and `ips` under the CA in `caFile`/`caKeyFile`, and put it and its key in
 * place of `certFile`/`keyFile` (each renamed over the old one, so a server reading them
 * meanwhile sees the old pair or the new). `chain`: certificates appended after the leaf.
 */
export async function issueServerCertificate(
  {
    caFile,
    caKeyFile,
    certFile,
    keyFile,
    names,
    ips,
    cn = names[0] ?? ips[0],
    days = 30,
    at,
  }: ServerCertificate & {
    caFile: string;
    caKeyFile: string;
    cn?: string;
    days?: number;
    /** Issue it as if the clock stood at this ("2020-01-01" or "2020-01-01 12:00:00"): expiry tests. */
    at?: string;
  },
): Promise<void> {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const stem = `${certFile}.new`;
  await openssl([
    "req",
    ...ec,
    "-keyout",
    `${stem}.key`,
    "-out",
    `${stem}.csr`,
    "-subj",
    `/CN=${cn}`,
  ]);
  const san = [...names.map((n) => `DNS:${n}`), ...ips.map((i) => `IP:${i}`)].join(",");
  await Deno.writeTextFile(
    `${stem}.ext`,
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n`,
  );
  await openssl([
    // -f: the clock stands at `at` (without it, it runs on from there, and a loaded machine
    // dates the certificate a second later than the tests expect).
    ...(at ? ["faketime", "-f", /\d:\d\d$/.test(at) ? at : `${at} 00:00:00`, "openssl"] : []),
    "x509",
    "-req",
    "-in",
    `${stem}.csr`,
    "-CA",
    caFile,
    "-CAkey",
    caKeyFile,
    "-CAcreateserial",
    "-out",
    `${stem}.pem`,
    "-days",
    String(days),
    "-extfile",
    `${stem}.ext`,
  ]);
  await Deno.chmod(`${stem}.key`, 0o600);
  await Deno.rename(`${stem}.key`, keyFile);
  await Deno.rename(`${stem}.pem`, certFile);
  await Deno.remove(`${stem}.csr`).catch(() => {});
  await Deno.remove(`${stem}.ext`).catch(() => {});
}

/** Make a CA (EC P-256, `days` of validity) into `certFile`/`keyFile`; returns its PEM. */
export async function makeCa(
  certFile: string,
  keyFile: string,
  { name, days = 30 }: { name: string; days?: number },
): Promise<string> {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await openssl([
    "req",
    "-x509",
    ...ec,
    "-keyout",
    keyFile,
    "-out",
    certFile,
    "-days",
    String(days),
    "-subj",
    `/CN=${name}`,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  await Deno.chmod(keyFile, 0o600);
  return await Deno.readTextFile(certFile);
}

/** The SHA-256 fingerprint of a PEM certificate file. */
export async function fingerprintOf(certFile: string): Promise<string> {
  return new X509Certificate(await Deno.readTextFile(certFile)).fingerprint256;
}

/** Run openssl with `args`, or `faketime … openssl …` when args start with "faketime". */
async function openssl(args: string[]): Promise<void> {
  const [program, rest] = args[0] === "faketime" ? ["faketime", args.slice(1)] : ["openssl", args];
  const out = await new Deno.Command(program, { args: rest, stdout: "null", stderr: "piped" })
    .output();
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
