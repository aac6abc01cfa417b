"""Where `make install` puts uscope_sdt for PREFIX (argv[1]): the directory
this Python looks in for that prefix. Debian's python3 looks in
/usr/local/lib/python3.X/dist-packages for /usr/local and in
/usr/lib/python3/dist-packages for /usr (its posix_local and deb_system
schemes); elsewhere, PREFIX/lib/python3.X/site-packages (add it to
PYTHONPATH)."""

import sys
import sysconfig

prefix = sys.argv[1].rstrip("/") or "/"
schemes = sysconfig.get_scheme_names()
if prefix == "/usr/local" and "posix_local" in schemes:
    # posix_local is {base}/local/lib/...: its base is /usr
    print(sysconfig.get_path("purelib", "posix_local", vars={"base": "/usr"}))
elif prefix == "/usr" and "deb_system" in schemes:
    print(sysconfig.get_path("purelib", "deb_system", vars={"base": "/usr"}))
else:
    print(sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix}))
