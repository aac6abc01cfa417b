/* uscope e2e target for return probes on return sites.
 * `retsites [N]` calls, for i = 0..N-1: tail(i) (a tail call: `jmp helper`),
 * jtab(i) (a switch compiled to a jump table: an indirect jmp), multi(i - 2)
 * (several returns), ptail(i) (a tail call through a pointer: `jmp *%rax`),
 * condtail(i) (a conditional tail call, `jne helper`: its return sites
 * cannot all be known), then prints "retsites done". Built -O2 so the
 * compiler emits the tail call, the jump table and separate ret
 * instructions. */
#include <stdio.h>
#include <stdlib.h>

volatile int g_sink;

__attribute__((noipa)) int helper(int x)
{
	return x * 2;
}

__attribute__((noipa)) int tail(int x)
{
	return helper(x + 1);	/* -O2: jmp helper */
}

/* distinct side effects per case force a jump table (jmp *%rax) */
__attribute__((noipa)) int jtab(int k)
{
	switch (k) {
	case 0: g_sink = 5; return 11;
	case 1: g_sink *= 3; return 23;
	case 2: g_sink += 7; return 37;
	case 3: g_sink ^= 9; return 41;
	case 4: g_sink -= 2; return 59;
	case 5: g_sink = g_sink / 2; return 67;
	case 6: g_sink |= 4; return 73;
	case 7: g_sink &= 6; return 89;
	default: return -1;
	}
}

__attribute__((noipa)) int multi(int x)
{
	if (x < 0) {
		g_sink = x;
		return -100;
	}
	if (x == 0)
		return 0;
	g_sink = x;
	return x * 10;
}

int (*volatile g_fp)(int) = helper;

__attribute__((noipa)) int ptail(int x)
{
	return g_fp(x + 3);	/* -O2: jmp *%rax */
}

/* condtail(x): x ? helper(x) : 5, as `jne helper`, which no compiler here
 * emits from C */
__asm__(".text\n.globl condtail\n.type condtail,@function\ncondtail:\n"
	"\ttest %edi,%edi\n\tjne helper\n\tmov $5,%eax\n\tret\n"
	".size condtail,.-condtail\n");
int condtail(int x);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	long s = 0;

	for (int i = 0; i < n; i++)
		s += tail(i) + jtab(i) + multi(i - 2) + ptail(i) + condtail(i);
	printf("retsites done %ld\n", s);
	return 0;
}
