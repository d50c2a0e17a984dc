/**
 * Private account roots for the user and group kinds' tests: never the machine's own /etc.
 * shadow's tools run with `--prefix ROOT` (their own option: the files under ROOT); busybox's
 * applets (built with them, ./_busybox.ts) run in `chroot ROOT`. The file-system adapter
 * reads ROOT's databases, so a file owned by a declared user resolves its name there.
 */
import { posixFileSystem } from "../../os/posix-fs/mod.ts";
import { shadowAccounts } from "../../os/shadow-accounts/mod.ts";
import { busyboxAccounts } from "../../os/busybox-accounts/mod.ts";
import type { Providers } from "../../src/providers.ts";
import { busyboxWithAccounts } from "./_busybox.ts";

/** A private root with its account databases, and the providers that work on it. */
export interface AccountRoot extends AsyncDisposable {
  root: string;
  providers: Providers;
  /** A line of ROOT/etc/<file> for `name`, or undefined. */
  line(file: "passwd" | "group" | "shadow", name: string): Promise<string | undefined>;
  /** Run a tool on ROOT by hand (a person's change), as this world's tools run. */
  byHand(argv: string[]): Promise<void>;
}

const BASE = {
  passwd: "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n",
  group: "root:x:0:\ndaemon:x:1:\n",
  shadow: "root:*:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
  gshadow: "root:*::\ndaemon:*::\n",
};

async function makeRoot(prefix: string): Promise<string> {
  const root = await Deno.makeTempDir({ prefix });
  await Deno.mkdir(`${root}/etc`);
  for (const [name, text] of Object.entries(BASE)) {
    await Deno.writeTextFile(`${root}/etc/${name}`, text, { mode: 0o644 });
  }
  return root;
}

async function must(argv: string[]): Promise<void> {
  const out = await new Deno.Command(argv[0], { args: argv.slice(1), stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${argv.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

function world(root: string, accounts: Providers["accounts"], via: string[]): AccountRoot {
  return {
    root,
    providers: {
      fs: posixFileSystem({ passwdPath: `${root}/etc/passwd`, groupPath: `${root}/etc/group` }),
      accounts,
    },
    async line(file, name) {
      const text = await Deno.readTextFile(`${root}/etc/${file}`);
      return text.split("\n").find((l) => l.startsWith(`${name}:`));
    },
    byHand: (argv) => must([...via, ...argv]),
    async [Symbol.asyncDispose]() {
      await Deno.remove(root, { recursive: true });
    },
  };
}

/** shadow's tools on a private root (`--prefix`), with this machine's login.defs. */
export async function shadowRoot(): Promise<AccountRoot> {
  const root = await makeRoot("noxacc-shadow-");
  await Deno.copyFile("/etc/login.defs", `${root}/etc/login.defs`);
  const w = world(root, shadowAccounts({ prefix: root }), []);
  // By hand, a person's shadow tool on the same root.
  return { ...w, byHand: ([tool, ...args]) => must([tool, "--prefix", root, ...args]) };
}

/** busybox's applets in a chroot holding only them. */
export async function busyboxRoot(): Promise<AccountRoot> {
  const busybox = await busyboxWithAccounts();
  const root = await makeRoot("noxacc-busybox-");
  await Deno.mkdir(`${root}/bin`);
  await Deno.copyFile(busybox, `${root}/bin/busybox`);
  await Deno.chmod(`${root}/bin/busybox`, 0o755);
  for (const applet of ["adduser", "addgroup", "deluser", "delgroup", "passwd"]) {
    await Deno.symlink("busybox", `${root}/bin/${applet}`);
  }
  const via = ["/usr/sbin/chroot", root];
  return world(root, busyboxAccounts({ root, via }), via);
}
