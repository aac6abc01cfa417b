"""A prefork server in Python, for py: probes through -p of its parent
(issue 27): uscope attaches to the parent once it is ready, then the
parent forks workers, each of which calls handle() a number of times of
its own and says how many.

    pyprefork.py    print "ready", then read commands on stdin, one a line:
      fork N        fork N workers with os.fork; each calls handle() a
                    number of times it draws itself (urandom), prints
                    "worker PID CALLS" and exits; the parent waits for them
                    all, then prints "forked N"
      mp N          the same through multiprocessing (the fork start
                    method): "mp N" once every worker has ended
      stack         fork one worker that calls handle() once, with the
                    stack traceback.extract_stack() sees there printed as
                    JSON after "stack PID " ([qualname, line] outermost
                    first, the innermost from handle itself); "stacked"
      self N        the parent itself calls handle() N times: "self N"
      late N        fork N workers; worker k compiles a function late<k>
                    of its own (after the fork: each its own code object,
                    perhaps at the same address as another worker's) and
                    calls it a number of times it draws: "late PID k CALLS"
                    each, then "lated N"
      hold N        fork N workers that stay: "held PID,PID..."
      call K        each held worker calls handle() K times, then prints
                    "worker PID CALLS TOOL": its calls since it was forked,
                    and the name of the sys.monitoring tool 4 in it (3.12
                    and later; else -); then "called"
      release       the held workers exit: "released"
    Its stdin closed, it exits 0.

Every worker lives at once (each waits for the others to be forked before
it starts calling), as a prefork server's workers do."""
import json
import multiprocessing
import os
import sys
import traceback

calls = 0
stack = None


def handle(i):
    global calls, stack
    calls += 1
    if stack is not None:
        stack = [[f.name, f.lineno] for f in traceback.extract_stack()]
    return i + 1


def draw():
    return 3 + int.from_bytes(os.urandom(1), "little") % 20


def worker(gate, n):
    """Wait until every worker is forked (the gate's write end closed by
    the parent), then serve n calls and say so."""
    global calls
    calls = 0       # (the parent's, copied by the fork)
    os.read(gate, 1)
    total = sum(handle(i) for i in range(n))
    assert total == n * (n + 1) // 2
    # one write: the workers share the pipe
    os.write(1, f"worker {os.getpid()} {calls}\n".encode())


def fork_workers(n):
    r, w = os.pipe()
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(w)
            try:
                worker(r, draw())
            finally:
                os._exit(0)
        pids.append(pid)
    os.close(r)
    os.close(w)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert status == 0, status


def spawn_late(n):
    pids = []
    for k in range(n):
        pid = os.fork()
        if pid == 0:
            try:
                scope = {"__name__": __name__}
                exec(compile(f"def late{k}(i):\n    return i * 2\n", __file__, "exec"), scope)
                m = draw()
                for i in range(m):
                    scope[f"late{k}"](i)
                os.write(1, f"late {os.getpid()} {k} {m}\n".encode())
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert status == 0, status


def mp_worker(gate, w, n):
    os.close(w)     # (multiprocessing's child keeps the descriptors it had)
    worker(gate, n)


def mp_workers(n):
    ctx = multiprocessing.get_context("fork")
    r, w = os.pipe()
    procs = [ctx.Process(target=mp_worker, args=(r, w, draw())) for _ in range(n)]
    for p in procs:
        p.start()
    os.close(r)
    os.close(w)
    for p in procs:
        p.join()
        assert p.exitcode == 0, p.exitcode


def stack_worker():
    global stack
    pid = os.fork()
    if pid == 0:
        try:
            stack = []
            handle(0)
            os.write(1, f"stack {os.getpid()} {json.dumps(stack)}\n".encode())
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status


held = []     # (pid, its command pipe, its answers)


def tool():
    m = getattr(sys, "monitoring", None)
    return (m.get_tool(4) or "none") if m else "-"


def hold(n):
    for _ in range(n):
        r, w = os.pipe()
        ar, aw = os.pipe()
        pid = os.fork()
        if pid == 0:
            global calls
            calls = 0
            for _, cw, cr in held:      # the others' ends
                os.close(cw)
                cr.close()
            os.close(w)
            os.close(ar)
            with os.fdopen(r) as cmds:
                for line in cmds:
                    for i in range(int(line)):
                        handle(i)
                    os.write(aw, f"worker {os.getpid()} {calls} {tool()}\n".encode())
            os._exit(0)
        os.close(r)
        os.close(aw)
        held.append((pid, w, os.fdopen(ar)))
    print("held " + ",".join(str(h[0]) for h in held), flush=True)


def call(k):
    for _, w, answers in held:
        os.write(w, f"{k}\n".encode())
        print(answers.readline().strip(), flush=True)
    print("called", flush=True)


def release():
    for pid, w, answers in held:
        os.close(w)
        answers.close()
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
    held.clear()
    print("released", flush=True)


def main():
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "fork":
            fork_workers(int(arg[0]))
            print(f"forked {arg[0]}", flush=True)
        elif cmd == "mp":
            mp_workers(int(arg[0]))
            print(f"mp {arg[0]}", flush=True)
        elif cmd == "stack":
            stack_worker()
            print("stacked", flush=True)
        elif cmd == "self":
            for i in range(int(arg[0])):
                handle(i)
            print(f"self {arg[0]}", flush=True)
        elif cmd == "late":
            spawn_late(int(arg[0]))
            print(f"lated {arg[0]}", flush=True)
        elif cmd == "hold":
            hold(int(arg[0]))
        elif cmd == "call":
            call(int(arg[0]))
        elif cmd == "release":
            release()
        else:
            raise SystemExit(f"pyprefork.py: unknown command {cmd!r}")


if __name__ == "__main__":
    main()
