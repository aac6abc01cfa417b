/* Stacks on code built as Debian builds it: -O2 -fomit-frame-pointer, so a
 * frame-pointer walk goes wrong and only the CFI gives the callers
 * (tests/e2e/test_stacks.py compares uscope's $ustack with gdb's bt).
 *
 *   stacks qsort    cmp <- msort_with_tmp ... <- qsort_r <- sort_ints <- main
 *   stacks inline   leaf <- mid [inlined] <- outer <- main
 *   stacks signal   in_handler <- on_usr1 <- <signal handler called> <- ... <- main
 *   stacks thread   thread_work <- thread_main <- start_thread <- clone3
 *   stacks loop N [BURST GAP_MS [WARM]]
 *                   leaf N times (the benchmark, bench/stacks.py: $ustack's
 *                   cost), in bursts of BURST calls with an untimed pause of
 *                   GAP_MS ms after each (a tracer drains its buffers then),
 *                   after WARM calls not timed (the same way, with a pause
 *                   of 300 ms after the first: a tracer's buffers touched
 *                   once, its first hit read); prints the mean ns a timed call
 *   stacks deep N [BURST GAP_MS [WARM]]
 *                   the same, leaf ten frames deep: leaf <- mid [inlined] <-
 *                   outer <- d1 <- d2 <- d3 <- d4 <- main <- ... <- _start
 *   stacks mixed N  N rounds of: leaf through outer (the loop's stack), leaf
 *                   through d4 (the deep one), and every 8th round eight
 *                   ints sorted by qsort (cmp from glibc's merge sort at
 *                   several depths): several distinct stacks, counts the
 *                   same every run (bench/stacks.py folds inject's and
 *                   bpf's counted stacks of it and compares them)
 *   stacks expr N   leaf N times through expr_call, whose CFA the CFI gives
 *                   by a DWARF expression (as a PLT entry's): a walk cannot
 *                   follow it, libdw and gdb can
 *   stacks dlopen N [GAP_MS]  dlopen bin/libstkcb.so (a module loaded
 *                   later), then leaf N times through its stkcb_call, the
 *                   first at once, the rest GAP_MS ms later
 *
 * Every probed function is noipa: it stays a real call with its own frame.
 * The rest (sort_ints, outer, on_usr1, thread_main) clobbers rbp with live
 * values, so rbp is no frame pointer anywhere on these stacks. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOIPA __attribute__((noipa))

volatile long sink;

NOIPA int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

NOIPA void sort_ints(int *v, size_t n)
{
	/* keep values live across the call: rbp holds one */
	long s0 = v[0], s1 = v[1], s2 = v[2], s3 = v[n - 1], s4 = (long)n * 3;

	qsort(v, n, sizeof(v[0]), cmp);
	sink += s0 * s1 + s2 * s3 + s4;
}

NOIPA long leaf(long x)
{
	sink += x;
	return x * 2;
}

static inline __attribute__((always_inline)) long mid(long x)
{
	long r = leaf(x + 1);

	return r + x;
}

NOIPA long outer(long x)
{
	long a = x * 7, b = x ^ 0x55, c = x + 9;

	a += mid(x);
	sink += b * c;
	return a;
}

/* leaf through four more frames (each keeps a value live across the call) */
#define DEEP(n, m)                                                              \
	NOIPA long n(long x)                                                    \
	{                                                                       \
		long a = x * 3, r = m(x + 1);                                   \
		return r + a;                                                   \
	}
DEEP(d1, outer)
DEEP(d2, d1)
DEEP(d3, d2)
DEEP(d4, d3)

/* leaf(x) from a frame whose CFA the CFI gives by a DWARF expression
 * (DW_CFA_def_cfa_expression: DW_OP_breg7 rsp 16, as a PLT entry's CFA is
 * an expression): libdw and gdb follow it, unwind tables cannot hold it */
long expr_call(long x);
__asm__(".text\n"
	".globl expr_call\n"
	".type expr_call, @function\n"
	"expr_call:\n"
	".cfi_startproc\n"
	"	sub $8, %rsp\n"
	".cfi_escape 0x0f, 0x02, 0x77, 0x10\n"
	"	call leaf\n"
	"	add $8, %rsp\n"
	".cfi_def_cfa rsp, 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size expr_call, .-expr_call\n");

NOIPA void in_handler(int sig)
{
	sink += sig;
}

static void on_usr1(int sig)
{
	long a = sig * 3, b = sig + 11;

	in_handler(sig);
	sink += a * b;
}

NOIPA void thread_work(long n)
{
	sink += n;
}

