# shellcheck shell=sh disable=SC2154,SC2034 # the launcher's variables: it sources this file
# The launcher's apt path (NOX_MESH_HOST_PKG=apt: Debian, Ubuntu): what dpkg says is
# installed, the .deb kept for a rollback (from apt's cache, checked against the SHA-256 that
# apt's signed indexes record for that version), and its install with apt-get. Sourced by
# nox-mesh-host-launch; launcher/README.md.

apt_cache=${NOX_MESH_HOST_PKG_CACHE:-/var/cache/apt/archives}

# deb_version: the Debian version ([epoch:]upstream-revision) dpkg holds installed; fails
# for any other state (half-installed, half-configured …).
deb_version() {
	# shellcheck disable=SC2016 # dpkg-query's own ${…} fields
	v=$(dpkg-query -W -f '${db:Status-Status} ${Version}' -- "$name" 2>/dev/null) || return 1
	case $v in 'installed '?*) echo "${v#installed }" ;; *) return 1 ;; esac
}

# installed_version: the host version now installed (upstream: no epoch, no revision).
installed_version() { v=$(deb_version) && v=${v#*:} && echo "${v%-*}"; }

# recorded_checksums VERSION: the SHA-256 of each package file of the host at VERSION that
# apt's indexes (from the repositories' signed Release files) record.
recorded_checksums() { apt-cache show -- "$name=$1" 2>/dev/null | sed -n 's/^SHA256: //p'; }

# keep_file VERSION DIR: the .deb of the installed VERSION from apt's cache into DIR, the one
# whose SHA-256 apt's indexes record (record_kept).
keep_file() {
	full=$(deb_version) || { say "dpkg reports no installed $name"; return 1; }
	sums=$(recorded_checksums "$full")
	[ -n "$sums" ] || { say "apt's indexes record no checksum of $name $full"; return 1; }
	sum=$(printf '%s\n' "$sums" | head -n 1)
	for f in "$apt_cache/${name}_$(printf '%s' "$full" | sed 's/:/%3a/')"_*.deb; do
		[ -f "$f" ] || continue
		s=$(checksum_of "$f")
		if printf '%s\n' "$sums" | grep -qxF "$s"; then
			cp "$f" "$2/" && sum=$s && break
		fi
	done
	record_kept "$1" "$2" "$sum"
}

kept_files() { one_kept_file "$@"; }

# install_kept: the kept .deb ($files, checked) with apt-get, never a question asked; a
# downgrade of exactly that file allowed.
install_kept() {
	DEBIAN_FRONTEND=noninteractive apt-get install -q -y --allow-downgrades \
		--no-install-recommends -o Dpkg::Options::=--force-confdef \
		-o Dpkg::Options::=--force-confold -- "$files" >&2
}
