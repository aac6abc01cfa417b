/* uscope e2e target: return probes through tail calls.
 *
 *   tailcall N     for i in 1..N: prints nothing but calls
 *                    chain1(i)  = tail call to leaf(i + 1)          (one jmp)
 *                    chain2(i)  = tail call to chain1(i * 2)        (two jmps)
 *                    even(i)/odd(i): mutual recursion by tail calls, to i == 0
 *                  then "tailcall done SUM".
 * leaf sleeps 2 ms: a return probe on chain1 or chain2 delivered at the jmp
 * would have a duration near 0; at the real return, over 2 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile long g_bias = 7;

__attribute__((noipa)) long leaf(long x)
{
	struct timespec ts = {0, 2000000};

	nanosleep(&ts, NULL);
	return x * 3 + g_bias;
}

__attribute__((noipa)) long chain1(long x)
{
	return leaf(x + 1);
}

__attribute__((noipa)) long chain2(long x)
{
	return chain1(x * 2);
}

long odd(long n);

__attribute__((noipa)) long even(long n)
{
	if (n == 0)
		return leaf(100);
	return odd(n - 1);
}

__attribute__((noipa)) long odd(long n)
{
	if (n == 0)
		return leaf(200);
	return even(n - 1);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 0) : 3, sum = 0;

	for (long i = 1; i <= n; i++)
		sum += chain1(i) + chain2(i) + even(i);
	printf("tailcall done %ld\n", sum);
	return 0;
}
