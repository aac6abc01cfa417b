/* uscope e2e target for a function's copy of itself (built at -O2 -g).
 *
 * GCC splits sc_write's unlikely tail (the "threaded" path, as glibc's
 * syscall wrappers have) into sc_write.part.0 and, sc_write being its only
 * caller, inlines it back: the DWARF then shows an inlined copy of
 * sc_write inside the out-of-line sc_write, "called" at sc_write's own
 * declaration. That copy is not a call. sc_write is also inlined for real
 * into sc_via_a and sc_via_b (with the self copy nested in each).
 * sc_msort (a merge sort) is split the same way, into its one-line header
 * (count, n <= 1) and sc_msort.part.0: every call of it is an inlined
 * header, in sc_sort and, for its recursive calls (RECURSE lines), in
 * sc_msort.part.0, an out-of-line instance of sc_msort itself. Those
 * recursive copies are real calls and stay sites.
 *
 * `selfcopy N` does, once with sc_single set and once without:
 *   fp(i, ...)       the out-of-line sc_write       N times
 *   sc_via_a(i)      sc_write inlined               N times
 *   sc_via_b(i)      sc_write inlined               N times
 * so sc_write runs 6N times (3N on its slow path), and then sorts an array
 * of N ints with sc_sort. It prints its own counts: "selfcopy writes=6N
 * msort=M". */
#include <stdio.h>
#include <stdlib.h>

char sc_single;
volatile long sc_sink;
long sc_msorts;

__attribute__((noipa)) int sc_enter(void)
{
	return 1;
}

__attribute__((noipa)) void sc_leave(int o)
{
	sc_sink += o;
}

static inline long sc_op(long fd, long n)
{
	long r = fd + n;

	__asm__ volatile("" : "+r"(r) : : "memory");
	return r;
}

long sc_write(int fd, const void *b, unsigned long n)
{
	if (__builtin_expect(sc_single, 1))
		return sc_op(fd, (long)n);
	int o = sc_enter();
	long r = sc_op(fd, (long)n + (b != NULL));
	sc_leave(o);
	return r;
}

__attribute__((noipa)) long sc_via_a(int fd)
{
	return sc_write(fd, "a", 1);
}

__attribute__((noipa)) long sc_via_b(int fd)
{
	return sc_write(fd, "bb", 2) + 1;
}

long (*volatile fp)(int, const void *, unsigned long) = sc_write;

static void sc_msort(int *a, int *tmp, size_t n)
{
	sc_msorts++;
	if (n <= 1)
		return;
	size_t n1 = n / 2, n2 = n - n1, i = 0, j = n1, k = 0;

	sc_msort(a, tmp, n1);		/* RECURSE */
	sc_msort(a + n1, tmp, n2);	/* RECURSE */
	while (i < n1 && j < n)
		tmp[k++] = a[i] <= a[j] ? a[i++] : a[j++];
	while (i < n1)
		tmp[k++] = a[i++];
	while (j < n)
		tmp[k++] = a[j++];
	for (k = 0; k < n; k++)
		a[k] = tmp[k];
}

__attribute__((noipa)) void sc_sort(int *a, size_t n)
{
	int *tmp = malloc(n * sizeof(*tmp));

	if (tmp && n > 64) {	/* two runs, then one merge of them */
		sc_msort(a, tmp, n / 2);
		sc_msort(a + n / 2, tmp, n - n / 2);
		sc_msort(a, tmp, n);
	} else if (tmp) {
		sc_msort(a, tmp, n);
	}
	free(tmp);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	long writes = 0;
	int *a = malloc((n ? n : 1) * sizeof(*a));

	for (int pass = 0; pass < 2; pass++) {
		sc_single = pass == 0;
		for (int i = 0; i < n; i++) {
			sc_sink += fp(i, "x", 1) + sc_via_a(i) + sc_via_b(i);
			writes += 3;
		}
	}
	for (int i = 0; a && i < n; i++)
		a[i] = (i * 7919) % (n + 13);
	if (a)
		sc_sort(a, n);
	printf("selfcopy writes=%ld msort=%ld\n", writes, sc_msorts);
	free(a);
	return 0;
}
