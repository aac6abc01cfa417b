"""A Python workload with known stacks, for the tests of Python frame walking
(CPython 3.8 and later).

At known points it calls pymark(TAG) of libpymark.so (argv[1]) through
ctypes, on the same line as it takes traceback.extract_stack(), so that a
tool stopped at pymark must see exactly that stack. At the end it prints every
stack it took, outermost frame first:

    stack TAG TID NFRAMES
    frame QUALNAME<TAB>FILENAME<TAB>LINE       (NFRAMES lines; LINE -1: none)

The calls: a recursion of a known depth, methods, a closure, generators, a
coroutine, exceptions unwinding through frames (a finally, a with's __exit__,
an except), a key function sorted() calls from C, a lambda and a
comprehension, names and a file name outside ASCII, a deep recursion, a
garbage collection run in a frame's prologue (a gc callback), and
threads (alive together, each at its own depth). The main thread calls
through ctypes.PyDLL, which keeps the GIL; the threads through ctypes.CDLL,
which releases it. A tag below 100 is the main thread's.

    pystack.py LIB            run, print the stacks
    pystack.py LIB wait       ... then wait for stdin's end (a tracer reads
                              the code objects afterwards)
    pystack.py LIB first      print "ready", run on a line of stdin (-p),
                              then as wait
"""
import ctypes
import gc
import sys
import threading
import traceback

_gil = ctypes.PyDLL(sys.argv[1])
_nogil = ctypes.CDLL(sys.argv[1])
for _f in (_gil.pymark, _nogil.pymark):
    _f.argtypes = [ctypes.c_int]
    _f.restype = ctypes.c_int

records = []
lock = threading.Lock()


def name(code):
    """A code object's qualified name; before 3.11 code objects have none,
    and its co_name stands for it (as in uscope)."""
    return getattr(code, "co_qualname", code.co_name)


def capture():
    """The caller's stack as traceback sees it, outermost first, with each
    frame's qualname (traceback's FrameSummary has co_name only)."""
    f = sys._getframe(1)
    summary = traceback.extract_stack(f)
    frames = [fr for fr, _ in traceback.walk_stack(f)][::-1]
    assert len(frames) == len(summary)
    out = []
    for fr, s in zip(frames, summary):
        assert s.name == fr.f_code.co_name
        out.append((name(fr.f_code), s.filename, -1 if s.lineno is None else s.lineno))
    return out


def checkpoint(tag, lib=_gil):
    stack = capture(); ret = lib.pymark(tag)  # noqa: E702 (one line: one point)
    assert ret == tag + 1, ret
    with lock:
        records.append((tag, threading.get_native_id(), stack))


def recurse(n, tag=1):
    if n:
        return recurse(n - 1, tag) + 1
    checkpoint(tag)
    return 0


class Shape:
    def area(self):
        checkpoint(2)

    class Inner:
        @staticmethod
        def helper():
            checkpoint(14)


def make_closure():
    def inner():
        checkpoint(15)
    return inner


def numbers():
    for i in range(3):
        if i == 1:
            checkpoint(3)
        yield i


def consume():
    total = 0
    for x in numbers():
        total += x
    return total


def fail(depth):
    if depth == 0:
        raise ValueError("deep")
    fail(depth - 1)


def unwinder():
    try:
        fail(3)
    finally:
        checkpoint(4)


class Guard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        checkpoint(5)
        return True


def guarded():
    with Guard():
        fail(2)


def catcher():
    try:
        fail(2)
    except ValueError:
        checkpoint(6)


def keyfunc(x):
    if x == 1:
        checkpoint(7)
    return -x


async def coro():
    checkpoint(8)


def drive():
    c = coro()
    try:
        c.send(None)
    except StopIteration:
        pass


UNICODE_SRC = (
    "def 関数():\n"
    "    checkpoint(9)\n"
    "class 𐐀:\n"
    "    def método(self):\n"
    "        checkpoint(10)\n"
)


def unicode_names():
    ns = {"checkpoint": checkpoint}
    exec(compile(UNICODE_SRC, "<dyn-été-😀>", "exec"), ns)
    ns["関数"]()
    ns["𐐀"]().método()
    kept.append(ns)     # its code objects outlive the run: a tracer reads them later


kept = []


def comprehension():
    [checkpoint(12) for _ in range(1)]
    (lambda: checkpoint(13))()


gc_armed = [False]


def gc_callback(phase, info):
    if gc_armed[0] and phase == "start":
        gc_armed[0] = False
        checkpoint(16)


def cell_maker():
    x = 1
    y = 2

    def inner():
        return x + y
    return inner


def collect_in_prologue():
    """A collection that making cell_maker's second cell starts, before its
    first line: on 3.11 the collection runs there and then (its frame is
    incomplete: traceback does not show it); 3.12 and later run it at the
    next eval breaker, once the frame is complete."""
    old = gc.get_threshold()
    gc.callbacks.append(gc_callback)
    gc.collect()
    gc.set_threshold(1)
    gc_armed[0] = True
    try:
        cell_maker()
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(gc_callback)
    assert not gc_armed[0]


def worker(i, barrier):
    barrier.wait()
    thread_recurse(i + 2, 100 + i)
    barrier.wait()


def thread_recurse(n, tag):
    if n:
        return thread_recurse(n - 1, tag) + 1
    checkpoint(tag, _nogil)
    return 0


def threads(count=3):
    barrier = threading.Barrier(count)
    ts = [threading.Thread(target=worker, args=(i, barrier)) for i in range(count)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    recurse(40)
    Shape().area()
    Shape.Inner.helper()
    make_closure()()
    assert consume() == 3
    try:
        unwinder()
    except ValueError:
        pass
    guarded()
    catcher()
    assert sorted([3, 1, 2], key=keyfunc) == [3, 2, 1]
    drive()
    unicode_names()
    recurse(100, 11)
    comprehension()
    collect_in_prologue()
    threads()


if len(sys.argv) > 2 and sys.argv[2] == "first":
    # a tracer attaches (-p) before the checkpoints: they run on a line
    print("ready", flush=True)
    sys.stdin.readline()
checkpoint(0)
main()
for tag, tid, stack in sorted(records):
    print("stack", tag, tid, len(stack))
    for q, f, line in stack:
        print("frame %s\t%s\t%d" % (q, f, line))
if len(sys.argv) > 2 and sys.argv[2] in ("wait", "first"):
    # a tracer that reads the code objects afterwards: they live until
    # stdin ends
    sys.stdout.flush()
    sys.stdin.read()
