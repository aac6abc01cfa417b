"""The chaos test's Python target (tests/e2e/test_chaos.py): threads that
call a Python function, sleep and fork, with a known result whatever
happens to a tracer meanwhile.

    pystorm.py THREADS ROUNDS
        prints "ready pid=PID"; then for each line on stdin a batch:
        THREADS threads each run ROUNDS rounds; a round calls step(i) 10
        times and sleeps 200 us, and the first thread forks a child every
        8th round that calls step 5 times and exits with their sum's low
        byte (reaped and checked). Each batch prints "pystorm done
        threads=T calls=N sum=S forks=F bad=B". Exits 0 at the end of
        stdin."""

import os
import sys
import threading
import time


def step(i):
    return 3 * i + 1


def worker(tid, rounds, out):
    calls = total = forks = bad = 0
    for r in range(rounds):
        for _ in range(10):
            total += step(calls)
            calls += 1
        time.sleep(0.0002)
        if tid == 0 and r % 8 == 0:
            pid = os.fork()
            if pid == 0:
                os._exit(sum(step(i) for i in range(5)) & 0xff)
            _, st = os.waitpid(pid, 0)
            forks += 1
            bad += not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 35)
    out[tid] = (calls, total, forks, bad)


def batch(nthreads, rounds):
    out = [None] * nthreads
    ths = [threading.Thread(target=worker, args=(t, rounds, out)) for t in range(1, nthreads)]
    for t in ths:
        t.start()
    worker(0, rounds, out)
    for t in ths:
        t.join()
    calls, total, forks, bad = (sum(x[k] for x in out) for k in range(4))
    print(f"pystorm done threads={nthreads} calls={calls} sum={total} forks={forks} bad={bad}",
          flush=True)


def main():
    nthreads, rounds = int(sys.argv[1]), int(sys.argv[2])
    print(f"ready pid={os.getpid()}", flush=True)
    for _ in sys.stdin:
        batch(nthreads, rounds)


if __name__ == "__main__":
    main()
