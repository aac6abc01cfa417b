/* A process's memory, faked for the Python walkers' unit tests: the
 * includer defines struct fake (uint8_t buf[N]; size_t used; and what else
 * it needs) and FAKE_BASE, the address of buf[0]. fake_read is a python_mem
 * reader (a read outside buf faults: -EFAULT); fake_alloc gives 16-aligned
 * room; put* write. */
#ifndef USC_TESTS_FAKEMEM_H
#define USC_TESTS_FAKEMEM_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

static int fake_read(void *ctx, uint64_t addr, void *dst, size_t len)
{
	struct fake *f = ctx;

	if (addr < FAKE_BASE || addr - FAKE_BASE > sizeof(f->buf) ||
	    len > sizeof(f->buf) - (addr - FAKE_BASE))
		return -EFAULT;
	memcpy(dst, f->buf + (addr - FAKE_BASE), len);
	return 0;
}

static uint64_t fake_alloc(struct fake *f, size_t len)
{
	uint64_t a = FAKE_BASE + f->used;

	f->used = (f->used + len + 15) & ~(size_t)15;
	assert_true(f->used <= sizeof(f->buf));
	return a;
}

static void put(struct fake *f, uint64_t addr, const void *v, size_t len)
{
	assert_true(addr >= FAKE_BASE && addr - FAKE_BASE + len <= sizeof(f->buf));
	memcpy(f->buf + (addr - FAKE_BASE), v, len);
}

static inline void put64(struct fake *f, uint64_t addr, uint64_t v)
{
	put(f, addr, &v, 8);
}

static inline void put32(struct fake *f, uint64_t addr, uint32_t v)
{
	put(f, addr, &v, 4);
}

static inline void put8(struct fake *f, uint64_t addr, uint8_t v)
{
	put(f, addr, &v, 1);
}

#endif
