/* One way to grow an array, for the many the library keeps (sites,
 * symbols, tasks, rows...):
 *
 *	if (core_reserve(v->items, v->cap, v->n + 1, 16))
 *		return -ENOMEM;
 *	v->items[v->n++] = item;
 *
 * core_reserve(arr, cap, need, first): arr (a T * lvalue) has room for at
 * least need elements afterwards; when short, its capacity cap (a size_t
 * lvalue) is doubled, starting from first. 0, or -ENOMEM (an allocation
 * failed, or the size overflows) with arr and cap unchanged. */
#ifndef USC_CORE_GROW_H
#define USC_CORE_GROW_H

#include <stddef.h>

int core_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

#define core_reserve(arr, cap, need, first) \
	core_grow(&(arr), &(cap), (need), sizeof(*(arr)), (first))

#endif
