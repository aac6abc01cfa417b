/* The session's cache of files: see cache.h. */
#include "cache/cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo.h"
#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "ns/ns.h"

struct cache_objfile_ent {
	char *path;
	struct objfile *ef;
	int err;
};

struct cache_debuginfo_ent {
	char *path;
	struct debuginfo *m;
	int err;
};

struct maps_ent {
	pid_t pid;
	struct proc_map *maps;
	size_t n;
	int root_known;		/* 1: root is pid's (cache_add_map's paths) */
	char *root;		/* NULL: pid sees our files */
	uint64_t gen;			/* the cache's maps_gen at its last change */
};

struct usc_cache {
	bool frozen;			/* maps only as set (a recording's) */
	char *root;			/* where MODULE paths resolve (cache_set_root) */
	void (*maps_hook)(void *ctx);	/* brings the maps up to date, before a refresh */
	uint64_t maps_gen;		/* changes of any process's maps */
	void *maps_hook_ctx;
	/* what modules above keep per cache (cache_ext), and how to free it */
	void *ext[CACHE_EXT_NR];
	void (*ext_free[CACHE_EXT_NR])(void *);
	struct cache_objfile_ent *elf;
	size_t nelf;
	struct cache_debuginfo_ent *dw;
	size_t ndw;
	struct maps_ent *maps;
	size_t nmaps;
};

struct usc_cache *cache_new(void)
{
	return calloc(1, sizeof(struct usc_cache));
}

void cache_free(struct usc_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < CACHE_EXT_NR; i++)
		if (c->ext[i] && c->ext_free[i])
			c->ext_free[i](c->ext[i]);
	for (size_t i = 0; i < c->ndw; i++) {
		debuginfo_close(c->dw[i].m);
		free(c->dw[i].path);
	}
	for (size_t i = 0; i < c->nelf; i++) {
		objfile_close(c->elf[i].ef);
		free(c->elf[i].path);
	}
	for (size_t i = 0; i < c->nmaps; i++) {
		procmaps_free(c->maps[i].maps, c->maps[i].n);
		free(c->maps[i].root);
	}
	free(c->root);
	free(c->dw);
	free(c->elf);
	free(c->maps);
	free(c);
}

