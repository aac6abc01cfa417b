/* Benchmark calibration for bench/stacks.py: what $ustack's copy costs the
 * memory alone. Each call copies LEN bytes from this thread's stack (hot)
 * into the next place of a 4 MiB shared ring (the inject engine's per
 * thread ring: INJ_RING_SIZE), with rep movsb as the agent does, after a
 * 136-byte header; called as tests/targets/stacks.c `loop` calls leaf: N
 * calls in bursts of BURST with an untimed pause of GAP_MS ms after each,
 * after WARM untimed calls. Prints the mean ns of a timed call.
 * usage: memcopy N BURST GAP_MS WARM LEN */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define RING (4u << 20)
#define HDR 136

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void copy(char *ring, size_t *pos, const char *src, size_t len)
{
	char *d;
	size_t n = len;

	if (*pos + HDR + len > RING)
		*pos = 0;
	d = ring + *pos + HDR;
	*(volatile unsigned *)(ring + *pos) = (unsigned)len;
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
	*pos += (HDR + len + 7) & ~(size_t)7;
}

int main(int argc, char **argv)
{
	long n, burst, warm;
	double gap, timed = 0, b0;
	size_t len, pos = 0;
	char src[32768], *ring;

	if (argc != 6)
		return 2;
	n = atol(argv[1]);
	burst = atol(argv[2]);
	gap = atof(argv[3]) / 1e3;
	warm = atol(argv[4]);
	len = (size_t)atol(argv[5]);
	if (n <= 0 || warm < 0 || len > sizeof(src))
		return 2;
	ring = mmap(NULL, RING, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED)
		return 1;
	memset(src, 1, sizeof(src));
	b0 = now();
	for (long i = 0; i < warm + n; i++) {
		copy(ring, &pos, src, len);
		if (burst > 0 && (i + 1) % burst == 0) {
			struct timespec ts = {(time_t)gap, (long)((gap - (double)(time_t)gap) * 1e9)};

			if (i >= warm)
				timed += now() - b0;
			nanosleep(&ts, NULL);
			b0 = now();
		}
		if (i + 1 == warm)
			b0 = now();
	}
	timed += now() - b0;
	printf("ns_per_call %.2f\n", timed * 1e9 / (double)n);
	return 0;
}
