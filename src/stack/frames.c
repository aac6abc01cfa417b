/* $ustack's frames by name: each address symbolized once per (module,
 * link-time address), with the function (ELF symbols, Go's pclntab,
 * demangled), the functions inlined there and their lines (the debug
 * info's scopes: debuginfo_pc_scopes). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo.h"
#include "core/grow.h"
#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "cache/cache.h"
#include "stack/stack.h"
#include "stack/stack_int.h"
#include "stack/unwstore.h"
#include "python/names.h"

#define SYM_LEVELS 8	/* inlined levels shown at one address */

struct sym_ent {
	const char *path;	/* interned */
	uint64_t vaddr;		/* the lookup address, link-time */
	bool has_func;
	uint64_t func_vaddr;
	const char *func;	/* the ELF symbol's name (owned by the ELF cache) */
	const char *go_file;	/* no debug info: Go's pcfile, pcln (the ELF cache's) */
	unsigned go_line;
	size_t n;		/* debug-info levels, innermost first */
	struct debuginfo_scope lv[];
};

static void stack_cache_free(void *p)
{
	struct stack_cache *sc = p;

	if (!sc)
		return;
	for (size_t i = 0; i < STACK_PROCS; i++)
		if (sc->procs[i].dwfl)
			dwfl_end(sc->procs[i].dwfl);
	for (size_t i = 0; i < sc->ntab; i++) {
		struct sym_ent *e = sc->tab[i];

		for (size_t k = 0; e && k < e->n; k++)
			free(e->lv[k].owned);
		free(e);
	}
	for (size_t i = 0; i < sc->npaths; i++)
		free(sc->paths[i]);
	for (size_t i = 0; i < sc->nstacks; i++)
		free(sc->stacks[i].st);
	free(sc->stacks);
	free(sc->stack_slots);
	stack_store_free(sc->store);
	stack_perfmaps_free(sc->perfmaps);
	free(sc->paths);
	free(sc->tab);
	free(sc);
}

struct stack_cache *stack_cache_get(struct usc_cache *c)
{
	struct stack_cache **sc = (struct stack_cache **)cache_ext(c, CACHE_EXT_STACK,
								     stack_cache_free);

	if (!*sc)
		*sc = calloc(1, sizeof(**sc));
	return *sc;
}

static const char *intern(struct stack_cache *sc, const char *path)
{
	char **v;

	for (size_t i = 0; i < sc->npaths; i++)
		if (!strcmp(sc->paths[i], path))
			return sc->paths[i];
	v = realloc(sc->paths, (sc->npaths + 1) * sizeof(*v));
	if (!v)
		return NULL;
	sc->paths = v;
	v[sc->npaths] = strdup(path);
	return v[sc->npaths] ? v[sc->npaths++] : NULL;
}