int cache_elf(struct usc_cache *c, const char *path, struct objfile **out)
{
	struct cache_objfile_ent *v;

	*out = NULL;
	for (size_t i = 0; i < c->nelf; i++)
		if (!strcmp(c->elf[i].path, path)) {
			*out = c->elf[i].ef;
			return c->elf[i].err;
		}
	v = realloc(c->elf, (c->nelf + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->elf = v;
	v = &c->elf[c->nelf];
	v->ef = NULL;
	v->path = strdup(path);
	if (!v->path)
		return -ENOMEM;
	v->err = objfile_open(path, &v->ef);
	c->nelf++;
	*out = v->ef;
	return v->err;
}

/* The root path's separate debug files are under: the cache's root when
 * path is under it, or path's own "/proc/N/root" (kept in buf), or NULL. */
static const char *dwarf_root(struct usc_cache *c, const char *path, char *buf, size_t len)
{
	size_t l = c->root ? strlen(c->root) : 0;

	if (l && !strncmp(path, c->root, l) && path[l] == '/')
		return c->root;
	l = ns_magic_root_len(path);
	if (!l || l >= len)
		return NULL;
	memcpy(buf, path, l);
	buf[l] = 0;
	return buf;
}

int cache_dwarf(struct usc_cache *c, const char *path, struct debuginfo **out)
{
	char rootbuf[64];
	struct cache_debuginfo_ent *v;

	*out = NULL;
	for (size_t i = 0; i < c->ndw; i++)
		if (!strcmp(c->dw[i].path, path)) {
			*out = c->dw[i].m;
			return c->dw[i].err;
		}
	v = realloc(c->dw, (c->ndw + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->dw = v;
	v = &c->dw[c->ndw];
	v->m = NULL;
	v->path = strdup(path);
	if (!v->path)
		return -ENOMEM;
	v->err = debuginfo_open(path, dwarf_root(c, path, rootbuf, sizeof(rootbuf)), &v->m);
	c->ndw++;
	*out = v->m;
	return v->err;
}

int cache_set_root(struct usc_cache *c, const char *root)
{
	char *r = root ? strdup(root) : NULL;

	if (root && !r)
		return -ENOMEM;
	free(c->root);
	c->root = r;
	return 0;
}

static struct maps_ent *maps_entry(struct usc_cache *c, pid_t pid, bool create)
{
	struct maps_ent *v;

	for (size_t i = 0; i < c->nmaps; i++)
		if (c->maps[i].pid == pid)
			return &c->maps[i];
	if (!create)
		return NULL;
	v = realloc(c->maps, (c->nmaps + 1) * sizeof(*v));
	if (!v)
		return NULL;
	c->maps = v;
	v = &c->maps[c->nmaps++];
	*v = (struct maps_ent){.pid = pid};
	return v;
}

/* e's maps become m (n of them, e's now). */
static void maps_replace(struct usc_cache *c, struct maps_ent *e, struct proc_map *m, size_t n)
{
	procmaps_free(e->maps, e->n);
	e->maps = m;
	e->n = n;
	e->gen = ++c->maps_gen;
}

uint64_t cache_maps_gen(struct usc_cache *c, pid_t pid)
{
	struct maps_ent *e = maps_entry(c, pid, false);

	return e ? e->gen : 0;
}

const struct proc_map *cache_maps(struct usc_cache *c, pid_t pid, bool refresh, size_t *n)
{
	struct maps_ent *e;
	struct proc_map *m = NULL;
	ssize_t got;

	if (refresh && c->maps_hook)
		c->maps_hook(c->maps_hook_ctx);	/* the mmap records first: it may have gone */
	e = maps_entry(c, pid, false);
	if (e && (!refresh || c->frozen)) {
		*n = e->n;
		return e->maps;
	}
	*n = 0;
	if (c->frozen)
		return NULL;
	got = procmaps_read(pid, &m);
	if (got == 0)
		free(m);	/* a zombie has no maps left: keep what was seen */
	if (got <= 0) {
		*n = e ? e->n : 0;
		return e ? e->maps : NULL;	/* gone: what was seen last */
	}
	e = maps_entry(c, pid, true);
	if (!e) {
		procmaps_free(m, (size_t)got);
		return NULL;
	}
	maps_replace(c, e, m, (size_t)got);
	*n = e->n;
	return e->maps;
}

void cache_maps_hook(struct usc_cache *c, void (*fn)(void *ctx), void *ctx)
{
	c->maps_hook = fn;
	c->maps_hook_ctx = ctx;
}

bool cache_frozen(const struct usc_cache *c)
{
	return c->frozen;
}

void cache_freeze(struct usc_cache *c)
{
	c->frozen = true;
}

void **cache_ext(struct usc_cache *c, enum cache_ext_id id, void (*free_fn)(void *))
{
	c->ext_free[id] = free_fn;
	return &c->ext[id];
}

static int cmp_map(const void *a, const void *b)
{
	const struct proc_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int cache_set_maps(struct usc_cache *c, pid_t pid, const struct proc_map *maps, size_t n)
{
	struct maps_ent *e = NULL;
	struct proc_map *m;
	size_t k = 0;

	e = maps_entry(c, pid, false);
	m = calloc(n + (e ? e->n : 0) + 1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		m[k] = maps[i];
		m[k].path = maps[i].path ? strdup(maps[i].path) : NULL;
		if (maps[i].path && !m[k].path)
			goto oom;
		k++;
	}
	/* the maps written before: kept where the new ones do not cover them
	 * (a library unloaded since still symbolizes its earlier hits) */
	for (size_t i = 0; e && i < e->n; i++) {
		bool hidden = false;

		for (size_t j = 0; j < n && !hidden; j++)
			hidden = e->maps[i].start < maps[j].end && maps[j].start < e->maps[i].end;
		if (hidden)
			continue;
		m[k] = e->maps[i];
		e->maps[i].path = NULL;	/* moved */
		k++;
	}
	qsort(m, k, sizeof(*m), cmp_map);
	e = maps_entry(c, pid, true);	/* again: it may move */
	if (!e)
		goto oom;
	maps_replace(c, e, m, k);
	return 0;
oom:
	procmaps_free(m, k);
	return -ENOMEM;
}

/* A path process pid names a file by, as the host opens it: under pid's
 * root when that is not ours (found once). NULL: the path as it is. */
static char *add_map_path(struct usc_cache *c, struct maps_ent *e, const struct proc_map *m)
{
	char *p;

	if (!e->root_known && !c->frozen) {
		e->root_known = 1;
		if (ns_proc_root(e->pid, &e->root))
			e->root = NULL;
	}
	if (!e->root || !m->path || m->path[0] != '/' || ns_magic_root_len(m->path))
		return NULL;
	return asprintf(&p, "%s%s", e->root, m->path) < 0 ? NULL : p;
}

int cache_add_map(struct usc_cache *c, pid_t pid, const struct proc_map *given)
{
	struct maps_ent *e = maps_entry(c, pid, true);
	struct proc_map *v, moved;
	const struct proc_map *m = given;
	char *rooted;
	size_t k = 0;

	if (!e)
		return -ENOMEM;
	if ((rooted = add_map_path(c, e, given))) {
		moved = *given;
		moved.path = rooted;
		m = &moved;
	}
	v = calloc(2 * e->n + 1, sizeof(*v));
	if (!v) {
		free(rooted);
		return -ENOMEM;
	}
	/* what the new mapping covers goes, the rest of what it overlaps
	 * stays (ld.so maps a library whole, then its segments over it; an
	 * munmap is not reported: a range stays until something else is
	 * mapped there) */
	for (size_t i = 0; i < e->n; i++) {
		struct proc_map o = e->maps[i];

		if (!(o.start < m->end && m->start < o.end)) {
			v[k++] = o;
			continue;
		}
		if (o.start < m->start) {
			v[k] = o;
			v[k].end = m->start;
			v[k].path = o.path ? strdup(o.path) : NULL;
			k++;
		}
		if (m->end < o.end) {
			v[k] = o;
			v[k].pgoff = o.pgoff + (m->end - o.start);
			v[k].start = m->end;
			v[k].path = o.path ? strdup(o.path) : NULL;
			k++;
		}
		free(o.path);
	}
	v[k] = *m;
	v[k].path = rooted ? rooted : m->path ? strdup(m->path) : NULL;
	if (m->path && !v[k].path) {
		procmaps_free(v, k);
		e->n = 0;
		free(e->maps);
		e->maps = NULL;
		return -ENOMEM;
	}
	k++;
	qsort(v, k, sizeof(*v), cmp_map);
	free(e->maps);
	e->maps = v;
	e->n = k;
	e->gen = ++c->maps_gen;
	return 0;
}

void cache_clear_maps(struct usc_cache *c, pid_t pid)
{
	struct maps_ent *e = maps_entry(c, pid, true);

	if (!e)
		return;
	procmaps_free(e->maps, e->n);
	e->maps = NULL;
	e->n = 0;
	e->gen = ++c->maps_gen;
}

int cache_copy_maps(struct usc_cache *c, pid_t from, pid_t to)
{
	struct maps_ent *f = maps_entry(c, from, false);

	if (!f || !f->n)
		return 0;
	return cache_set_maps(c, to, f->maps, f->n);
}

static const struct proc_map *map_of(const struct proc_map *m, size_t n, uint64_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (addr >= m[i].start && addr < m[i].end)
			return &m[i];
	return NULL;
}

void cache_symbolize(struct usc_cache *c, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	size_t n = 0;
	const struct proc_map *maps = cache_maps(c, pid, false, &n), *m = map_of(maps, n, addr);
	struct objfile *ef;
	uint64_t off, vaddr;
	const char *base;

	if (!m) {	/* mapped since the maps were read? */
		maps = cache_maps(c, pid, true, &n);
		m = map_of(maps, n, addr);
	}
	snprintf(buf, len, "0x%llx", (unsigned long long)addr);
	if (!m || !m->path || m->path[0] != '/')
		return;
	off = addr - m->start + m->pgoff;
	base = strrchr(m->path, '/') + 1;
	if (cache_elf(c, m->path, &ef) || objfile_offset_to_vaddr(ef, off, &vaddr)) {
		snprintf(buf, len, "%s+0x%llx", base, (unsigned long long)off);
		return;
	}
	const struct objfile_sym *fn = objfile_func_at(ef, vaddr);

	if (fn)
		snprintf(buf, len, "%s+0x%llx", objfile_sym_pretty(fn),
			 (unsigned long long)(vaddr - fn->vaddr));
	else
		snprintf(buf, len, "%s+0x%llx", base, (unsigned long long)off);
}
