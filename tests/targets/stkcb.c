/* A module loaded later (tests/targets/stacks.c dlopen): stkcb_call(fn, x)
 * calls fn(x) two frames down, built as Debian builds (-O2, no frame
 * pointers): a stack through it is unwound with its own CFI. */
#define NOIPA __attribute__((noipa))

volatile long stkcb_sink;

NOIPA static long inner(long (*fn)(long), long x)
{
	long a = x * 5, r = fn(x + 2);

	stkcb_sink += a;
	return r + a;
}

__attribute__((visibility("default"))) NOIPA long stkcb_call(long (*fn)(long), long x)
{
	long b = x ^ 3, r = inner(fn, x);

	stkcb_sink += b;
	return r - b;
}
