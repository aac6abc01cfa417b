/* uscope e2e target: prints "ready" then calls tick(n) for n = 1, 2, 3, ...
 * every millisecond until killed. */
#include <stdio.h>
#include <time.h>

volatile long g_ticks;

__attribute__((noipa, used)) void tick(int n)
{
	g_ticks = n;
}

int main(void)
{
	struct timespec ms = { 0, 1000000 };

	printf("ready\n");
	fflush(stdout);
	for (int n = 1;; n++) {
		tick(n);
		nanosleep(&ms, NULL);
	}
}
