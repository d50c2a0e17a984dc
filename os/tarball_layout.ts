/**
 * The tarball's layout, the one place it is written down: where it unpacks and which
 * paths it carries. packaging/make_package.ts lays the tarball out by it, os/tarball-self
 * (its reader, _ustar.ts, and its VERSION file) accepts only what lies inside it, and the
 * launcher (launcher/pkg/tarball.sh, POSIX sh: packing the installation, checking a staged
 * tarball, switching to it, reading VERSION; launcher/nox-mesh-host-launch: where its include
 * lies) and install-init (its init files) spell the same paths, which
 * tests/tarball_layout_test.ts reads out of them and compares with these.
 */

/** Where the tarball unpacks (`tar -xz -C TARBALL_PREFIX`); its entries are relative to it. */
export const TARBALL_PREFIX = "/usr/local";

/** The program's name, which every path of the layout carries. */
const NAME = "nox-mesh-host";

/** What the tarball carries, relative to TARBALL_PREFIX. */
export const TARBALL_LAYOUT = {
  /** The files at the top of bin/: the program, its launcher, its init installer. */
  binFiles: [NAME, `${NAME}-launch`, `${NAME}-install-init`],
  /**
   * The directories it fills, each replaced whole: the runtime, bundle and init files; the
   * substrate and licence.
   */
  dirs: [`lib/${NAME}`, `share/${NAME}`],
  /** The program's own directory (the first of `dirs`). */
  libDir: `lib/${NAME}`,
  /** Its shared data (the second of `dirs`). */
  shareDir: `share/${NAME}`,
  /** The launcher's package kinds' includes (launcher/pkg/: the tarball's `tarball.sh`). */
  launchDir: `lib/${NAME}/launch`,
  /** The init files install-init puts in place. */
  initDir: `lib/${NAME}/init`,
  /** The version installed, one line (what the launcher and the tarball package adapter read). */
  versionFile: `lib/${NAME}/VERSION`,
} as const;
