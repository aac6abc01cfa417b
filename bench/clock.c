/* make bench: what the CPU's clock costs here, the floor under a latency
 * (two reads of it a call, at the entry and at the return, in every tool
 * that times a call in the process). Prints the mean ns of one rdtsc over
 * N back-to-back reads, the fastest of 5 rounds.
 * usage: clock [N] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t rd_tsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	double best = 0;
	uint64_t sink = 0;

	for (int r = 0; r < 5; r++) {
		struct timespec a, b;
		double ns;

		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < n; i++)
			sink += rd_tsc();
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
		if (!r || ns < best)
			best = ns;
	}
	printf("rdtsc_ns %.2f %u\n", best, (unsigned)(sink & 1));
	return 0;
}
