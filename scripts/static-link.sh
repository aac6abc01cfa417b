#!/usr/bin/env bash
# make static's link and its checks: runs the link command CMD... (which
# writes OUT), then refuses the result unless it is one self-contained
# executable.
#
#   scripts/static-link.sh OUT CMD...
#
# - The link: glibc's static archive warns, at link time, about each of its
#   functions that would load shared objects at run time (dlopen, NSS:
#   getpwnam, gethostbyname, getaddrinfo, ...). uscope's link may draw only
#   getaddrinfo, which src/core/static.c wraps to take numeric addresses (no
#   NSS); dlopen is wrapped and never reaches glibc's. Any other such warning
#   fails the build: a new call that would reach NSS or dlopen at run time,
#   which the static binary cannot do safely on another distribution.
# - The result: no program interpreter (PT_INTERP), no DT_NEEDED, the
#   wrappers in, and it runs.
set -euo pipefail
out=${1:?usage: static-link.sh OUT CMD...}
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$@" 2>"$log"; then
	cat "$log" >&2
	exit 1
fi
# ld prints each such warning as "...: in function `f':" then
# "...: warning: Using 'NAME' in statically linked applications ...".
bad=$(grep -o "Using '[^']*' in statically linked" "$log" | cut -d"'" -f2 | sort -u |
	grep -vx 'getaddrinfo' || true)
grep -v -e "in function \`" -e "Using 'getaddrinfo' in statically linked" "$log" >&2 || true
if [ -n "$bad" ]; then
	grep -B1 "Using '" "$log" >&2
	echo "static: the link draws $(echo $bad) from glibc, which would load shared objects" \
	     "at run time (dlopen, NSS): keep them out of uscope's paths, or wrap them in" \
	     "src/core/static.c" >&2
	rm -f "$out"
	exit 1
fi
fail() {
	echo "static: $out: $*" >&2
	rm -f "$out"
	exit 1
}
# (captured first: grep -q closing a pipe early fails it under pipefail)
phdrs=$(readelf -lW "$out")
dyn=$(readelf -dW "$out")
syms=$(nm "$out")
grep -q 'INTERP' <<<"$phdrs" && fail "has a program interpreter (not a static link)"
grep -q '(NEEDED)' <<<"$dyn" && fail "needs shared libraries: $(grep NEEDED <<<"$dyn")"
# glibc's own dlopen is in the binary (its static dlopen support comes with
# getaddrinfo's NSS code), but every call the objects and libraries make goes
# to the wrapper: checked that the wrappers are there.
grep -q ' T __wrap_dlopen$' <<<"$syms" && grep -q ' T __wrap_getaddrinfo$' <<<"$syms" ||
	fail "lacks src/core/static.c's wrappers"
"$(realpath "$out")" --version >/dev/null || fail "does not run"
exit 0
