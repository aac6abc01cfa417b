#!/usr/bin/python3
"""Make the seeds of fuzz_python (tests/fuzz/seeds/fuzz_python/).

    python3 tests/fuzz/python_seeds.py

A seed is one byte for the layout (0: 3.11, 1: 3.12, 2: 3.13, 3: 3.8, 4:
3.9, 5: 3.10) and then a memory image that fuzz_python reads at 0x10000,
laid out as CPython lays out its objects (offsets as in
src/python/offsets.c): a PyThreadState at the start, its frames (a module,
a function, a generator; the C-stack shims of 3.12 and 3.13; before 3.11,
PyFrameObjects linked by f_back, each with its f_lasti), their code objects
with a real line table (of tests/unit/fixtures/python/linetables.py's
"plain:f": CPython 3.11's location table, 3.9's co_lnotab, 3.10's
co_linetable), and their names as an ASCII, a latin-1, a UCS-2 and a UCS-4
str (compact), and a legacy str. seed-table is that location table alone,
seed-lnotab and seed-table310 the older tables (fuzz_python makes them location
tables too). seed-debug-314 and seed-debug-315 are the first bytes of the
_PyRuntime of Debian's python3.14 and python3.15 (their _Py_DebugOffsets),
when a Debian unstable root is at hand (scripts/roots.sh sid python3.14
python3.15)."""

import struct
from pathlib import Path

BASE = 0x10000
OUT = Path(__file__).resolve().parent / "seeds" / "fuzz_python"

# "plain:f" of CPython 3.11.2: co_firstlineno 1, 70 bytes of code
TABLE = bytes.fromhex(
    "8000d80809884189058041d80708f000010525d80f24d00f249d35a01199389c38"
    "d00f24d10f24d40f24d00824d80b0f8834")

# the same function's tables before 3.11 (linetables-39.h, -310.h): its
# code is 34 bytes
LNOTAB = bytes([0x00, 0x01, 0x08, 0x01, 0x04, 0x01, 0x12, 0x01])
TABLE310 = bytes([0x08, 0x01, 0x04, 0x01, 0x12, 0x01, 0x04, 0x01])

# 3.8 to 3.10: PyFrameObject { ..., f_back 0x18, f_code 0x20, ..., f_lasti }
OLD = dict(old=True, cframe=False, ts_frame=0x18, code=0x20, prev=0x18, firstlineno=0x28,
           filename=0x68, qualname=0x70, linetable=0x78, co_code=0x30, ascii=48,
           compact=72, ready=True, owner=None, entry=None, cstack=None)

LAYOUTS = {
    3: dict(OLD, instr=0x68, table=LNOTAB),
    4: dict(OLD, instr=0x68, table=LNOTAB),
    5: dict(OLD, instr=0x60, table=TABLE310, units=True),
    0: dict(cframe=True, ts_frame=0x38, cf_cur=0x8, code=0x20, prev=0x30, instr=0x38,
            entry=0x44, owner=0x45, cstack=None, firstlineno=0x48, filename=0x70,
            qualname=0x80, linetable=0x88, firsttraceable=0xa8, adaptive=0xb8,
            ascii=48, compact=72, ready=True),
    1: dict(cframe=True, ts_frame=0x38, cf_cur=0x0, code=0x0, prev=0x8, instr=0x38,
            entry=None, owner=0x46, cstack=3, firstlineno=0x44, filename=0x70,
            qualname=0x80, linetable=0x88, firsttraceable=0xb0, adaptive=0xc0,
            ascii=40, compact=56, ready=False),
    2: dict(cframe=False, ts_frame=0x48, cf_cur=None, code=0x0, prev=0x8, instr=0x38,
            entry=None, owner=0x46, cstack=3, firstlineno=0x44, filename=0x70,
            qualname=0x80, linetable=0x88, firsttraceable=0xb8, adaptive=0xc8,
            ascii=40, compact=56, ready=False),
}


class Image:
    def __init__(self):
        self.b = bytearray()

    def alloc(self, n):
        a = BASE + len(self.b)
        self.b += bytes((n + 15) & ~15)
        return a

    def put(self, addr, data):
        o = addr - BASE
        self.b[o:o + len(data)] = data

    def q(self, addr, v):
        self.put(addr, struct.pack("<Q", v))

    def i(self, addr, v):
        self.put(addr, struct.pack("<i", v))


def pystr(im, L, text, compact=True):
    cps = [ord(ch) for ch in text]
    kind = 4 if max(cps, default=0) > 0xffff else 2 if max(cps, default=0) > 0xff else 1
    ascii = kind == 1 and all(c < 128 for c in cps)
    data = b"".join(c.to_bytes(kind, "little") for c in cps)
    if compact:
        head = L["ascii"] if ascii else L["compact"]
        a = im.alloc(head + len(data) + kind)
        im.put(a + head, data)
    else:
        a = im.alloc(L["compact"] + 8)
        d = im.alloc(len(data) + kind)
        im.put(d, data)
        im.q(a + L["compact"], d)
    im.q(a + 16, len(cps))
    state = 1 | kind << 2 | int(compact) << 5 | int(ascii) << 6 | (1 << 7 if L["ready"] else 0)
    im.put(a + 32, struct.pack("<I", state))
    return a