static void *thread_main(void *arg)
{
	long a = (long)arg, b = a * 5;

	thread_work(a);
	sink += b;
	return NULL;
}

static double now_on(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now(void)
{
	return now_on(CLOCK_MONOTONIC);
}

/* the thread's CPU time, kernel time included: where a uprobe's trap and
 * its bpf program run, without what other tasks take of the CPU */
static double cpu_now(void)
{
	return now_on(CLOCK_THREAD_CPUTIME_ID);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "qsort";

	if (!strcmp(what, "qsort")) {
		int v[8] = {5, 3, 8, 1, 9, 2, 7, 4};

		sort_ints(v, 8);
		printf("%d %d\n", v[0], v[7]);
	} else if (!strcmp(what, "inline")) {
		printf("%ld\n", outer(4));
	} else if (!strcmp(what, "signal")) {
		signal(SIGUSR1, on_usr1);
		raise(SIGUSR1);
		printf("%ld\n", sink);
	} else if (!strcmp(what, "thread")) {
		pthread_t t;

		pthread_create(&t, NULL, thread_main, (void *)6L);
		pthread_join(t, NULL);
		printf("%ld\n", sink);
	} else if (!strcmp(what, "mixed")) {
		long n = argc > 2 ? atol(argv[2]) : 1;

		for (long i = 0; i < n; i++) {
			outer(i);
			d4(i);
			if (i % 8 == 0) {
				int v[8];

				for (int k = 0; k < 8; k++)
					v[k] = (int)((i * 31 + k * 17) % 23);
				sort_ints(v, 8);
			}
		}
		printf("%ld\n", sink);
	} else if (!strcmp(what, "expr")) {
		long n = argc > 2 ? atol(argv[2]) : 1;

		for (long i = 0; i < n; i++)
			expr_call(i);
		printf("%ld\n", sink);
	} else if (!strcmp(what, "dlopen")) {
		long n = argc > 2 ? atol(argv[2]) : 1;
		double gap = argc > 3 ? atof(argv[3]) / 1e3 : 0;
		char path[4096];
		const char *slash = strrchr(argv[0], '/');
		void *h;
		long (*call)(long (*)(long), long);

		snprintf(path, sizeof(path), "%.*slibstkcb.so", slash ? (int)(slash - argv[0] + 1) : 0,
			 argv[0]);
		h = dlopen(path, RTLD_NOW);
		call = h ? (long (*)(long (*)(long), long))dlsym(h, "stkcb_call") : NULL;
		if (!call) {
			fprintf(stderr, "%s\n", dlerror());
			return 1;
		}
		for (long i = 0; i < n; i++) {
			call(leaf, i);
			if (i == 0 && gap > 0) {
				struct timespec ts = {(time_t)gap,
						      (long)((gap - (double)(time_t)gap) * 1e9)};

				nanosleep(&ts, NULL);
			}
		}
		printf("%ld\n", sink);
	} else if (!strcmp(what, "loop") || !strcmp(what, "deep")) {
		long (*fn)(long) = !strcmp(what, "deep") ? d4 : outer;
		long n = argc > 2 ? atol(argv[2]) : 1000;
		long burst = argc > 3 ? atol(argv[3]) : 0, warm = argc > 5 ? atol(argv[5]) : 0;
		double gap = argc > 4 ? atof(argv[4]) / 1e3 : 0, timed = 0, b0 = now();
		double cpu = 0, c0 = cpu_now();

		if (warm < 0)
			warm = 0;
		for (long i = 0; i < warm + n; i++) {
			fn(i);
			if (burst > 0 && (i + 1) % burst == 0) {
				struct timespec ts = {(time_t)gap,
						      (long)((gap - (double)(time_t)gap) * 1e9)};

				if (i >= warm) {
					timed += now() - b0;
					cpu += cpu_now() - c0;
				}
				nanosleep(&ts, NULL);
				b0 = now();
				c0 = cpu_now();
			}
			if (i == 0 && warm > 1) {
				/* a tracer's first hit may take it a while (reading
				 * debug info): it is not the calls' to wait for */
				struct timespec ts = {0, 300000000};

				nanosleep(&ts, NULL);
			}
			if (i + 1 == warm) {
				b0 = now();	/* the timed calls start */
				c0 = cpu_now();
			}
		}
		timed += now() - b0;
		cpu += cpu_now() - c0;
		printf("%ld ns_per_call %.2f cpu_ns_per_call %.2f\n", sink,
		       n > 0 ? timed * 1e9 / (double)n : 0.0, n > 0 ? cpu * 1e9 / (double)n : 0.0);
	} else {
		return 2;
	}
	return 0;
}
