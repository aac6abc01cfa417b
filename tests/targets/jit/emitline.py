"""JIT frames for $ustack (tests/e2e/test_jit.py), CPython 3.12's way: run
under python3.12 -X perf, each Python function is entered through a
trampoline compiled for it (named py::QUALNAME:FILE in /tmp/perf-PID.map)
that calls the evaluator. drive_loop() calls emit_line() N times, each one
os.write() (a write(2)) to /dev/null, once the tracer is attached (a line on
stdin); prints "done N BYTES". The calls before are CPython's to specialize
(its first calls of a function take a generic path, then a quicker one)."""
import os
import sys

out = os.open("/dev/null", os.O_WRONLY)
written = 0


def emit_line(i):
    global written
    written += os.write(out, b"line %d\n" % (i % 10))


def drive_loop(n):
    for i in range(n):
        emit_line(i)


n = int(sys.argv[1])
drive_loop(100)		# specialized: every later call runs the same C code
written = 0
print("ready", flush=True)
sys.stdin.readline()
drive_loop(n)
print(f"done {n} {written}", flush=True)
