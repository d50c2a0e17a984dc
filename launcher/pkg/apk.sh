# shellcheck shell=sh disable=SC2154,SC2034 # the launcher's variables: it sources this file
# The launcher's apk path (NOX_MESH_HOST_PKG=apk: Alpine Linux). Sourced by
# nox-mesh-host-launch; launcher/README.md.
#
# abuild splits the host's package (nox-mesh-host; -openrc, the init script; -doc; the
# completions), all of one origin (o: in apk's database). Installing the main package's
# file alone purges -openrc when the repository no longer offers its build, so every
# installed package of the origin is kept, and all are installed together in one apk add.

pkgdb=${NOX_MESH_HOST_PKG_DB:-/lib/apk/db/installed}
# Its world file, and where the host's own apk add keeps the files it installs
# (--cache-dir; the host may not write rollback/, apk run by it may).
apk_world=${NOX_MESH_HOST_APK_WORLD:-/etc/apk/world}
apk_cache=$state/rollback/.apk-cache
# Made with rollback/ before every start (the host looks for it: os/alpine-apk).
rollback_dir=$apk_cache

# installed_version: the host version now installed (without -rN).
installed_version() {
	v=$(apk list --installed "$name" 2>/dev/null | grep "^$name-[0-9]") && v=${v%% *} &&
		v=${v#"$name-"} && echo "${v%-r*}"
}

# checksum_of FILE: the identity apk itself computes for FILE (its C: in the database).
checksum_of() { apk index "$1" 2>/dev/null | tar -xzOf - APKINDEX | sed -n 's/^C://p'; }

# apk_origin: "NAME VERSION C" of each installed package of the host's origin (C: the
# identity apk recorded, "Q1" + base64 of the SHA-1 of the package's control segment).
apk_origin() {
	awk -v n="$name" 'function done() { if (p != "" && (o == n || (o == "" && p == n))) print p, v, c
		p = ""; v = ""; c = ""; o = "" }
		/^$/ { done(); next } /^P:/ { p = substr($0, 3) } /^V:/ { v = substr($0, 3) }
		/^C:/ { c = substr($0, 3) } /^o:/ { o = substr($0, 3) } END { done() }' "$pkgdb"
}

