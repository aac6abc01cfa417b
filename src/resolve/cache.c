/* The session's cache of files: see cache.h. */
#include "resolve/cache.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwarf/dwarf.h"
#include "elf/elf.h"
#include "elf/modules.h"

struct elf_ent {
	char *path;
	struct elf_file *ef;
	int err;
};

struct dwarf_ent {
	char *path;
	struct dwarf_module *m;
	int err;
};

struct maps_ent {
	pid_t pid;
	struct proc_map *maps;
	size_t n;
};

struct cache {
	struct elf_ent *elf;
	size_t nelf;
	struct dwarf_ent *dw;
	size_t ndw;
	struct maps_ent *maps;
	size_t nmaps;
};

struct cache *cache_new(void)
{
	return calloc(1, sizeof(struct cache));
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->ndw; i++) {
		dwarf_close(c->dw[i].m);
		free(c->dw[i].path);
	}
	for (size_t i = 0; i < c->nelf; i++) {
		elf_close(c->elf[i].ef);
		free(c->elf[i].path);
	}
	for (size_t i = 0; i < c->nmaps; i++)
		procmaps_free(c->maps[i].maps, c->maps[i].n);
	free(c->dw);
	free(c->elf);
	free(c->maps);
	free(c);
}

int cache_elf(struct cache *c, const char *path, struct elf_file **out)
{
	struct elf_ent *v;

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
	v->err = elf_open(path, &v->ef);
	c->nelf++;
	*out = v->ef;
	return v->err;
}

int cache_dwarf(struct cache *c, const char *path, struct dwarf_module **out)
{
	struct dwarf_ent *v;

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
	v->err = dwarf_open(path, &v->m);
	c->ndw++;
	*out = v->m;
	return v->err;
}

const struct proc_map *cache_maps(struct cache *c, pid_t pid, bool refresh, size_t *n)
{
	struct maps_ent *e = NULL;
	struct proc_map *m = NULL;
	ssize_t got;

	for (size_t i = 0; i < c->nmaps && !e; i++)
		if (c->maps[i].pid == pid)
			e = &c->maps[i];
	if (e && !refresh) {
		*n = e->n;
		return e->maps;
	}
	got = procmaps_read(pid, &m);
	if (got < 0) {
		*n = e ? e->n : 0;
		return e ? e->maps : NULL;	/* gone: what was seen last */
	}
	if (!e) {
		struct maps_ent *v = realloc(c->maps, (c->nmaps + 1) * sizeof(*v));

		if (!v) {
			procmaps_free(m, (size_t)got);
			*n = 0;
			return NULL;
		}
		c->maps = v;
		e = &c->maps[c->nmaps++];
		e->pid = pid;
	} else {
		procmaps_free(e->maps, e->n);
	}
	e->maps = m;
	e->n = (size_t)got;
	*n = e->n;
	return e->maps;
}

static const struct proc_map *map_of(const struct proc_map *m, size_t n, uint64_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (addr >= m[i].start && addr < m[i].end)
			return &m[i];
	return NULL;
}

void cache_symbolize(struct cache *c, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	size_t n = 0;
	const struct proc_map *maps = cache_maps(c, pid, false, &n), *m = map_of(maps, n, addr);
	struct elf_file *ef;
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
	if (cache_elf(c, m->path, &ef) || elf_offset_to_vaddr(ef, off, &vaddr)) {
		snprintf(buf, len, "%s+0x%llx", base, (unsigned long long)off);
		return;
	}
	const struct elf_sym *fn = elf_func_at(ef, vaddr);

	if (fn)
		snprintf(buf, len, "%s+0x%llx", elf_sym_pretty(fn),
			 (unsigned long long)(vaddr - fn->vaddr));
	else
		snprintf(buf, len, "%s+0x%llx", base, (unsigned long long)off);
}
