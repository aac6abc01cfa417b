#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

int core_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t n = *cap ? *cap : first ? first : 1;
	void *old, *p;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return -ENOMEM;
	memcpy(&old, arrp, sizeof(old));	/* (arrp is a T **: no aliasing through void **) */
	p = realloc(old, n * elem);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = n;
	return 0;
}
