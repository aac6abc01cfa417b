/* uscope e2e target of tests/e2e/test_mixing.py: functions whose first
 * instruction is 2, 3 or 4 bytes and not a push, built -O2 (as Debian builds
 * its packages), called at a steady rate, so that another tool's kernel
 * uprobe put on one while uscope has patched it is hit at once.
 *
 *   mixentry
 *	prints "ready pid=PID", then reads commands, one a line:
 *	run FN US   calls FN (with i = 0, 1, ...) every US microseconds until
 *	            the next line, checking each result against the same
 *	            computation done here, then prints "FN n=N bad=B" (B: wrong
 *	            results; a broken patch crashes the process instead)
 *	            (any other line only ends a run)
 *	end of input: exits 0.
 *
 * The first instructions, as GCC 12 -O2 gives them (the test checks them):
 *   sum2   test %esi,%esi        2 bytes, writes the flags only
 *   tab3   movslq %edi,%rdi      3 bytes, widens its own argument
 *   pair4  mov 0x8(%rdi),%rax    4 bytes, a load into rax
 *   bump4  add $0x4d,%rdi        4 bytes, changes its own argument (not
 *                                to be run twice)
 * and one in assembly, whose bytes after its first instruction, read as a
 * jump's displacement, point below address 0 when it is loaded at 0x400000
 * (mixentry-nopie): no place for the jump of a patch there to land that
 * another tool's uprobe could not break (src/engine/inject/pad.c):
 *   gap4   add $0x4d,%rdi        48 83 c7 4d, then 89 f8 (mov %edi,%eax) */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct pair {
	long a, b;
};

__attribute__((noinline, noipa)) long sum2(const int *p, int n)
{
	long s = 0;

	for (int i = 0; i < n; i++)
		s += p[i];
	return s;
}

__attribute__((noinline, noipa)) long tab3(int i, const long *t)
{
	return t[i] * 3 + 1;
}

__attribute__((noinline, noipa)) long pair4(const struct pair *p)
{
	return p->b * 5 + p->a;
}

__attribute__((noinline, noipa)) long bump4(long x, long y)
{
	x += 77;
	return x * y + x;
}

long gap4(long x, long y);	/* (unsigned)(x + 77) * y */

__asm__(".text\n"
	".p2align 4\n"
	".globl gap4\n"
	".type gap4, @function\n"
	"gap4:\n"
	"	add $0x4d, %rdi\n"
	"	mov %edi, %eax\n"
	"	imul %rsi, %rax\n"
	"	ret\n"
	".size gap4, .-gap4\n");

static const long table[8] = {3, 1, 4, 1, 5, 9, 2, 6};

/* fn(i) called, and what it must return (computed here, not by fn) */
static int call(const char *fn, long i, long *got, long *want)
{
	volatile long k = i;	/* (keeps the compiler from folding want) */
	int v[4] = {(int)(i & 7), 2, (int)(i % 5), 1};
	struct pair p = {i, i & 3};

	if (!strcmp(fn, "sum2")) {
		*got = sum2(v, (int)(i % 5));
		*want = 0;
		for (long j = 0; j < k % 5 && j < 4; j++)
			*want += v[j];
	} else if (!strcmp(fn, "tab3")) {
		*got = tab3((int)(i & 7), table);
		*want = table[k & 7] * 3 + 1;
	} else if (!strcmp(fn, "pair4")) {
		*got = pair4(&p);
		*want = (k & 3) * 5 + k;
	} else if (!strcmp(fn, "bump4")) {
		*got = bump4(i, 3);
		*want = (k + 77) * 4;
	} else if (!strcmp(fn, "gap4")) {
		*got = gap4(i, 3);
		*want = (long)(unsigned)(k + 77) * 3;
	} else {
		return -1;
	}
	return 0;
}

static void run(const char *fn, long us)
{
	struct timespec nap = {0, us * 1000};
	struct pollfd in = {0, POLLIN, 0};
	long n = 0, bad = 0, got, want;

	for (;;) {
		if (call(fn, n, &got, &want)) {
			printf("unknown function %s\n", fn);
			return;
		}
		bad += got != want;
		n++;
		if (poll(&in, 1, 0) > 0)
			break;
		nanosleep(&nap, NULL);
	}
	printf("%s n=%ld bad=%ld\n", fn, n, bad);
}

int main(void)
{
	char line[128], fn[32];
	long us;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready pid=%d\n", (int)getpid());
	while (fgets(line, sizeof(line), stdin))
		if (sscanf(line, "run %31s %ld", fn, &us) == 2)
			run(fn, us);
	return 0;
}
