/* Benchmark of libuscope-sdt's probes with no tracer attached: what a
 * program pays for a run-time probe it leaves in place.
 *
 *   empty      the loop alone
 *   disabled   if (usc_probe_enabled(p)) usc_probe_fire(p, i, 2 * i);
 *              nobody tracing: the semaphore check and its branch
 *   fired      the same with the semaphore raised by hand (as a tracer
 *              would), no tracer: the check, the call through the probe's
 *              pointer to its stub (nop; ret) with two arguments
 *   sdt.h      the compile-time equivalent for reference: a sys/sdt.h
 *              probe guarded by its semaphore, disabled then raised (its
 *              site is an inline nop: no call)
 *
 * Each loop runs N iterations; the median of R runs is printed as ns per
 * iteration, above the empty loop, and as a ratio to it. A VM's timings
 * drift: compare the lines of one run.
 *   usage: sdt [N [R]] */
#define _SDT_HAS_SEMAPHORES 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>

#include <uscope/sdt.h>

/* sys/sdt.h's semaphore for probe bench:static (what dtrace -G defines) */
__extension__ unsigned short bench_static_semaphore __attribute__((section(".probes")));

/* keeps the loop and i alive without touching memory */
#define KEEP(x) __asm__ volatile("" : : "r"(x))

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void loop_empty(long n)
{
	for (long i = 0; i < n; i++)
		KEEP(i);
}

__attribute__((noinline)) static void loop_probe(const struct usc_probe *p, long n)
{
	for (long i = 0; i < n; i++) {
		if (usc_probe_enabled(p))
			usc_probe_fire(p, i, 2 * i);
		KEEP(i);
	}
}

__attribute__((noinline)) static void loop_static(long n)
{
	for (long i = 0; i < n; i++) {
		if (__builtin_expect(bench_static_semaphore, 0))
			STAP_PROBE2(bench, static, i, 2 * i);
		KEEP(i);
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

enum { EMPTY, DISABLED, FIRED, STATIC_OFF, STATIC_ON, NCASES };

static double timed(int c, const struct usc_probe *p, long n)
{
	double t0 = now();

	switch (c) {
	case EMPTY: loop_empty(n); break;
	case DISABLED: case FIRED: loop_probe(p, n); break;
	default: loop_static(n); break;
	}
	return (now() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
	static const char *const label[NCASES] = {
		"empty loop",
		"run-time probe, disabled (check + branch)",
		"run-time probe, enabled and fired, no tracer",
		"sys/sdt.h probe + semaphore, disabled",
		"sys/sdt.h probe + semaphore, enabled, no tracer",
	};
	long n = argc > 1 ? atol(argv[1]) : 100000000;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	struct usc_provider *prov;
	struct usc_probe *p;
	double res[NCASES][64], med[NCASES];
	int err;

	if (reps < 1 || reps > 64 || n < 1) {
		fprintf(stderr, "usage: sdt [N [R (1..64)]]\n");
		return 2;
	}
	if ((err = usc_provider_new("bench", &prov)) ||
	    (err = usc_provider_add_probe(prov, &p, "tick", USC_ARG_INT64, USC_ARG_INT64,
					  USC_ARG_END)) ||
	    (err = usc_provider_load(prov))) {
		fprintf(stderr, "sdt: %s\n", usc_sdt_error());
		return 1;
	}
	volatile uint16_t *sema = (volatile uint16_t *)(uintptr_t)p->semaphore;

	/* interleaved, so that drift hits every case alike */
	for (int r = 0; r < reps; r++) {
		for (int c = 0; c < NCASES; c++) {
			*sema = c == FIRED;
			bench_static_semaphore = c == STATIC_ON;
			res[c][r] = timed(c, p, n);
		}
	}
	*sema = 0;
	bench_static_semaphore = 0;
	printf("(median of %d runs of %ld iterations; +ns is above the empty loop)\n", reps, n);
	for (int c = 0; c < NCASES; c++) {
		qsort(res[c], (size_t)reps, sizeof(double), cmp_d);
		med[c] = res[c][reps / 2];
		printf("  %-48s %7.2f ns/iter  %+6.2f ns  %5.2fx the empty loop\n", label[c], med[c],
		       med[c] - med[EMPTY], med[c] / med[EMPTY]);
	}
	printf("  run-time / sys/sdt.h probe: %.2fx disabled, %.2fx enabled (no tracer)\n",
	       med[DISABLED] / med[STATIC_OFF], med[FIRED] / med[STATIC_ON]);
	usc_provider_free(prov);
	return 0;
}
