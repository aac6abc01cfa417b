/* Benchmark target: T threads each call bench_fn(i, 2*i) N times, optionally
 * paced to RATE calls per second per thread, or in bursts of BURST calls
 * with a pause of GAP_MS milliseconds after each (the pauses are not timed:
 * they let a tracer drain its buffers, so that every hit is recorded rather
 * than dropped on a full buffer). Prints the mean ns per call and the
 * achieved call rate.
 * KEYS > 0, a power of two, calls bench_fn(i & (KEYS - 1), 2*i) instead:
 * KEYS distinct first arguments, each N / KEYS times (N a multiple of KEYS).
 * For uscope objtrace: bench_obj() hands out one object before the calls
 * (never passed to them), and with BENCH_OBJ_CALL=1 in the environment
 * bench_fn gets it once after them, untimed (the other runs count every
 * call: that one would be an extra).
 * BENCH_WARM=W in the environment: each thread first makes W calls the same
 * way, untimed, so that the timed ones find what a tracer touches for the
 * first time (its ring's pages) touched already; the steady cost of a hit,
 * apart from the once-only cost of a thread's first ring lap (bench/README).
 * Prints the page faults of the timed calls too (the threads' minor faults),
 * and the threads' CPU time a timed call (cpu_per_call: what a tracer costs
 * the program on a machine that others share, where wall time also counts
 * the minutes the thread waited for a CPU).
 * usage: target [N [T [RATE [BURST [GAP_MS [KEYS]]]]]] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long n_calls, burst, keys, warm, faults_total;
static double rate, gap_s, timed_total, cpu_total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile long sink;

/* 19 bytes: long enough that the 5-byte jumps the inject engine writes at its
 * entry and before its ret do not overlap, and that uftrace -P can patch it
 * without recompiling (a 5-byte `lea; ret` takes neither). */
__attribute__((noinline)) long bench_fn(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a * 3 + (b ^ 5) - (a >> 7);
}

static long the_obj[4];

__attribute__((noinline)) long *bench_obj(void)
{
	__asm__ volatile("" ::: "memory");
	return the_obj;
}

/* The calling thread's CPU time, s. */
static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

	nanosleep(&ts, NULL);
}

static long thread_faults(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? 0 : ru.ru_minflt + ru.ru_majflt;
}

static void *run(void *arg)
{
	double t0, gap = rate > 0 ? 1.0 / rate : 0, timed = 0, b0, c0, cpu = 0;
	long s = 0, f0;

	(void)arg;
	for (long i = 0; i < warm; i++) {
		s += bench_fn(keys ? i & (keys - 1) : i, 2 * i);
		if (burst && (i + 1) % burst == 0)
			pause_s(gap_s);
	}
	if (warm && burst)
		pause_s(gap_s);
	f0 = thread_faults();
	t0 = b0 = now();
	c0 = cpu_now();
	for (long i = 0; i < n_calls; i++) {
		s += bench_fn(keys ? i & (keys - 1) : i, 2 * i);
		if (gap)
			while (now() < t0 + (double)(i + 1) * gap)
				;
		if (burst && (i + 1) % burst == 0) {
			timed += now() - b0;
			cpu += cpu_now() - c0;
			pause_s(gap_s);
			b0 = now();
			c0 = cpu_now();
		}
	}
	timed += now() - b0;
	cpu += cpu_now() - c0;
	sink += s;
	f0 = thread_faults() - f0;
	pthread_mutex_lock(&lock);
	timed_total += timed;
	faults_total += f0;
	cpu_total += cpu;
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t tid[64];
	double t0, t1;

	n_calls = argc > 1 ? atol(argv[1]) : 1000000;
	rate = argc > 3 ? atof(argv[3]) : 0;
	burst = argc > 4 ? atol(argv[4]) : 0;
	gap_s = (argc > 5 ? atof(argv[5]) : 10) / 1e3;
	keys = argc > 6 ? atol(argv[6]) : 0;
	warm = getenv("BENCH_WARM") ? atol(getenv("BENCH_WARM")) : 0;
	if (threads < 1 || threads > 64)
		threads = 1;
	long *obj = bench_obj();

	t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, run, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	t1 = now();
	if (getenv("BENCH_OBJ_CALL"))
		sink += bench_fn((long)obj, 0);
	/* bursts: the mean over threads of their timed (burst) time */
	printf("calls %ld ns_per_call %.2f rate %.0f faults %ld cpu_per_call %.2f\n",
	       (n_calls + warm) * threads,
	       (burst ? timed_total / threads : t1 - t0) * 1e9 / (double)n_calls,
	       (double)(n_calls * threads) / (t1 - t0), faults_total,
	       cpu_total * 1e9 / (double)(n_calls * threads));
	return 0;
}
