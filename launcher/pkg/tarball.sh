# shellcheck shell=sh disable=SC2154,SC2034 # the launcher's variables: it sources this file
# The launcher's tarball path (NOX_MESH_HOST_PKG=tarball: the tarball unpacked into a prefix,
# by hand or by the launcher from a stage the host left): the installed version from the
# VERSION file the tarball lays down, a copy of the installation kept per version and
# unpacked over the prefix for a rollback, and the staged upgrade (launcher/README.md,
# "Staged upgrade"). Sourced by nox-mesh-host-launch.

# installed_version: the VERSION file the tarball lays down (and the launcher unpacks itself):
# never ask a program that may be the broken one. Only a tarball older than that file is asked.
installed_version() {
	if [ -f "$prefix/lib/$name/VERSION" ]; then
		v=$(head -n 1 "$prefix/lib/$name/VERSION") && [ -n "$v" ] && echo "$v"
	else
		v=$(timeout 60 "$bin" version 2>/dev/null | head -n 1) && [ -n "$v" ] && echo "${v##* }"
	fi
}

# pack_installation VERSION DIR: DIR/nox-mesh-host-VERSION.tar.gz of the tarball's files as
# they lie in the prefix: the program and its siblings (launcher, install-init), lib/ (the
# runtime, bundle and init files) and share/ (substrate.lock, licence). A compiled build
# has no runtime or bundle in lib/; what is not there is not packed.
pack_installation() {
	program=${bin#"$prefix"/}
	if [ "$program" = "$bin" ] || [ ! -f "$prefix/$program" ]; then
		say "$bin is not a file inside $prefix (NOX_MESH_HOST_PREFIX)"
		return 1
	fi
	out=$2/$name-$1.tar.gz
	set --
	for f in "$program" "$program-launch" "$program-install-init" "lib/$name" "share/$name"; do
		[ ! -e "$prefix/$f" ] || set -- "$@" "$f"
	done
	# gzip -1: about a third of the default level's time for the runtime (≈ 100 MiB), a
	# tenth larger; made before every first start of a version, so it delays that start.
	fail=$( { { tar -cf - -C "$prefix" -- "$@" || echo tar >&3; } | gzip -1 >"$out" || echo gzip; } 3>&1)
	[ -z "$fail" ] || { say "packing the installation in $prefix failed ($fail)"; return 1; }
}

# keep_file VERSION DIR: DIR/nox-mesh-host-VERSION.tar.gz, the installation as it lies now.
keep_file() {
	pack_installation "$1" "$2" && record_kept "$1" "$2" "$(checksum_of "$2/$name-$1.tar.gz")"
}

kept_files() { one_kept_file "$@"; }

# install_kept: the kept copy ($files) unpacked over the prefix.
install_kept() { tar -xzf "$files" -C "$prefix" >&2; }

# staged: whether the host left a stage (a directory, a link, anything at upgrade/).
staged() { [ -e "$state/upgrade" ] || [ -L "$state/upgrade" ]; }

# refuse_stage REASON...: the staged upgrade is not unpacked: record why for the host
# (it then never stages that digest again), remove the stage, start the current version.
refuse_stage() {
	put "$state/upgrade-refused" "${staged_sum:-unknown} ${staged_version:-unknown}: $*"
	rm -rf "$state/upgrade" "$state/rollback/.upgrade.tar.gz"
	say "REFUSED the staged upgrade: $*; starting the installed version"
}

# layout_ok LISTING NAMES: every line of `tar -tzvf` is a regular file or a directory inside
# the tarball's layout (os/tarball_layout.ts, which os/tarball-self/_ustar.ts enforces;
# tests/tarball_layout_test.ts compares the paths here, in pack_installation and in
# switch_to with it); says what is not. NAMES is
# `tar -tzf` of the same file: busybox tar prints a name raw, so a name holding a newline
# would list as several lines, each of them forged; the names alone then differ from the
# last fields of the long listing (GNU tar prints a newline as \n: a refused character).
layout_ok() {
	printf '%s\n' "$1" | while IFS= read -r line; do
		[ -n "$line" ] || continue
		set -f # no pathname expansion of the fields
		# shellcheck disable=SC2086 # split into fields on purpose
		set -- $line
		kind=$(printf '%.1s' "$1")
		if [ "$#" -ne 6 ]; then
			say "staged tarball: '$line' is a link or a name with spaces"
			return 1
		fi
		entry=$6
		case $kind in
		-) case $entry in
			bin/"$name" | bin/"$name"-launch | bin/"$name"-install-init) ;;
			lib/"$name"/?* | share/"$name"/?*) ;;
			*) say "staged tarball: $entry is outside the tarball's layout"; return 1 ;;
			esac ;;
		d) case $entry in
			lib/"$name"/ | share/"$name"/ | lib/"$name"/?*/ | share/"$name"/?*/) ;;
			*) say "staged tarball: directory $entry is outside the tarball's layout"; return 1 ;;
			esac ;;
		*) say "staged tarball: $entry is not a regular file or directory ($1)"; return 1 ;;
		esac
		case $1 in ?????w* | ????????w* | *[sStT]*)
			say "staged tarball: $entry has mode $1 (set-id, sticky, group or other writable)"
			return 1 ;;
		esac
		case /${entry%/}/ in # a directory is listed with one trailing /
		*/../* | */./* | *//* | *[!A-Za-z0-9._/+~-]*)
			say "staged tarball: $entry has a '..' or '.' component or an unusual character"
			return 1 ;;
		esac
	done || return 1
	if [ "$(printf '%s\n' "$1" | awk 'NF == 6 { print $6; next } { print "?" }')" != "$2" ]; then
		say "staged tarball: its names listed alone differ from its long listing (a name holding a newline?)"
		return 1
	fi
}

# apply_staged_upgrade: the host staged the next version in $state/upgrade/ (tarball
# only; it may not write its installation): checked against the sha256 it recorded,
# listed and refused unless every entry is a regular file or directory of the layout,
# unpacked over the prefix, removed. A refusal is recorded in upgrade-refused and the
# installed version starts: never half-installed. Checked and unpacked from a copy in
# rollback/ (which the host may not write), so the file cannot change between the two.
apply_staged_upgrade() {
	[ "$pkg" = tarball ] || return 0
	[ -e "$state/upgrade" ] || [ -L "$state/upgrade" ] || return 0
	staged_sum='' staged_version=''
	if [ -L "$state/upgrade" ] || [ ! -d "$state/upgrade" ]; then
		refuse_stage "$state/upgrade is not a directory"
		return 0
	fi
	record=$state/upgrade/staged file=$state/upgrade/$name.tar.gz
	if [ ! -f "$record" ] || [ -L "$record" ] || [ ! -f "$file" ] || [ -L "$file" ]; then
		refuse_stage "the stage is incomplete (no regular staged and $name.tar.gz in it)"
		return 0
	fi
	line=$(head -n 1 "$record")
	staged_sum=${line%% *} staged_version=${line#* }
	case $staged_sum in *[!0-9a-f]* | '') staged_sum='' ;; esac
	if [ "${#staged_sum}" -ne 64 ] || ! is_version "$staged_version"; then
		staged_sum='' staged_version=''
		refuse_stage "$record does not hold 'SHA256 VERSION'"
		return 0
	fi
	copy=$state/rollback/.upgrade.tar.gz
	mkdir -p "$state/rollback"
	rm -f "$copy"
	if ! cp "$file" "$copy"; then
		refuse_stage "copying $file failed"
		return 0
	fi
	got=$(sha256sum <"$copy" | cut -d' ' -f1)
	if [ "$got" != "$staged_sum" ]; then
		refuse_stage "its sha256 is $got, not the recorded $staged_sum"
		return 0
	fi
	if ! listing=$(tar -tzvf "$copy" 2>/dev/null) || [ -z "$listing" ] ||
		! names=$(tar -tzf "$copy" 2>/dev/null); then
		refuse_stage "tar cannot list it (not a gzip'd tar archive, or cut short)"
		return 0
	fi
	if ! why=$(layout_ok "$listing" "$names" 2>&1); then
		refuse_stage "${why#nox-mesh-host-launch: }"
		return 0
	fi
	say "applying the staged upgrade to $name $staged_version (sha256 $staged_sum)"
	# Unpacked beside the installation first (-o: every file root's, whatever owner the
	# archive names, GNU tar and busybox alike); nothing in place has changed yet.
	beside=$prefix/.$name-upgrade
	rm -rf "$beside"
	if ! mkdir -m 700 "$beside" || ! tar -xzof "$copy" -C "$beside" >&2; then
		rm -rf "$beside"
		refuse_stage "unpacking it beside $prefix failed (tar); nothing installed was changed"
		return 0
	fi
	if ! switch_to "$beside"; then
		# Part of it may be in place: what starts now fails and is rolled back to the
		# copy of the installed version kept just before.
		rm -rf "$beside"
		refuse_stage "moving it into $prefix failed; the rollback restores the kept copy if the host then fails"
		return 0
	fi
	rm -rf "$beside" "$state/upgrade" "$copy"
	say "switched $prefix to $name $staged_version"
}

# switch_to DIR: move the unpacked tarball in DIR (beside the installation, on its file
# system) into place by renames: each program file at once (a running one, this script
# included, keeps its old file), lib/ and share/ each by two renames (the old one aside,
# the new one in, the old one removed); what the new tarball lacks stays as it is.
switch_to() {
	for f in "bin/$name" "bin/$name-launch" "bin/$name-install-init"; do
		[ ! -f "$1/$f" ] || mv -f "$1/$f" "$prefix/$f" || return 1
	done
	for d in "lib/$name" "share/$name"; do
		[ -d "$1/$d" ] || continue
		mkdir -p "$prefix/${d%/*}" || return 1
		rm -rf "$prefix/$d.old"
		if [ -e "$prefix/$d" ] || [ -L "$prefix/$d" ]; then mv "$prefix/$d" "$prefix/$d.old" || return 1; fi
		mv "$1/$d" "$prefix/$d" || return 1
		rm -rf "$prefix/$d.old"
	done
}
