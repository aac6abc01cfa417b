#!/usr/bin/env bash
# A Debian root of SUITE (bullseye, bookworm, trixie, sid) holding PKG...,
# made once by debootstrap and cached: prints its directory.
#
#   scripts/roots.sh sid python3.14 python3.15
#
# The tests that run uscope in another distribution's userland (the static
# binary, Python in a container, the kernel matrix's guest) share these
# roots. They are cached outside the checkout, in $USCOPE_CACHE (default
# /var/cache/uscope), so a clean clone on the same machine reuses them; a
# fresh machine makes each in about a minute. A root is made under a
# temporary name and renamed when complete, under a lock, so two runs at
# once neither see half a root nor make it twice. Needs root (debootstrap).
set -euo pipefail
suite=${1:?usage: roots.sh SUITE [PKG...]}
shift
cache=${USCOPE_CACHE:-/var/cache/uscope}/roots
pkgs=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
key=$(printf '%s %s' "$suite" "$pkgs" | sha1sum | cut -c1-12)
dir=$cache/$suite-$key
if [ -e "$dir/.uscope-root" ]; then
	echo "$dir"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "roots: making a $suite root needs root (debootstrap)" >&2
	exit 1
fi
command -v debootstrap >/dev/null || {
	echo "roots: debootstrap is missing (scripts/deps.sh installs it)" >&2
	exit 1
}
mkdir -p "$cache"
exec 9>"$cache/.lock-$suite-$key"
flock 9
if [ ! -e "$dir/.uscope-root" ]; then
	tmp=$cache/.tmp-$suite-$key.$$
	rm -rf "$tmp"
	log=$cache/$suite-$key.log
	echo "roots: making a $suite root${pkgs:+ with $pkgs} (cached in $dir)" >&2
	if ! debootstrap --variant=minbase ${pkgs:+--include="$pkgs"} "$suite" "$tmp" \
		>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		rm -rf "$tmp"
		echo "roots: debootstrap of $suite failed (its log: $log)" >&2
		exit 1
	fi
	printf '%s\n' "$suite" "$pkgs" >"$tmp/.uscope-root"
	rm -rf "$dir"
	mv "$tmp" "$dir"
fi
echo "$dir"