def pybytes(im, data):
    a = im.alloc(32 + len(data) + 1)
    im.q(a + 16, len(data))
    im.put(a + 32, data)
    return a


def code(im, L, qualname, filename, firsttraceable, compact=True):
    c = im.alloc(0x90 if L.get("old") else L["adaptive"] + 70)
    im.q(c + L["qualname"], pystr(im, L, qualname, compact))
    im.q(c + L["filename"], pystr(im, L, filename))
    if L.get("old"):
        im.q(c + L["linetable"], pybytes(im, L["table"]))
        im.q(c + L["co_code"], pybytes(im, bytes(34)))
    else:
        im.q(c + L["linetable"], pybytes(im, TABLE))
        im.i(c + L["firsttraceable"], firsttraceable)
    im.i(c + L["firstlineno"], 1)
    return c


def seed(v):
    L = LAYOUTS[v]
    im = Image()
    ts = im.alloc(0x200)
    codes = [code(im, L, "关数", "/srv/app.py", 1),            # innermost: UCS-2
             code(im, L, "rows", "/srv/db\u00e9.py", 1),       # a generator's
             code(im, L, "Server.\U00010400", "/srv/app.py", 1),
             code(im, L, "<module>", "/srv/app.py", 1, compact=False)]
    frames = [(codes[0], 18, 0, False), (codes[1], 4, 1, False),
              (codes[2], 12, 0, True), (codes[3], 66, 0, True)]
    prev = 0
    if L.get("old"):
        # f_lasti: the last instruction started (3.10: in code units)
        for c, instr, owner, entry in reversed(frames):
            f = im.alloc(0x170)
            im.q(f + L["code"], c)
            im.q(f + L["prev"], prev)
            im.i(f + L["instr"], min(instr, 32) // (2 if L.get("units") else 1))
            prev = f
        im.q(ts + L["ts_frame"], prev)
        return bytes([v]) + bytes(im.b)
    for c, instr, owner, entry in reversed(frames):
        if entry and L["cstack"] is not None:    # the evaluator's shim
            s = im.alloc(80)
            im.q(s + L["prev"], prev)
            im.put(s + L["owner"], bytes([L["cstack"]]))
            prev = s
        f = im.alloc(80)
        im.q(f + L["code"], c)
        im.q(f + L["prev"], prev)
        im.q(f + L["instr"], c + L["adaptive"] + instr)
        im.put(f + L["owner"], bytes([owner]))
        if L["entry"] is not None:
            im.put(f + L["entry"], bytes([int(entry)]))
        prev = f
    if L["cframe"]:
        cf = im.alloc(24)
        im.q(ts + L["ts_frame"], cf)
        im.q(cf + L["cf_cur"], prev)
    else:
        im.q(ts + L["ts_frame"], prev)
    return bytes([v]) + bytes(im.b)


def runtime_bytes(exe, n):
    """The first n bytes of exe's _PyRuntime (in the file: initialised)."""
    import subprocess
    sym = [l.split() for l in subprocess.run(["readelf", "-sW", "--dyn-syms", exe], check=True,
           capture_output=True, text=True).stdout.splitlines()]
    vaddr = next(int(s[1], 16) for s in sym if len(s) >= 8 and s[7] == "_PyRuntime")
    for l in subprocess.run(["readelf", "-lW", exe], check=True, capture_output=True,
                            text=True).stdout.splitlines():
        f = l.split()
        if f and f[0] == "LOAD" and int(f[2], 16) <= vaddr < int(f[2], 16) + int(f[4], 16):
            with open(exe, "rb") as fh:
                fh.seek(vaddr - int(f[2], 16) + int(f[1], 16))
                return fh.read(n)
    raise SystemExit(f"{exe}: _PyRuntime not in the file")


def main():
    import subprocess
    OUT.mkdir(parents=True, exist_ok=True)
    for v, name in ((0, "seed-311"), (1, "seed-312"), (2, "seed-313"), (3, "seed-38"),
                    (4, "seed-39"), (5, "seed-310")):
        (OUT / name).write_bytes(seed(v))
    (OUT / "seed-table").write_bytes(bytes([0]) + TABLE)
    # (fuzz_python takes an old table's format from the first byte's bit 3)
    (OUT / "seed-lnotab").write_bytes(bytes([3]) + LNOTAB)
    (OUT / "seed-table310").write_bytes(bytes([5 | 8]) + TABLE310)
    root = subprocess.run([str(Path(__file__).resolve().parents[2] / "scripts/roots.sh"), "sid",
                           "python3.14", "python3.15"], capture_output=True, text=True)
    if root.returncode == 0:
        for v in ("3.14", "3.15"):
            exe = Path(root.stdout.strip()) / f"usr/bin/python{v}"
            (OUT / f"seed-debug-{v.replace('.', '')}").write_bytes(
                bytes([0]) + runtime_bytes(exe, 888))


main()
