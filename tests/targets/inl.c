/* uscope e2e target for inlined copies. Built at -O2 -g: scale() is inlined
 * into both callers (step_a and step_b), and it also has an out-of-line
 * copy, called through a function pointer. `inl [N]` does, for i = 1..N:
 *   step_a(i)        scale(i, 3) inlined
 *   step_b(i)        scale(i + 100, 5) inlined
 *   fp(i + 1000, 7)  the out-of-line scale
 * so scale runs 3N times: N at each inlined copy, N out of line. tick() has
 * no out-of-line copy at all: it is inlined into step_a and step_b (2N). */
#include <stdio.h>
#include <stdlib.h>

volatile long sink;

static inline long scale(long v, int k)
{
	long r = v * k;

	sink += r;	/* a side effect: the copy stays a copy */
	return r + 1;
}

volatile int ticks;

static inline void tick(void)
{
	ticks++;
}

__attribute__((noipa)) long step_a(long i)
{
	tick();
	return scale(i, 3);
}

__attribute__((noipa)) long step_b(long i)
{
	tick();
	return scale(i + 100, 5) + 2;
}

long (*volatile fp)(long, int) = scale;

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	long t = 0;

	for (int i = 1; i <= n; i++)
		t += step_a(i) + step_b(i) + fp(i + 1000, 7);
	printf("inl done %ld\n", t);
	return 0;
}
