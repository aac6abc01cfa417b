"""A Python workload with known calls, for the tests of py: probes.

    pycalls.py plain      run it
    pycalls.py profile    run it under a sys.setprofile counter (threads
                          too, through threading.setprofile), then print
                          {"qualname": calls} as JSON: every 'call' event
                          of this file's functions, as CPython's own
                          profiling sees them
    pycalls.py wait       print "ready", run it when a line comes on stdin,
                          print "done", and wait for another line (-p)

The calls: a recursion of a known depth, methods, a generator (each resume
is a call, as profiling sees it), an exception that unwinds through frames,
a function sorted() calls from C, a lambda, and threads, each with its own
count of calls."""
import json
import sys
import threading

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


def work():
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


def profiled():
    counts = {}
    me = __file__

    def prof(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == me:
            q = frame.f_code.co_qualname
            counts[q] = counts.get(q, 0) + 1

    threading.setprofile(prof)
    sys.setprofile(prof)
    work()
    sys.setprofile(None)
    threading.setprofile(None)
    counts.pop("profiled.<locals>.prof", None)
    print(json.dumps(counts, sort_keys=True), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
    if mode == "profile":
        profiled()
    elif mode == "wait":
        print("ready", flush=True)
        sys.stdin.readline()
        work()
        print("done", flush=True)
        sys.stdin.readline()
    else:
        work()
