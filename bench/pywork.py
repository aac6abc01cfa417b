"""A fixed Python workload for make bench: the interpreter's C functions
called millions of times (calls, dicts, lists, strings, json, sorting).
Deterministic under PYTHONHASHSEED=0. Prints the seconds the work took,
measured inside, so that a tracer's start and end are not counted, and
the process's CPU seconds (a py: probe's cost is the process's own)."""
import json
import sys
import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm2(self):
        return self.x * self.x + self.y * self.y


def leaf(i):
    """About 1% of the workload's Python calls: bench's one probed function."""
    return Point(i % 97, i % 89)


def work(scale):
    total = 0
    for r in range(scale):
        total += fib(18)
        d = {f"k{i}": [i, str(i), {"x": i}] for i in range(3000)}
        s = json.dumps(d)
        total += len(json.loads(s))
        pts = sorted((leaf(i) if i % 16 == 0 else Point(i % 97, i % 89) for i in range(5000)),
                     key=Point.norm2)
        total += pts[-1].norm2()
        words = " ".join(str(i * 7) for i in range(4000)).split()
        total += sum(len(w) for w in words if w.endswith("7"))
    return total


if __name__ == "__main__":
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    t0, c0 = time.perf_counter(), time.process_time()
    total = work(scale)
    print(f"pywork total {total} seconds {time.perf_counter() - t0:.6f} "
          f"cpu {time.process_time() - c0:.6f}")
