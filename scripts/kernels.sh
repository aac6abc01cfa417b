#!/usr/bin/env bash
# Debian's own kernel of SUITE (bullseye: 5.10, bookworm: 6.1, trixie:
# 6.12), for the kernel matrix (tests/vm): prints a directory holding
# vmlinuz, initrd.img (the virtio and ext4 modules and tests/vm/rdinit.c)
# and release (the kernel's uname -r).
#
#   scripts/kernels.sh bookworm
#
# The package is found and fetched with apt-get through an apt
# configuration of the suite's own (its sources.list, lists and cache under
# the cache directory: the host's apt is left alone), unpacked with
# dpkg-deb. Cached outside the checkout, in $USCOPE_CACHE (default
# /var/cache/uscope, as scripts/roots.sh's roots): a second run uses what
# the first fetched and needs no network. Made under a temporary name and
# renamed when complete, under a lock. Needs root (apt-get), cpio and kmod
# (depmod).
set -euo pipefail
suite=${1:?usage: kernels.sh SUITE}
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${USCOPE_CACHE:-/var/cache/uscope}/kernels
dir=$cache/$suite
# The initramfs's init is part of what is cached: a change to it makes a
# new initramfs (its hash in the stamp).
rdsum=$(sha1sum "$here/tests/vm/rdinit.c" | cut -c1-12)
if [ -e "$dir/.uscope-kernel" ] && [ "$(sed -n 2p "$dir/.uscope-kernel")" = "$rdsum" ]; then
	echo "$dir"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "kernels: fetching the $suite kernel needs root (apt-get)" >&2
	exit 1
fi
for t in apt-get dpkg-deb depmod cpio cc; do
	command -v $t >/dev/null || {
		echo "kernels: $t is missing (scripts/deps.sh installs it)" >&2
		exit 1
	}
done
mkdir -p "$cache"
exec 9>"$cache/.lock-$suite"
flock 9
if [ -e "$dir/.uscope-kernel" ] && [ "$(sed -n 2p "$dir/.uscope-kernel")" = "$rdsum" ]; then
	echo "$dir"
	exit 0
fi
tmp=$cache/.tmp-$suite.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
apt=$cache/.apt-$suite
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
echo "deb http://deb.debian.org/debian $suite main" >"$apt/sources.list"
aptopts=(-q -o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
	 -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
	 -o APT::Sandbox::User=root)
echo "kernels: fetching Debian $suite's kernel (cached in $dir)" >&2
apt-get "${aptopts[@]}" update >"$tmp/apt.log" 2>&1 || {
	cat "$tmp/apt.log" >&2
	echo "kernels: apt-get update for $suite failed" >&2
	exit 1
}
# linux-image-amd64 depends on the suite's current kernel package
pkg=$(apt-cache "${aptopts[@]}" depends linux-image-amd64 |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1)
[ -n "$pkg" ] || {
	echo "kernels: no kernel package found in $suite" >&2
	exit 1
}
(cd "$tmp" && apt-get "${aptopts[@]}" download "$pkg" >>"$tmp/apt.log" 2>&1) || {
	cat "$tmp/apt.log" >&2
	echo "kernels: apt-get download $pkg failed" >&2
	exit 1
}
dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
# (merged /usr: trixie's modules are under usr/lib/modules)
base=$tmp/x
[ -d "$base/lib/modules" ] || base=$tmp/x/usr
release=$(ls "$base/lib/modules")
depmod -b "$base" "$release"
mods=$base/lib/modules/$release
# The modules the guest needs before its root is mounted, with what they
# depend on, dependencies first (modules.dep lists a module's, transitively).
rd=$tmp/rd
mkdir -p "$rd/lib/modules"
: >"$rd/modules"
declare -A seen
add() {	# a module's path under $mods, after its dependencies
	local m=$1 dep
	[ -n "${seen[$m]:-}" ] && return
	seen[$m]=1
	for dep in $(sed -n "s|^$m: *||p" "$mods/modules.dep"); do
		add "$dep"
	done
	local name
	name=$(basename "$m")
	case $name in
	*.ko.xz) xz -dc "$mods/$m" >"$rd/lib/modules/${name%.xz}"; name=${name%.xz} ;;
	*.ko.zst) zstd -qdc "$mods/$m" >"$rd/lib/modules/${name%.zst}"; name=${name%.zst} ;;
	*) cp "$mods/$m" "$rd/lib/modules/$name" ;;
	esac
	echo "/lib/modules/$name" >>"$rd/modules"
}
for want in virtio_pci virtio_blk ext4 crc32c_generic; do
	m=$(grep -E "(^|/)$want\.ko(\.xz|\.zst)?:" "$mods/modules.dep" | head -n1 | cut -d: -f1 || true)
	[ -n "$m" ] && add "$m"	# (absent: built in)
done
cc -static -Os -o "$rd/init" "$here/tests/vm/rdinit.c"
(cd "$rd" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp/initrd.img"
cp "$tmp/x/boot/vmlinuz-$release" "$tmp/vmlinuz"
cp "$tmp/x/boot/config-$release" "$tmp/config"
echo "$release" >"$tmp/release"
rm -rf "$tmp/x" "$rd" "$tmp"/*.deb "$tmp/apt.log"
printf '%s\n%s\n' "$pkg" "$rdsum" >"$tmp/.uscope-kernel"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
