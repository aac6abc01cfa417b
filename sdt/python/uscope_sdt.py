"""USDT probes defined at run time, from Python (libuscope-sdt).

    import uscope_sdt

    provider = uscope_sdt.Provider("simplehttp")
    transfer = provider.add_probe("file_transfer", uscope_sdt.STRING,
                                  uscope_sdt.STRING, uscope_sdt.UINT64)
    provider.load()
    ...
    if transfer.enabled:                 # a tracer is attached
        transfer.fire(client, path, size)

Loading builds a small shared object in memory whose .note.stapsdt
describes the probes exactly as <sys/sdt.h> would, and maps it into this
process: USDT consumers (uscope, bpftrace through BCC) see the probes like
any USDT probe (uscope list --usdt -p PID). A probe is enabled while a tracer holds its
semaphore up; firing calls the probe's stub with the arguments in the SysV
argument registers, integers as the declared size and sign, strings as
their address (ask the tracer for a string: $arg2:string, str(arg1)).

This module is ctypes over libuscope-sdt.so: nothing to compile per Python
version, and the one library serves C and Python alike. The costs are
ctypes': under a microsecond to fire, some tens of nanoseconds for
`enabled`, which is a read of the semaphore through a ctypes object made
at load time (bench/sdt.py). Check `enabled` before computing costly arguments.

The library is looked for, in order, at $USCOPE_SDT_LIB, where
`make install` put it, in the source tree's build/sdt/, and where the
dynamic loader looks (libuscope-sdt.so.0)."""

import ctypes
import ctypes.util
import os
from enum import IntEnum
from pathlib import Path

__all__ = ["Error", "ArgType", "Provider", "Probe", "INT8", "UINT8", "INT16", "UINT16",
           "INT32", "UINT32", "INT64", "UINT64", "STRING", "MAX_ARGS"]

# `make install` writes the installed library's path here.
_INSTALLED_LIB = None

MAX_ARGS = 6


class ArgType(IntEnum):
    """A probe argument's type: the size the note gives it, negative when
    signed (enum usc_arg_type in uscope/sdt.h)."""
    UINT8 = 1
    INT8 = -1
    UINT16 = 2
    INT16 = -2
    UINT32 = 4
    INT32 = -4
    UINT64 = 8
    INT64 = -8
    STRING = 16


INT8, UINT8 = ArgType.INT8, ArgType.UINT8
INT16, UINT16 = ArgType.INT16, ArgType.UINT16
INT32, UINT32 = ArgType.INT32, ArgType.UINT32
INT64, UINT64 = ArgType.INT64, ArgType.UINT64
STRING = ArgType.STRING


class Error(OSError):
    """A libuscope-sdt call failed: errno and the library's message."""


class _CProbe(ctypes.Structure):
    # struct usc_probe: the two public fields
    _fields_ = [("semaphore", ctypes.c_void_p), ("fire", ctypes.c_void_p)]


def _candidates():
    env = os.environ.get("USCOPE_SDT_LIB")
    if env:
        yield env
    if _INSTALLED_LIB:
        yield _INSTALLED_LIB
    tree = Path(__file__).resolve().parents[2] / "build" / "sdt" / "libuscope-sdt.so"
    if tree.exists():
        yield str(tree)
    yield ctypes.util.find_library("uscope-sdt") or "libuscope-sdt.so.0"


def _load_library():
    errors = []
    for cand in _candidates():
        try:
            lib = ctypes.CDLL(cand, use_errno=True)
            break
        except OSError as e:
            errors.append(f"{cand}: {e}")
    else:
        raise ImportError("cannot load libuscope-sdt: " + "; ".join(errors))
    P = ctypes.c_void_p
    lib.usc_sdt_error.restype = ctypes.c_char_p
    lib.usc_sdt_error.argtypes = []
    lib.usc_provider_new.restype = ctypes.c_int
    lib.usc_provider_new.argtypes = [ctypes.c_char_p, ctypes.POINTER(P)]
    lib.usc_provider_add_probev.restype = ctypes.c_int
    lib.usc_provider_add_probev.argtypes = [P, ctypes.POINTER(ctypes.POINTER(_CProbe)),
                                            ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                            ctypes.c_uint]
    for fn in ("usc_provider_load", "usc_provider_unload", "usc_provider_fd"):
        getattr(lib, fn).restype = ctypes.c_int
        getattr(lib, fn).argtypes = [P]
    lib.usc_provider_free.restype = None
    lib.usc_provider_free.argtypes = [P]
    return lib


_lib = _load_library()


def _check(ret, what):
    if ret < 0:
        msg = _lib.usc_sdt_error().decode(errors="replace")
        raise Error(-ret, f"{what}: {msg or os.strerror(-ret)}")
    return ret


def _name(s, what):
    if isinstance(s, str):
        s = s.encode()
    if not isinstance(s, bytes):
        raise TypeError(f"{what} must be str or bytes, not {type(s).__name__}")
    return s


_RANGE = {t: ((-(1 << (8 * -t - 1)), (1 << (8 * -t - 1)) - 1) if t < 0 else (0, (1 << (8 * t)) - 1))
          for t in ArgType if t != ArgType.STRING}


