/**
 * The providers, one line each: the only place a provider is named outside its folder
 * (tests/architecture_test.ts). Adding a provider is its folder (with its provider.ts)
 * and its line here; `deno task providers` then rewrites what is derived from the list
 * (the permission sets' allow-run and allow-read lines, the `host` task). The order is
 * the order of those lines.
 */
import type { ProviderDescriptor } from "./provider.ts";
import { PROVIDER as archPacman } from "./arch-pacman/provider.ts";
import { PROVIDER as alpineApk } from "./alpine-apk/provider.ts";
import { PROVIDER as debianApt } from "./debian-apt/provider.ts";
import { PROVIDER as systemd } from "./systemd/provider.ts";
import { PROVIDER as openrc } from "./openrc/provider.ts";
import { PROVIDER as containerCli } from "./container-cli/provider.ts";
import { PROVIDER as wireguard } from "./wireguard/provider.ts";
import { PROVIDER as nftables } from "./nftables/provider.ts";
import { PROVIDER as sysctl } from "./sysctl/provider.ts";
import { PROVIDER as posixFs } from "./posix-fs/provider.ts";
import { PROVIDER as commandRunner } from "./command-runner/provider.ts";
import { PROVIDER as tarballSelf } from "./tarball-self/provider.ts";
import { PROVIDER as shadowAccounts } from "./shadow-accounts/provider.ts";
import { PROVIDER as busyboxAccounts } from "./busybox-accounts/provider.ts";
import { PROVIDER as systemdMount } from "./systemd-mount/provider.ts";
import { PROVIDER as openrcMount } from "./openrc-mount/provider.ts";

/** Every provider. */
export const PROVIDERS: readonly ProviderDescriptor[] = [
  archPacman,
  alpineApk,
  debianApt,
  systemd,
  openrc,
  containerCli,
  wireguard,
  nftables,
  sysctl,
  posixFs,
  commandRunner,
  tarballSelf,
  shadowAccounts,
  busyboxAccounts,
  systemdMount,
  openrcMount,
];
