/* uscope e2e target for count, hist and latency: every call has a value
 * the tests know, so counts, buckets and latencies are exact.
 *
 *   aggapp sleep     nap(600) x3, nap(3000) x2, nap(12000) x1: microseconds
 *                    asleep, so latency --unit us has 3 calls in [512, 1K),
 *                    2 in [2K, 4K), 1 in [8K, 16K)
 *   aggapp spread    the calls of sleep, 50 ms apart (not asleep in nap):
 *                    a tracer that drains its buffers every few tens of
 *                    ms sees them in several drains
 *   aggapp names     lookup(name, n): "alpha" x3 (n 1), "beta" x2 (n 2),
 *                    "gamma" x1 (n 3), "gadget" x1 (n 4), and one long name
 *                    (100 bytes of 'x') x1 (n 5)
 *   aggapp sizes     take(n) for n = 1..100: log2 buckets [1] 1, [2, 4) 2,
 *                    [4, 8) 4, [8, 16) 8, [16, 32) 16, [32, 64) 32, [64, 128) 37;
 *                    linear 0..100 by 10: [0, 10) 9, then 10 a step
 *   aggapp rec       deep(3), which calls itself down to deep(0), which
 *                    sleeps 2 ms: 4 calls of 2 to 4 ms (recursion)
 *   aggapp keys N    distinct(i) for i = 0..N-1, once each (default 100)
 *   aggapp hot N     leaf(i & 7) N times (default 1000000)
 *   aggapp crash N   distinct(i) for i = 0..N-1, then a write through NULL:
 *                    dies of SIGSEGV (the flight recorder's test)
 *   aggapp wait N    distinct(i) for i = 0..N-1, prints "ready", then sleeps
 *                    10 s (a snapshot on SIGUSR1 meanwhile)
 *   aggapp MODE [N] hold   MODE, then prints "ready" and waits for the end
 *                    of its stdin (a served run that Prometheus scrapes)
 * Built without inlining, sibling calls or IPA. Prints "aggapp done". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REAL __attribute__((noipa, noinline, used))

volatile long g_sink;
volatile uintptr_t g_null;	/* 0: the crash mode writes through it */

REAL void nap(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	while (nanosleep(&ts, &ts))
		;
}

REAL int lookup(const char *name, int n)
{
	g_sink += (long)strlen(name) + n;
	return n;
}

REAL void take(unsigned long n)
{
	g_sink += (long)n;
}

REAL long deep(int n)
{
	long r;

	if (n == 0) {
		nap(2000);
		r = 0;
	} else {
		r = deep(n - 1) + 1;
	}
	g_sink += r;	/* a block before the ret long enough for a jump */
	return r;
}

REAL void distinct(long i)
{
	g_sink += i;
}

REAL long leaf(long i)
{
	return i + 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	long n = argc > 2 && strcmp(argv[2], "hold") ? strtol(argv[2], NULL, 0) : 0;

	if (!strcmp(mode, "sleep") || !strcmp(mode, "spread")) {
		static const long us[] = {600, 600, 600, 3000, 3000, 12000};
		struct timespec gap = {0, 50000000};

		for (int i = 0; i < 6; i++) {
			nap(us[i]);
			if (mode[1] == 'p')
				while (nanosleep(&gap, &gap))
					;
		}
	} else if (!strcmp(mode, "names")) {
		char big[101];

		memset(big, 'x', 100);
		big[100] = 0;
		for (int i = 0; i < 3; i++)
			lookup("alpha", 1);
		for (int i = 0; i < 2; i++)
			lookup("beta", 2);
		lookup("gamma", 3);
		lookup("gadget", 4);
		lookup(big, 5);
	} else if (!strcmp(mode, "sizes")) {
		for (unsigned long i = 1; i <= 100; i++)
			take(i);
	} else if (!strcmp(mode, "rec")) {
		g_sink += deep(3);
	} else if (!strcmp(mode, "keys")) {
		for (long i = 0; i < (n ? n : 100); i++)
			distinct(i);
	} else if (!strcmp(mode, "hot")) {
		long s = 0;

		for (long i = 0; i < (n ? n : 1000000); i++)
			s += leaf(i & 7);
		g_sink = s;
	} else if (!strcmp(mode, "crash") || !strcmp(mode, "wait")) {
		for (long i = 0; i < n; i++)
			distinct(i);
		if (!strcmp(mode, "crash"))
			*(volatile int *)(uintptr_t)g_null = 1;
		printf("ready\n");
		fflush(stdout);
		nap(10000000);
	} else {
		fprintf(stderr, "usage: aggapp sleep|names|sizes|rec|keys [N]|hot [N]|crash N|wait N [hold]\n");
		return 2;
	}
	if (argc > 2 && !strcmp(argv[argc - 1], "hold")) {
		char buf[256];

		printf("ready\n");
		fflush(stdout);
		while (fread(buf, 1, sizeof(buf), stdin) > 0)
			;
	}
	printf("aggapp done\n");
	return 0;
}
