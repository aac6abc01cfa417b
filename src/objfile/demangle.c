/* C++ names: libiberty's demangler and comparisons of demangled names. */
#include "objfile/demangle.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

static bool is_id(int c)
{
	return isalnum(c) || c == '_';
}

int demangle_name(const char *mangled, char **full, char **qual)
{
	char *f, *q, *start, *clone;
	size_t ql;

	*full = *qual = NULL;
	if (strncmp(mangled, "_Z", 2))
		return -EINVAL;
	f = cplus_demangle(mangled, DMGL_PARAMS | DMGL_ANSI);
	if (!f)
		return -EINVAL;
	q = cplus_demangle(mangled, DMGL_ANSI);
	if (!q) {
		free(f);
		return -EINVAL;
	}
	/* a template's return type comes first: "int ns::foo<int>(int)" */
	start = strstr(f, q);
	if (start && start != f)
		memmove(f, start, strlen(start) + 1);
	/* "ns::f(int) [clone .cold]": the clone is its own function */
	clone = strstr(f, " [clone ");
	ql = strlen(q);
	if (clone) {
		char *nq = realloc(q, ql + strlen(clone) + 1);

		if (!nq) {
			free(f);
			free(q);
			return -ENOMEM;
		}
		q = nq;
		strcpy(q + ql, clone);
	}
	*full = f;
	*qual = q;
	return 0;
}

void demangle_fold(const char *s, char *out, size_t len)
{
	size_t n = 0;
	int prev = 0;

	if (!len)
		return;
	for (; *s && n + 1 < len; s++) {
		if (isspace((unsigned char)*s)) {
			const char *t = s;

			while (isspace((unsigned char)t[1]))
				t++;
			if (is_id(prev) && is_id((unsigned char)t[1]))
				out[n++] = ' ';
			s = t;
			continue;
		}
		out[n++] = *s;
		prev = (unsigned char)*s;
	}
	out[n] = 0;
}

bool demangle_same(const char *a, const char *b)
{
	size_t la = strlen(a) + 1, lb = strlen(b) + 1;
	char *fa = malloc(la), *fb = malloc(lb);
	bool same = false;

	if (fa && fb) {
		demangle_fold(a, fa, la);
		demangle_fold(b, fb, lb);
		same = !strcmp(fa, fb);
	}
	free(fa);
	free(fb);
	return same;
}

bool demangle_is_cxx_query(const char *s)
{
	return strstr(s, "::") || strchr(s, '(');
}
