/* Benchmark target: T threads each call bench_fn(i, 2*i) N times, optionally
 * paced to RATE calls per second per thread. Prints the mean ns per call
 * and the achieved call rate. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long n_calls;
static double rate;
static volatile long sink;

__attribute__((noinline)) long bench_fn(long a, long b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
	double t0 = now(), gap = rate > 0 ? 1.0 / rate : 0;
	long s = 0;

	(void)arg;
	for (long i = 0; i < n_calls; i++) {
		s += bench_fn(i, 2 * i);
		if (gap)
			while (now() < t0 + (double)(i + 1) * gap)
				;
	}
	sink += s;
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t tid[64];
	double t0, t1;

	n_calls = argc > 1 ? atol(argv[1]) : 1000000;
	rate = argc > 3 ? atof(argv[3]) : 0;
	if (threads < 1 || threads > 64)
		threads = 1;
	t0 = now();
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, run, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	t1 = now();
	printf("calls %ld ns_per_call %.1f rate %.0f\n", n_calls * threads,
	       (t1 - t0) * 1e9 / (double)n_calls, (double)(n_calls * threads) / (t1 - t0));
	return 0;
}