static size_t slot_of(const struct stack_cache *sc, const char *path, uint64_t vaddr)
{
	uint64_t h = ((uintptr_t)path ^ (vaddr * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;

	return (size_t)(h >> 17) & (sc->ntab - 1);
}

static int tab_grow(struct stack_cache *sc)
{
	size_t n = sc->ntab ? sc->ntab * 2 : 1024;
	struct sym_ent **t = calloc(n, sizeof(*t)), **old = sc->tab;
	size_t oldn = sc->ntab;

	if (!t)
		return -ENOMEM;
	sc->tab = t;
	sc->ntab = n;
	for (size_t i = 0; i < oldn; i++)
		if (old[i]) {
			size_t k = slot_of(sc, old[i]->path, old[i]->vaddr);

			while (t[k])
				k = (k + 1) & (n - 1);
			t[k] = old[i];
		}
	free(old);
	return 0;
}

/* The names at link-time address vaddr of the module at path (cached). */
static const struct sym_ent *sym_lookup(struct usc_cache *c, struct stack_cache *sc,
					const char *path, uint64_t vaddr)
{
	struct debuginfo_scope lv[SYM_LEVELS];
	struct debuginfo *dm = NULL;
	struct objfile *ef = NULL;
	struct sym_ent *e;
	ssize_t n = 0;
	size_t k;

	path = intern(sc, path);
	if (!path || ((sc->used + 1) * 2 > sc->ntab && tab_grow(sc)))
		return NULL;
	for (k = slot_of(sc, path, vaddr); sc->tab[k]; k = (k + 1) & (sc->ntab - 1))
		if (sc->tab[k]->path == path && sc->tab[k]->vaddr == vaddr)
			return sc->tab[k];
	if (cache_dwarf(c, path, &dm) == 0)
		n = debuginfo_pc_scopes(dm, vaddr, lv, SYM_LEVELS);
	if (n < 0)
		n = 0;
	e = calloc(1, sizeof(*e) + (size_t)n * sizeof(e->lv[0]));
	if (!e) {
		for (ssize_t i = 0; i < n; i++)
			free(lv[i].owned);
		return NULL;
	}
	e->path = path;
	e->vaddr = vaddr;
	e->n = (size_t)n;
	memcpy(e->lv, lv, (size_t)n * sizeof(lv[0]));
	if (cache_elf(c, path, &ef) == 0) {
		const struct objfile_sym *fn = objfile_func_at(ef, vaddr);

		if (fn) {
			e->has_func = true;
			e->func_vaddr = fn->vaddr;
			e->func = objfile_sym_pretty(fn);
		}
		if (!n && ef->is_go)
			objfile_go_line(ef, vaddr, &e->go_file, &e->go_line);
	}
	sc->tab[k] = e;
	sc->used++;
	return e;
}

static const struct proc_map *map_at(struct usc_cache *c, pid_t pid, uint64_t addr)
{
	size_t n = 0;
	const struct proc_map *m = cache_maps(c, pid, false, &n);

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; m && i < n; i++)
			if (addr >= m[i].start && addr < m[i].end)
				return &m[i];
		if (!pass)
			m = cache_maps(c, pid, true, &n);
	}
	return NULL;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

size_t stack_syms(struct usc_cache *c, pid_t pid, const struct usc_stack *st, uint32_t i,
		  struct stack_sym *out, size_t max)
{
	struct stack_cache *sc = stack_cache_get(c);
	uint64_t pc = st->pc[i], look = usc_stack_exact(st, i) ? pc : pc - 1, vaddr;
	const struct proc_map *m;
	const struct sym_ent *e;
	struct objfile *ef;
	size_t n = 0;

	if (!max)
		return 0;
	if (usc_stack_python(st, i)) {
		const struct python_loc *l = python_names_loc(c, pc);

		out[0] = (struct stack_sym){.pc = pc, .python = true};
		if (l) {
			out[0].func = l->qualname;
			out[0].file = l->filename;
			out[0].line = l->line > 0 ? (unsigned)l->line : 0;
		}
		return 1;
	}
	out[0] = (struct stack_sym){.pc = pc, .signal = usc_stack_sigframe(st, i)};
	m = sc ? map_at(c, pid, look) : NULL;
	if (!m || !m->path || m->path[0] != '/' || !strncmp(m->path, "/memfd:", 7)) {
		/* no file: JIT code, named by the process's perf map */
		const char *jit = sc ? stack_perfmap_sym(sc, pid, look, &vaddr) : NULL;

		/* kept: the map's own strings move as it is read on */
		jit = jit ? intern(sc, jit) : NULL;
		if (jit) {
			out[0].func = jit;
			out[0].off = look - vaddr + (pc - look);
			out[0].jit = true;
		}
		return 1;
	}
	out[0].module = base_name(m->path);
	out[0].path = m->path;
	if (cache_elf(c, m->path, &ef) ||
	    objfile_offset_to_vaddr(ef, look - m->start + m->pgoff, &vaddr))
		return 1;
	e = sym_lookup(c, sc, m->path, vaddr);
	if (!e)
		return 1;
	out[0].module = base_name(e->path);
	out[0].path = e->path;
	for (size_t k = 0; k < e->n && n < max; k++) {
		out[n] = out[0];
		out[n].func = e->lv[k].name;
		out[n].file = e->lv[k].file;
		out[n].line = e->lv[k].line;
		out[n].inlined = e->lv[k].inlined;
		n++;
	}
	if (!n) {
		n = 1;
		out[0].file = e->go_file;
		out[0].line = e->go_line;
	}
	/* the function itself: the symbol's name (demangled, with its
	 * parameters for C++) and the offset of pc in it */
	if (e->has_func && !out[n - 1].inlined) {
		out[n - 1].func = e->func;
		out[n - 1].off = vaddr + (pc - look) - e->func_vaddr;
	} else if (!out[n - 1].inlined && out[n - 1].func && e->n && e->lv[e->n - 1].has_off) {
		/* no symbol (a local function of a stripped library): the
		 * debug info's entry */
		out[n - 1].off = e->lv[e->n - 1].off + (pc - look);
	} else if (!out[n - 1].inlined) {
		out[n - 1].off = 0;
		if (!out[n - 1].func)
			out[n - 1].off = look - m->start + m->pgoff + (pc - look);
	}
	return n;
}

void stack_end_text(struct usc_cache *c, pid_t pid, const struct usc_stack *st, char *buf,
		    size_t len)
{
	const struct proc_map *m;
	char where[512] = "";

	if (st->end_pc && (m = map_at(c, pid, st->end_pc)) && m->path)
		snprintf(where, sizeof(where), " (%s)", base_name(m->path));
	switch (st->end) {
	case USC_STACK_END_OUTERMOST:
		snprintf(buf, len, "%s", "");
		break;
	case USC_STACK_END_LIMIT:
		snprintf(buf, len, "more frames: a larger :N shows more");
		break;
	case USC_STACK_END_COPY:
		snprintf(buf, len, "the stack copied ends (--stack-size copies more)");
		break;
	case USC_STACK_END_NOCFI:
		snprintf(buf, len, "no CFI for 0x%llx%s", (unsigned long long)st->end_pc, where);
		break;
	case USC_STACK_END_NOMODULE:
		snprintf(buf, len, "0x%llx is in no file mapping", (unsigned long long)st->end_pc);
		break;
	case USC_STACK_END_UNREAD:
		snprintf(buf, len, "the stack could not be read");
		break;
	case USC_STACK_END_PYFAULT:
		snprintf(buf, len, "a Python frame could not be read");
		break;
	case USC_STACK_END_NOPYTHON:
		snprintf(buf, len, "no Python frames: the thread runs no Python code here");
		break;
	case USC_STACK_END_PYNOTYET:
		snprintf(buf, len, "Python frames not read: the process's CPython was not known "
			 "yet (system-wide: found at its first hit)");
		break;
	default:
		snprintf(buf, len, "the CFI at 0x%llx%s could not be followed",
			 (unsigned long long)st->end_pc, where);
		break;
	}
}

/* ---- interned stacks -------------------------------------------------------- */

static uint64_t stack_hash(pid_t pid, const struct usc_stack *st)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)(uint32_t)pid;

	h = (h ^ ((uint64_t)st->n << 8 | st->end)) * 0x100000001b3ULL;
	for (uint32_t i = 0; i < st->n; i++)
		h = (h ^ st->pc[i] ^ (uint64_t)usc_stack_python(st, i) << 63) * 0x100000001b3ULL;
	return h ^ (h >> 29);
}

