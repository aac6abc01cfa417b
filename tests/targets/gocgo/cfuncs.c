/* The C side of gocgo (main.go): cLeaf, called from Go; cCallsBack, called
 * from Go, calls the Go function goCallback. */
#include <stdint.h>

#include "_cgo_export.h"

__attribute__((noinline)) int64_t cLeaf(int64_t x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

__attribute__((noinline)) int64_t cCallsBack(int64_t x)
{
	int64_t r = goCallback(x + 1);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}
