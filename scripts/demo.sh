#!/usr/bin/env bash
# make demo: trace a bundled toy server with the kernel engine.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/demo
cc -O1 -g -o build/demo/server demo/server.c
if [ "$(id -u)" != 0 ]; then
	echo "demo: the tracefs engine needs root; run 'sudo make demo'" >&2
	exit 1
fi
set -x
./uscope trace \
	'handle id=+0($arg1):s32 path=+0(+8($arg1)):string size=+16($arg1):s64' \
	'r:handle cost=$retval:s64' \
	-- build/demo/server 4