static bool stack_same(const struct usc_stack *a, const struct usc_stack *b)
{
	return a->n == b->n && a->end == b->end && a->end_pc == b->end_pc &&
	       !memcmp(a->exact, b->exact, sizeof(a->exact)) &&
	       !memcmp(a->sigframe, b->sigframe, sizeof(a->sigframe)) &&
	       !memcmp(a->python, b->python, sizeof(a->python)) &&
	       !memcmp(a->pc, b->pc, a->n * sizeof(a->pc[0]));
}

static int stack_slots_grow(struct stack_cache *sc)
{
	size_t n = sc->nstack_slots ? sc->nstack_slots * 2 : 1024;
	uint32_t *t = calloc(n, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < sc->nstacks; i++) {
		size_t k = (size_t)sc->stacks[i].hash & (n - 1);

		while (t[k])
			k = (k + 1) & (n - 1);
		t[k] = (uint32_t)i + 1;
	}
	free(sc->stack_slots);
	sc->stack_slots = t;
	sc->nstack_slots = n;
	return 0;
}

uint64_t stack_intern(struct usc_cache *c, pid_t pid, const struct usc_stack *st)
{
	struct stack_cache *sc = stack_cache_get(c);
	uint64_t h;
	size_t k;

	if (!sc)
		return 0;
	if ((sc->nstacks + 1) * 2 > sc->nstack_slots && stack_slots_grow(sc))
		return 0;
	h = stack_hash(pid, st);
	for (k = (size_t)h & (sc->nstack_slots - 1); sc->stack_slots[k];
	     k = (k + 1) & (sc->nstack_slots - 1)) {
		const struct interned *in = &sc->stacks[sc->stack_slots[k] - 1];

		if (in->hash == h && in->pid == pid && stack_same(in->st, st))
			return sc->stack_slots[k];
	}
	if (core_reserve(sc->stacks, sc->capstacks, sc->nstacks + 1, 256))
		return 0;
	struct usc_stack *copy = malloc(stack_size(st->n));

	if (!copy)
		return 0;
	memcpy(copy, st, stack_size(st->n));
	sc->stacks[sc->nstacks] = (struct interned){pid, h, copy};
	sc->stack_slots[k] = (uint32_t)++sc->nstacks;
	return sc->nstacks;
}

const struct usc_stack *stack_interned(struct usc_cache *c, uint64_t id, pid_t *pid)
{
	struct stack_cache *sc = stack_cache_get(c);

	if (!sc || !id || id > sc->nstacks)
		return NULL;
	*pid = sc->stacks[id - 1].pid;
	return sc->stacks[id - 1].st;
}
