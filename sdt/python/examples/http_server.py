#!/usr/bin/env python3
"""Python's http.server with a USDT probe defined at run time:
simplehttp:file_transfer(client address, file path, size), fired for every
file or directory listing a GET sends (the libstapsdt example of Collabora's
"eBPF user tracing" article, with uscope_sdt).

    python3 http_server.py [PORT] [--bind ADDRESS] [--directory DIR]

    sudo uscope trace -p PID 'simplehttp:%simplehttp:file_transfer \\
        client=$arg1:string path=$arg2:string size=$arg3'
    sudo bpftrace -p PID -e 'usdt:*:simplehttp:file_transfer {
        printf("%s %s %d\\n", str(arg0), str(arg1), arg2); }'

PORT 0 picks a free port. The first line on stdout says where it serves,
and its pid."""

import argparse
import os
import signal
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:
    import uscope_sdt
except ImportError:     # run from the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import uscope_sdt

provider = uscope_sdt.Provider("simplehttp")
file_transfer = provider.add_probe("file_transfer", uscope_sdt.STRING, uscope_sdt.STRING,
                                   uscope_sdt.UINT64)
provider.load()


class TracedHandler(SimpleHTTPRequestHandler):
    def do_GET(self):
        f = self.send_head()
        if f:
            try:
                # the arguments cost a path translation and a stat: only
                # when a tracer is attached
                if file_transfer.enabled:
                    if hasattr(f, "getbuffer"):     # a directory listing
                        size = len(f.getbuffer())
                    else:
                        size = os.fstat(f.fileno()).st_size
                    file_transfer.fire(self.address_string(), self.translate_path(self.path),
                                       size)
                self.copyfile(f, self.wfile)
            finally:
                f.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("port", type=int, nargs="?", default=8000)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--directory", default=os.getcwd())
    args = ap.parse_args()

    handler = partial(TracedHandler, directory=args.directory)
    server = ThreadingHTTPServer((args.bind, args.port), handler)
    host, port = server.server_address[:2]
    print(f"serving {args.directory} on http://{host}:{port}/ pid {os.getpid()}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        provider.close()


if __name__ == "__main__":
    main()
