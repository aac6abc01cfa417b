"""A gdb script (gdb -batch -x gdb_frames.py): print the stopped thread's
backtrace, one line a frame, innermost first, as

    FRAME {"pc": ..., "type": ..., "path": ..., "fileoff": ..., "name": ...,
           "file": ..., "line": ...}

pc is frame.pc() (frame 0: where it stopped; a caller: the return address,
as uscope's $ustack shows it), type gdb's frame type (normal, inline,
tailcall, sigtramp, ...), path the file mapped at pc and fileoff pc's offset
in that file (from /proc/PID/maps), so that a frame compares with another
process's, whatever both load addresses. Run by tests/e2e/test_stacks.py
(it compares uscope's $ustack with this, frame by frame); not a test module."""

import json

import gdb

TYPES = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline",
         gdb.TAILCALL_FRAME: "tailcall", gdb.SIGTRAMP_FRAME: "sigtramp",
         gdb.DUMMY_FRAME: "dummy", gdb.ARCH_FRAME: "arch"}


def maps():
    out = []
    with open(f"/proc/{gdb.selected_inferior().pid}/maps") as f:
        for line in f:
            p = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in p[0].split("-"))
            out.append((lo, hi, int(p[2], 16), p[5].strip() if len(p) > 5 else ""))
    return out


def where(m, pc):
    for lo, hi, pgoff, path in m:
        if lo <= pc < hi and path.startswith("/"):
            return path, pc - lo + pgoff
    return None, None


def main():
    m = maps()
    f = gdb.newest_frame()
    while f is not None:
        pc = f.pc()
        path, off = where(m, pc)
        sal = f.find_sal()
        print("FRAME " + json.dumps({
            "pc": pc, "type": TYPES.get(f.type(), str(f.type())), "path": path,
            "fileoff": off, "name": f.name(),
            "file": sal.symtab.filename if sal.symtab else None,
            "line": sal.line if sal.symtab else 0}), flush=True)
        f = f.older()
    print("FRAMES END", flush=True)


main()
