#include <stdlib.h>
#include <string.h>

#include "core/fault.h"

bool core_fault(const char *point)
{
	const char *s = getenv("USCOPE_FAULT");
	size_t n = strlen(point);

	while (s && *s) {
		size_t len = strcspn(s, ",");

		if (len == n && !strncmp(s, point, n))
			return true;
		s += len + (s[len] == ',');
	}
	return false;
}
