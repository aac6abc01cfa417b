"""A Python workload with known calls, for the tests of py: probes.

    pycalls.py plain      run it
    pycalls.py profile    run it under a sys.setprofile counter (threads
                          too, through threading.setprofile), then print
                          {"qualname": calls} as JSON: every 'call' event
                          of this file's functions, as CPython's own
                          profiling sees them
    pycalls.py monitor    (3.12 and later) run it counting through
                          sys.monitoring (PROFILER_ID: PY_START, PY_RESUME,
                          PY_THROW, as profiling sees calls), then print the
                          same JSON after "own ": a count taken in the same
                          run as uscope's, beside its own tool
    pycalls.py wait       print "ready", run it when a line comes on stdin,
                          print "done", and wait for another line (-p)
    pycalls.py serve      (-p) print "ready", then answer lines: "tools":
                          sys.monitoring's tools (3.12 and later; [] before),
                          "go": run it counting its own calls (monitor's way
                          from 3.12, profile's before), printing "own " and the
                          JSON, "end": exit

The calls: a recursion of a known depth, methods, a generator (each resume
is a call, as profiling sees it), an exception that unwinds through frames,
a function sorted() calls from C, a lambda, threads, each with its own
count of calls, an async def awaited (each resume a call too), and a
function whose code object is compiled while the workload runs (after an
attach, a function uscope could not have seen before)."""
import asyncio
import json
import sys
import threading
import types

DEPTH = 25
THREADS = 3


def recurse(n):
    if n:
        return recurse(n - 1) + 1
    return 0


class Account:
    def __init__(self):
        self.total = 0

    def add(self, x):
        self.total += x
        return self

    @staticmethod
    def check(v):
        return v >= 0


def numbers(n):
    for i in range(n):
        yield i


def fail(depth):
    if depth == 0:
        raise ValueError("deep")
    fail(depth - 1)


def unwind():
    try:
        fail(4)
    except ValueError:
        return 1
    return 0


def key(x):
    return -x


def worker(k):
    for i in range(10 * (k + 1)):
        Account().add(i)


async def pause(n):
    await asyncio.sleep(0)
    return n


async def gather():
    return sum([await pause(i) for i in range(3)])


def define_late():
    """A function whose code object is made now."""
    module = compile("def late(n):\n    return n * 2\n", __file__, "exec")
    code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    return types.FunctionType(code, globals())


def work():
    late = define_late()
    assert [late(i) for i in range(4)] == [0, 2, 4, 6]
    assert asyncio.run(gather()) == 3
    assert recurse(DEPTH) == DEPTH
    a = Account()
    for i in range(7):
        a.add(i)
    assert Account.check(a.total)
    assert sum(numbers(5)) == 10
    assert unwind() == 1
    assert sorted([3, 1, 2], key=key) == [3, 2, 1]
    assert (lambda v: v + 1)(1) == 2
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def profiled(prefix=""):
    counts = {}
    me = __file__

    def prof(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == me:
            q = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            counts[q] = counts.get(q, 0) + 1

    threading.setprofile(prof)
    sys.setprofile(prof)
    work()
    sys.setprofile(None)
    threading.setprofile(None)
    counts.pop("profiled.<locals>.prof", None)
    counts.pop("prof", None)    # (before 3.11: its co_name)
    print(prefix + json.dumps(counts, sort_keys=True), flush=True)


def monitored():
    m = sys.monitoring
    counts = {}
    me = __file__

    def call(code, offset, *rest):
        if code.co_filename == me:
            counts[code.co_qualname] = counts.get(code.co_qualname, 0) + 1

    m.use_tool_id(m.PROFILER_ID, "pycalls")
    for ev in (m.events.PY_START, m.events.PY_RESUME, m.events.PY_THROW):
        m.register_callback(m.PROFILER_ID, ev, call)
    m.set_events(m.PROFILER_ID, m.events.PY_START | m.events.PY_RESUME | m.events.PY_THROW)
    work()
    m.set_events(m.PROFILER_ID, 0)
    m.free_tool_id(m.PROFILER_ID)
    counts.pop("monitored.<locals>.call", None)
    # (prefixed: under uscope --json this line shares its stdout)
    print("own " + json.dumps(counts, sort_keys=True), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    if mode == "profile":
        profiled()
    elif mode == "monitor":
        monitored()
    elif mode == "serve":
        print("ready", flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "tools":
                m = getattr(sys, "monitoring", None)
                print("tools " + json.dumps([m.get_tool(i) for i in range(6)] if m else []),
                      flush=True)
            elif cmd == "go" and hasattr(sys, "monitoring"):
                monitored()
            elif cmd == "go":
                profiled("own ")
            elif cmd == "end":
                break
    elif mode == "wait":
        print("ready", flush=True)
        sys.stdin.readline()
        work()
        print("done", flush=True)
        sys.stdin.readline()
    else:
        work()
