/* "did you mean" for a MODULE that names nothing: the modules closest to it
 * (edit distance on their short names, "libc" of libc.so.6), from a
 * process's mappings or an executable's libraries. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objfile/modules.h"

#define STEM_MAX 128

/* A module's short name: its basename up to ".so" ("libc.so.6" -> "libc"). */
static void module_stem(const char *path, char *out, size_t len)
{
	const char *b = strrchr(path, '/'), *so;
	size_t n;

	b = b ? b + 1 : path;
	so = strstr(b, ".so");
	n = so && so > b ? (size_t)(so - b) : strlen(b);
	if (n >= len)
		n = len - 1;
	memcpy(out, b, n);
	out[n] = 0;
}

/* Levenshtein, case-insensitive; both at most STEM_MAX long. */
static size_t stem_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[STEM_MAX + 1], cur[STEM_MAX + 1];

	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) !=
						    tolower((unsigned char)b[j - 1]));
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, (lb + 1) * sizeof(*prev));
	}
	return prev[lb];
}

struct sugg {
	char stem[STEM_MAX];
	size_t dist;
};

static int cmp_sugg(const void *x, const void *y)
{
	const struct sugg *p = x, *q = y;

	return p->dist != q->dist ? (p->dist < q->dist ? -1 : 1) : strcmp(p->stem, q->stem);
}

size_t module_suggest(char *const *paths, size_t n, const char *name, char *buf, size_t len)
{
	char want[STEM_MAX];
	struct sugg *v = calloc(n + 1, sizeof(*v));
	size_t nv = 0, thr, out = 0;
	int used = 0;

	if (len)
		buf[0] = 0;
	if (!v || !len)
		goto done;
	module_stem(name, want, sizeof(want));
	thr = strlen(want) / 3 > 2 ? strlen(want) / 3 : 2;
	for (size_t i = 0; i < n; i++) {
		struct sugg s;
		bool dup = false;

		module_stem(paths[i], s.stem, sizeof(s.stem));
		s.dist = stem_distance(want, s.stem);
		/* a part of a longer name is near too (jemalloc: libjemalloc) */
		if (s.dist > thr && strlen(want) >= 3 && strcasestr(s.stem, want))
			s.dist = thr;
		for (size_t k = 0; k < nv && !dup; k++)
			dup = !strcmp(v[k].stem, s.stem);
		if (!dup && s.dist <= thr && s.stem[0])
			v[nv++] = s;
	}
	qsort(v, nv, sizeof(*v), cmp_sugg);
	for (size_t k = 0; k < nv && k < 3 && used >= 0 && (size_t)used < len; k++, out++)
		used += snprintf(buf + used, len - (size_t)used, "%s%s", k ? ", " : "", v[k].stem);
done:
	free(v);
	return out;
}

size_t module_suggest_in_pid(pid_t pid, const char *name, char *buf, size_t len)
{
	struct proc_map *maps;
	ssize_t n = procmaps_read(pid, &maps);
	char **paths;
	size_t np = 0, got = 0;

	if (len)
		buf[0] = 0;
	if (n <= 0)
		return 0;
	paths = calloc((size_t)n + 1, sizeof(*paths));
	for (ssize_t i = 0; paths && i < n; i++)
		if (maps[i].path && maps[i].path[0] == '/' && maps[i].perms[2] == 'x')
			paths[np++] = maps[i].path;
	if (paths)
		got = module_suggest(paths, np, name, buf, len);
	free(paths);
	procmaps_free(maps, (size_t)n);
	return got;
}

size_t module_suggest_for_exe(const char *exe, const char *name, char *buf, size_t len)
{
	char **deps;
	ssize_t n = module_deps(exe, &deps);
	size_t got;

	if (len)
		buf[0] = 0;
	if (n <= 0)
		return 0;
	got = module_suggest(deps, (size_t)n, name, buf, len);
	module_list_free(deps, (size_t)n);
	return got;
}