# apk_keep_files VERSION DIR: each installed package of the origin into DIR as NAME-VER.apk,
# found where the host's own apk add left it (--cache-dir $apk_cache), in apk's cache, or
# else downloaded now (apk fetch NAME: the newest build offered, which is the installed one
# only while the repository has not moved on); each checked against its C:. DIR/checksum
# lists "C FILE", a line each.
apk_keep_files() {
	list=$(apk_origin) || list=''
	if ! printf '%s\n' "$list" | awk -v n="$name" -v v="$1-r" '$1 == n && index($2, v) == 1 { f = 1 } END { exit !f }'; then
		say "$pkgdb does not list $name $1 as installed"
		return 1
	fi
	missing=''
	while read -r p v c; do
		for f in "$apk_cache/$p-$v".*.apk "${NOX_MESH_HOST_PKG_CACHE:-/etc/apk/cache}/$p-$v".*.apk; do
			[ -f "$f" ] && [ "$(checksum_of "$f")" = "$c" ] && cp "$f" "$2/$p-$v.apk" && break
		done
		[ -f "$2/$p-$v.apk" ] || missing="$missing $p"
	done <<EOF
$list
EOF
	# shellcheck disable=SC2086 # package names, split on purpose
	[ -z "$missing" ] || apk fetch --output "$2" $missing >&2 || true
	while read -r p v c; do
		if [ ! -f "$2/$p-$v.apk" ] || [ "$(checksum_of "$2/$p-$v.apk")" != "$c" ]; then
			say "found no package file of $p $v with the checksum apk recorded ($c)"
			return 1
		fi
		printf '%s %s\n' "$c" "$p-$v.apk" >>"$2/checksum"
	done <<EOF
$list
EOF
	for f in "$2"/*.apk; do grep -qF " ${f##*/}" "$2/checksum" || rm -f "$f"; done
	rm -f "$apk_cache"/*.apk # kept now: what the host's apk add left there is done with
}

# apk_kept DIR VERSION: the kept files of DIR, a line each, each checked against the C:
# recorded when it was kept; prints why instead, and fails, on any mismatch.
apk_kept() {
	if [ ! -f "$1/checksum" ]; then
		echo "the package files of $2 are missing: expected them and their checksum list in $1/"
		return 1
	fi
	n=0 files=''
	while read -r c f; do
		case $f in
		*/* | .* | *[!A-Za-z0-9._+~-]* | '') echo "$1/checksum names '$f', which is not a file in $1/"; return 1 ;;
		esac
		if [ ! -e "$1/$f" ] && [ ! -L "$1/$f" ]; then
			echo "the kept package file $1/$f is missing (its checksum list names it): a person" \
				"must put that very file back, or remove $1/ (no rollback to $2 then)"
			return 1
		fi
		got=$(checksum_of "$1/$f" 2>/dev/null) || got=''
		if [ -z "$c" ] || [ "$got" != "$c" ]; then
			echo "the kept package file $1/$f does not match the checksum recorded when it was kept" \
				"($c; now ${got:-unreadable}): refusing to install it"
			return 1
		fi
		n=$((n + 1)) files="$files$1/$f "
	done <"$1/checksum"
	set -- "$1" "$1"/*.apk
	if [ "$n" -eq 0 ] || [ "$#" -ne "$((n + 1))" ]; then
		echo "$1/ holds other package files than its checksum list names: refusing to guess"
		return 1
	fi
	echo "$files"
}

# apk_roll_back DIR FROM: install the kept files of DIR ($files, checked by apk_kept) in one
# apk add, apk verify first (a file apk would refuse changes nothing). apk writes each file's identity into world
# (NAME><C): the host's own entry keeps that pin (an unrelated apk upgrade does not undo the
# rollback), the other entries are put back as they were (the subpackages then follow the
# host's next upgrade). If apk stops part-way, the kept files of FROM (the version rolled
# back from) are installed again and world put back as it was, and the launcher halts.
apk_roll_back() {
	saved=$state/rollback/.world
	before=$(apk_origin)
	rm -f "$saved"
	cp "$apk_world" "$saved" || halt "cannot copy $apk_world before rolling back: nothing was changed"
	# shellcheck disable=SC2086 # the kept files, checked by apk_kept (no spaces in them)
	apk verify $files >&2 || halt "apk verify refused the kept package files of $good in $1/: nothing was changed"
	# shellcheck disable=SC2086
	if apk add --no-progress $files >&2; then
		new=$(awk -v n="$name" 'function named(l) { sub(/^!/, "", l); sub(/[=<>~@].*$/, "", l); return l }
			FILENAME == ARGV[1] { if (named($0) == n) pin = $0; next }
			named($0) != n { print } END { if (pin != "") print pin }' "$apk_world" "$saved" | LC_ALL=C sort)
		put "$apk_world" "$new" || say "WARNING: could not put back the entries of $apk_world other than $name's"
		rm -f "$saved"
		return 0
	fi
	why="apk could not install the kept files of $good (in $1/)"
	if is_version "$2" && [ "$2" != "$good" ] && again=$(apk_kept "$state/rollback/$2" "$2"); then
		# shellcheck disable=SC2086
		apk add --no-progress $again >&2 || why="$why, nor those of $2 again"
	else
		why="$why, and no verified copy of $2 is kept to install again"
	fi
	put "$apk_world" "$(cat "$saved")" || why="$why; $apk_world could not be put back (saved in $saved)"
	if [ "$(apk_origin)" = "$before" ]; then
		halt "$why; $apk_world and the installed packages of $name are as before the rollback ($2)"
	fi
	halt "$why; installed now: $(apk_origin | tr '\n' ';') before: $(printf '%s' "$before" | tr '\n' ';')" \
		"- a person must bring them back in step (apk add)"
}

# keep_file VERSION DIR: every package of the host's origin (apk_keep_files).
keep_file() { apk_keep_files "$1" "$2"; }

# kept_files DIR VERSION: every kept file of DIR, each checked (apk_kept); halts otherwise.
kept_files() {
	files=$(apk_kept "$1" "known-good version $2") || halt "$files"
	shown=$1/
}

# install_kept FROM: all of them in one apk add (apk_roll_back, which halts itself on a failure
# it can say more about).
install_kept() { apk_roll_back "$dir" "$1"; }