class Probe:
    """A probe of a Provider (made by Provider.add_probe)."""

    def __init__(self, provider, name, types, handle):
        self.provider = provider
        self.name = name
        self.types = tuple(types)
        self._handle = handle
        self._sema = None
        self._fire = None
        # the stub's prototype: a char * for a string (ctypes passes the
        # bytes object's own buffer), a 64-bit integer otherwise (the note
        # reads the register's low bytes, with the declared sign)
        self._proto = ctypes.CFUNCTYPE(None, *[ctypes.c_char_p if t == ArgType.STRING
                                               else ctypes.c_uint64 for t in self.types])
        self._ranges = [None if t == ArgType.STRING else _RANGE[t] for t in self.types]

    def _bind(self):
        h = self._handle.contents
        self._sema = ctypes.c_uint16.from_address(h.semaphore)
        self._fire = self._proto(h.fire)

    def _unbind(self):
        self._sema = None
        self._fire = None

    @property
    def enabled(self):
        """True while a tracer is attached (the probe's semaphore is up)."""
        s = self._sema
        return s is not None and s.value != 0

    def fire(self, *args):
        """Fire the probe with one value per declared argument: int for the
        integer types (checked against the type's range), str, bytes or None
        for STRING. Does nothing before the provider is loaded."""
        ranges = self._ranges
        if len(args) != len(ranges):
            raise TypeError(f"probe {self.name} takes {len(ranges)} argument"
                            f"{'' if len(ranges) == 1 else 's'}, not {len(args)}")
        fire = self._fire
        if fire is None:
            return
        regs = list(args)
        for i, r in enumerate(ranges):
            v = regs[i]
            if r is None:
                if isinstance(v, str):
                    regs[i] = v.encode(errors="surrogateescape")
                elif isinstance(v, bytearray):
                    regs[i] = bytes(v)
                elif v is not None and not isinstance(v, bytes):
                    raise TypeError(f"probe {self.name} argument {i + 1} is a string, "
                                    f"not {type(v).__name__}")
            elif type(v) is not int or not r[0] <= v <= r[1]:
                if not isinstance(v, int):
                    raise TypeError(f"probe {self.name} argument {i + 1} is an integer, "
                                    f"not {type(v).__name__}")
                if not r[0] <= v <= r[1]:
                    raise OverflowError(f"probe {self.name} argument {i + 1}: {v} is out of "
                                        f"range for {self.types[i].name.lower()}")
            elif v < 0:
                regs[i] = v & 0xFFFFFFFFFFFFFFFF
        fire(*regs)

    def __repr__(self):
        types = ", ".join(t.name.lower() for t in self.types)
        return f"<uscope_sdt.Probe {self.provider.name}:{self.name}({types})>"


class Provider:
    """A USDT provider: add probes, load(), then check and fire them."""

    def __init__(self, name):
        if isinstance(name, bytes):
            name = name.decode()
        self.name = name
        self._p = ctypes.c_void_p()
        _check(_lib.usc_provider_new(_name(name, "provider name"), ctypes.byref(self._p)),
               f"provider {name}")
        self.probes = {}

    def add_probe(self, name, *types):
        """A probe with up to 6 argument types (ArgType, or their names:
        "int32", "string", ...). Before load()."""
        if isinstance(name, bytes):
            name = name.decode()
        ts = []
        for t in types:
            if isinstance(t, str):
                try:
                    t = ArgType[t.upper()]
                except KeyError:
                    raise ValueError(f"probe {name}: unknown argument type {t!r}") from None
            ts.append(int(t))
        arr = (ctypes.c_int * max(len(ts), 1))(*ts)
        h = ctypes.POINTER(_CProbe)()
        _check(_lib.usc_provider_add_probev(self._live(), ctypes.byref(h), _name(name, "name"),
                                            arr, len(ts)), f"probe {self.name}:{name}")
        probe = Probe(self, name, [ArgType(t) for t in ts], h)
        self.probes[name] = probe
        return probe

    def load(self):
        """Build the shared object and map it: tracers see the probes."""
        _check(_lib.usc_provider_load(self._live()), f"provider {self.name}")
        for p in self.probes.values():
            p._bind()

    def unload(self):
        """Unmap it: the probes are gone (firing them does nothing)."""
        for p in self.probes.values():
            p._unbind()
        _check(_lib.usc_provider_unload(self._live()), f"provider {self.name}")

    @property
    def loaded(self):
        return bool(self._p) and _lib.usc_provider_fd(self._p) >= 0

    @property
    def fd(self):
        """The memfd that holds the loaded object (/proc/PID/fd/N), or -1."""
        return _lib.usc_provider_fd(self._p) if self._p else -1

    def close(self):
        """Unload (if loaded) and free the provider."""
        if self._p:
            for p in self.probes.values():
                p._unbind()
            _lib.usc_provider_free(self._p)
            self._p = ctypes.c_void_p()

    def _live(self):
        if not self._p:
            raise ValueError(f"provider {self.name} is closed")
        return self._p

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"<uscope_sdt.Provider {self.name} {len(self.probes)} probes" \
               f"{' loaded' if self.loaded else ''}>"
