/* uscope e2e target: strings no one has read before the probe does.
 *
 *   coldstr      calls report(s) for 4 strings of a read-only table, each
 *                on its own 64 KiB of .rodata that the program never
 *                touches (nor its neighbours: fault-around maps pages in
 *                64 KiB windows), then prints "coldstr done". A BPF program
 *                that cannot take a page fault reads them as faults; one
 *                that can (sleepable) reads them. */
#include <stdio.h>

static const char cold[6][65536] __attribute__((aligned(65536))) = {
	[1] = "the first cold string",
	[2] = "the second cold string",
	[3] = "the third cold string",
	[4] = "the fourth cold string",
};

__attribute__((noipa)) void report(const char *s)
{
	__asm__ volatile("" : : "r"(s) : "memory");
}

int main(void)
{
	for (int i = 1; i <= 4; i++)
		report(cold[i]);
	printf("coldstr done\n");
	return 0;
}
