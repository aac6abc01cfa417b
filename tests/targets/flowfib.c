/* uscope e2e target for `uscope flow`: `flowfib [N]` calls fib(N) (default
 * 4; fib(n) = n < 2 ? n : fib(n-1) + fib(n-2), so fib(4) makes 9 calls in a
 * known tree: 4 -> (3 -> (2 -> (1, 0), 1), 2 -> (1, 0))), then a(), which
 * calls b() twice. Prints "flowfib done n=N fib=F" and exits 0.
 * Built without inlining, sibling calls or IPA: every call is a real call
 * and every function returns with its own ret. */
#include <stdio.h>
#include <stdlib.h>

#define FLOW __attribute__((noipa, noinline, used))

volatile long g_sink;

FLOW long fib(long n)
{
	if (n < 2)
		return n;
	return fib(n - 1) + fib(n - 2);
}

FLOW void b(void)
{
	g_sink++;
}

FLOW void a(void)
{
	b();
	b();
	g_sink++;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 4;
	long f = fib(n);

	a();
	printf("flowfib done n=%ld fib=%ld\n", n, f);
	return 0;
}
