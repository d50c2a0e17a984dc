# shellcheck shell=sh disable=SC2154,SC2034 # the launcher's variables: it sources this file
# The launcher's pacman path (NOX_MESH_HOST_PKG=pacman: Arch Linux): what is installed, the
# package file kept for a rollback (checked against the SHA-256 pacman's sync database
# recorded for it), and its install. Sourced by nox-mesh-host-launch; launcher/README.md.

pkgdb=${NOX_MESH_HOST_PKG_DB:-/var/lib/pacman}

# installed_version: the host version now installed (pkgver, without pkgrel).
installed_version() {
	v=$(pacman -Q "$name" 2>/dev/null) && v=${v#"$name "} && echo "${v%-*}"
}

# recorded_checksum BUILD: the checksum pacman recorded for the package file of BUILD
# (pkgver-pkgrel), from the sync database's %SHA256SUM%.
recorded_checksum() {
	for d in "$pkgdb/sync"/*.db; do
		s=$(tar -xOf "$d" "$name-$1/desc" 2>/dev/null | sed -n '/^%SHA256SUM%$/{n;p;q;}') || s=''
		[ -z "$s" ] || { echo "$s"; return 0; }
	done
	return 1
}

# keep_file VERSION DIR: the package file of the installed VERSION from pacman's cache into
# DIR, with the checksum pacman recorded for it (record_kept).
keep_file() {
	full=$(pacman -Q "$name") && full=${full#"$name "}
	sum=$(recorded_checksum "$full") || { say "pacman's sync database has no checksum of $name $full"; return 1; }
	for f in "${NOX_MESH_HOST_PKG_CACHE:-/var/cache/pacman/pkg}/$name-$full"-*.pkg.tar*; do
		case $f in *.sig | *'*'*) continue ;; esac
		cp "$f" "$2/" && break
	done
	record_kept "$1" "$2" "$sum"
}

kept_files() { one_kept_file "$@"; }

# install_kept: the kept file ($files); pacman checks the package's signature itself.
install_kept() { pacman -U --noconfirm "$files" >&2; }
