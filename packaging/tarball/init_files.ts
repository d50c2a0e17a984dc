/**
 * The tarball's init files, derived from the packages' own (never copied): the systemd unit
 * of packaging/arch/ and the OpenRC script and conf.d of packaging/alpine/, with the
 * tarball's paths (/usr/local/bin) and package kind (`tarball`: the launcher rolls back from
 * its kept copy of the installed files). Each change names the exact text it replaces, so
 * an edit of the source that removes it fails the build instead of shipping a file for the
 * wrong paths.
 */
import { HostError } from "../../src/errors.ts";

/** An init file of a package no longer holds what the tarball's derivation replaces. */
export class InitDerivationError extends HostError {
  constructor(what: string, where: string) {
    super("packaging.tarball-init", what, {
      where,
      hint: "update packaging/tarball/init_files.ts to the changed file",
    });
  }
}

/** Where the tarball puts the program and its launcher. */
export const TARBALL_BIN = "/usr/local/bin";

type Edit = readonly [from: string | RegExp, to: string];

function derive(text: string, source: string, edits: readonly Edit[]): string {
  let out = text;
  for (const [from, to] of edits) {
    const found = typeof from === "string" ? out.includes(from) : from.test(out);
    if (!found) throw new InitDerivationError(`no ${String(from)} to replace`, source);
    out = typeof from === "string" ? out.replaceAll(from, to) : out.replace(from, to);
  }
  return out;
}

/** The packages' programs (/usr/bin/nox-mesh-host, …-launch) → the tarball's. */
const PROGRAMS: Edit = [/\/usr\/bin\/nox-mesh-host/g, `${TARBALL_BIN}/nox-mesh-host`];

/** The tarball's systemd unit, from packaging/arch/nox-mesh-host.service. */
export function tarballUnit(archUnit: string, source = "packaging/arch/nox-mesh-host.service") {
  return derive(archUnit, source, [
    [
      /^# Starts the launcher at boot\./m,
      "# nox-mesh-host from the tarball (packaging/tarball/init_files.ts made this from\n" +
      "# packaging/arch/nox-mesh-host.service). Starts the launcher at boot.",
    ],
    ["Environment=NOX_MESH_HOST_PKG=pacman", "Environment=NOX_MESH_HOST_PKG=tarball"],
    PROGRAMS,
  ]);
}

/** The tarball's OpenRC script, from packaging/alpine/nox-mesh-host.initd. */
export function tarballInitd(alpineInitd: string, source = "packaging/alpine/nox-mesh-host.initd") {
  return derive(alpineInitd, source, [
    [
      /^# Starts nox-mesh-host-launch at boot\./m,
      "# nox-mesh-host from the tarball (packaging/tarball/init_files.ts made this from\n" +
      "# packaging/alpine/nox-mesh-host.initd). Starts nox-mesh-host-launch at boot.",
    ],
    [': "${package_kind:=apk}"', ': "${package_kind:=tarball}"'],
    PROGRAMS,
  ]);
}

/** The tarball's conf.d (its defaults shown, as in Alpine's), from packaging/alpine/. */
export function tarballConfd(alpineConfd: string, source = "packaging/alpine/nox-mesh-host.confd") {
  return derive(alpineConfd, source, [
    ["#package_kind=apk", "#package_kind=tarball"],
    PROGRAMS,
  ]);
}
