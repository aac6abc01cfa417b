#!/usr/bin/env bash
# make static: the static archives Debian does not ship, built from Debian's
# own source packages, and copied to OUTDIR (build/static).
#
#   scripts/static-deps.sh OUTDIR
#
# Every library uscope links has a static archive in its Debian -dev package
# (libelf, libdw, libbpf, libtracefs, libtraceevent, zlib, lzma, bzip2,
# libiberty), but for Zydis: libzydis-dev ships libZydis.so only. So Zydis's
# source package, at the version of the installed libzydis-dev (whose headers
# uscope is compiled against), is fetched with `apt-get source` from the
# machine's own Debian mirror (the one libzydis-dev came from) through an apt
# configuration of its own (a deb-src line, its own lists: the machine's apt
# setup is not touched), and built as Debian's rules build it (CMake, the
# hardening flags of dpkg-buildflags, the system's Zycore headers), as a static
# library instead of a shared one, position-independent for -static-pie.
# Zydis calls nothing of Zycore's (its headers only): no Zycore archive is
# needed.
#
# The build is kept outside the checkout, in $USCOPE_CACHE (default
# /var/cache/uscope, or ~/.cache/uscope when that is not writable), keyed by
# the version, so every worktree and clean clone of the machine reuses it: a
# fresh machine pays the download (600 KB) and a build of about a minute, once.
set -euo pipefail
out=${1:?usage: static-deps.sh OUTDIR}
pkg=libzydis-dev
src=$(dpkg-query -W -f='${source:Package}' $pkg 2>/dev/null) || {
	echo "static-deps: $pkg is not installed (scripts/deps.sh installs it)" >&2
	exit 1
}
ver=$(dpkg-query -W -f='${source:Version}' $pkg)
bver=$(dpkg-query -W -f='${Version}' $pkg)
for tool in cmake dpkg-source dpkg-buildflags; do
	command -v $tool >/dev/null || {
		echo "static-deps: $tool is missing (scripts/deps.sh installs it)" >&2
		exit 1
	}
done
cache=${USCOPE_CACHE:-/var/cache/uscope}
mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache=${XDG_CACHE_HOME:-$HOME/.cache}/uscope
dir=$cache/static/$src-$ver
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ ! -e "$dir/libZydis.a" ]; then
	# The mirror and suite libzydis-dev was installed from, as apt sees them:
	#   500 http://deb.debian.org/debian bookworm/main amd64 Packages
	read -r uri suite comp < <(apt-cache policy $pkg | awk -v want="$bver" '
		$1 == "***" && NF == 3 { v = $2; next }	# " *** VERSION PRIO": the installed one
		NF == 2 && $2 ~ /^[0-9]+$/ { v = $1; next }	# "     VERSION PRIO"
		v == want && $2 ~ /:\/\// { n = split($3, s, "/"); print $2, s[1], (n > 1 ? s[2] : "main"); exit }') || true
	if [ -z "${uri:-}" ]; then
		echo "static-deps: cannot tell which Debian mirror $pkg $ver came from (apt-cache policy $pkg)" >&2
		exit 1
	fi
	apt=$dir/apt
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	key=/usr/share/keyrings/debian-archive-keyring.gpg
	echo "deb-src [signed-by=$key] $uri $suite ${comp:-main}" > "$apt/sources.list"
	opts=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	      -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Debug::NoLocking=true
	      -o APT::Sandbox::User="$(id -un)")
	echo "static-deps: fetching $src $ver's source from $uri $suite (deb-src)" >&2
	apt-get -qq "${opts[@]}" update >&2
	rm -rf "$dir/src"
	mkdir -p "$dir/src"
	# apt-get checks the files against the archive's signed Sources index;
	# dpkg-source then cannot check the .dsc's own signature (its uploader's
	# key is not on the machine) and says so: that goes to the log.
	(cd "$dir/src" && apt-get -qq "${opts[@]}" source --download-only "$src=$ver" >&2 &&
	 dpkg-source -x ./*.dsc tree >"$dir/unpack.log" 2>&1)
	echo "static-deps: building libZydis.a (log: $dir/build.log)" >&2
	# dpkg-buildflags: the flags Debian builds its packages with (hardening).
	if ! (eval "$(dpkg-buildflags --export=sh)"
	      cmake -S "$dir/src/tree" -B "$dir/src/build" -DCMAKE_BUILD_TYPE=None \
		-DBUILD_SHARED_LIBS=OFF -DZYDIS_BUILD_SHARED_LIB=OFF -DZYAN_SYSTEM_ZYCORE=ON \
		-DZYDIS_BUILD_TOOLS=OFF -DZYDIS_BUILD_EXAMPLES=OFF -DZYDIS_BUILD_MAN=OFF \
		-DZYDIS_BUILD_DOXYGEN=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON &&
	      cmake --build "$dir/src/build" -j "$(nproc)") >"$dir/build.log" 2>&1; then
		tail -n 20 "$dir/build.log" >&2
		echo "static-deps: building Zydis failed (its log: $dir/build.log)" >&2
		exit 1
	fi
	cp "$dir/src/build/libZydis.a" "$dir/libZydis.a.tmp"
	mv "$dir/libZydis.a.tmp" "$dir/libZydis.a"
	rm -rf "$dir/src" "$apt"
fi
mkdir -p "$out"
cp "$dir/libZydis.a" "$out/libZydis.a"
