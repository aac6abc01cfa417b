/* Python by name in uscope (names.h): per process, code objects read or
 * told; locations interned for stacks. */
#include "python/names.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "core/grow.h"
#include "core/log.h"
#include "python/linetable.h"
#include "python/symbolize.h"

#define VERIFY_MS 250	/* a code object read is checked against reuse this often */

/* A code object told, owned. */
struct told {
	uint64_t addr;
	char *module, *qualname, *filename;
	int firstlineno, firsttraceable;
	uint8_t *linetable;
	size_t linetable_len;
	bool has_linetable;
};

/* A code address seen in a process's memory: when it was last checked,
 * and whether python_names_new_codes handed it out. */
struct seen {
	uint64_t addr;
	uint64_t checked_ms;
	const void *code;	/* the python_code it was handed out as */
};

struct pyproc {
	pid_t pid;
	bool looked;		/* its runtime was looked for */
	bool live;		/* ... and found: its memory is read */
	struct python_procmem pm;
	struct python_sym *sym;
	struct told **told;	/* open addressing by address */
	size_t ntold, told_cap;
	struct seen *seen;	/* the same */
	size_t nseen, seen_cap;
	uint64_t *fresh;	/* told or read, not handed out yet */
	size_t nfresh, fresh_cap;
	struct told scratch;	/* python_names_code's module of a read one */
	unsigned unread;	/* addresses that were no code object: the first logged */
};

#define UNREAD_LOGGED 8

struct loc {
	struct python_loc l;
	uint64_t hash;
};

struct python_names {
	struct pyproc **procs;
	size_t nprocs;
	struct loc *locs;	/* ids are index + 1 */
	size_t nlocs, cap;
	uint32_t *slots;	/* open addressing: index + 1 */
	size_t nslots;
};

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static uint64_t mix(uint64_t a)
{
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdULL;
	a ^= a >> 33;
	return a;
}

static void told_free(struct told *t)
{
	if (!t)
		return;
	free(t->module);
	free(t->qualname);
	free(t->filename);
	free(t->linetable);
	free(t);
}

static void proc_free(struct pyproc *p)
{
	for (size_t i = 0; i < p->told_cap; i++)
		told_free(p->told[i]);
	free(p->told);
	free(p->seen);
	free(p->fresh);
	python_sym_free(p->sym);
	python_procmem_close(&p->pm);
	free(p);
}

static void names_free(void *v)
{
	struct python_names *n = v;

	if (!n)
		return;
	for (size_t i = 0; i < n->nprocs; i++)
		proc_free(n->procs[i]);
	for (size_t i = 0; i < n->nlocs; i++) {
		free((char *)n->locs[i].l.qualname);
		free((char *)n->locs[i].l.filename);
	}
	free(n->procs);
	free(n->locs);
	free(n->slots);
	free(n);
}

static struct python_names *names_get(struct usc_cache *c)
{
	struct python_names **n = (struct python_names **)cache_ext(c, CACHE_EXT_PYTHON, names_free);

	if (!*n)
		*n = calloc(1, sizeof(**n));
	return *n;
}

static struct pyproc *proc_of(struct python_names *n, pid_t pid, bool make)
{
	struct pyproc *p, **v;

	for (size_t i = 0; i < n->nprocs; i++)
		if (n->procs[i]->pid == pid)
			return n->procs[i];
	if (!make || !(p = calloc(1, sizeof(*p))))
		return NULL;
	v = realloc(n->procs, (n->nprocs + 1) * sizeof(*v));
	if (!v) {
		free(p);
		return NULL;
	}
	n->procs = v;
	p->pid = pid;
	p->pm.fd = -1;
	n->procs[n->nprocs++] = p;
	return p;
}

static int start_reading(struct pyproc *p, const struct python_runtime *rt)
{
	struct python_mem mem;

	python_procmem_init(&p->pm, p->pid, &mem);
	p->sym = python_sym_new(rt->off, &mem, &rt->types);
	p->looked = true;
	p->live = p->sym != NULL;
	return p->sym ? 0 : -ENOMEM;
}

int python_names_runtime(struct usc_cache *c, pid_t pid, const struct python_runtime *rt)
{
	struct python_names *n = names_get(c);
	struct pyproc *p = n ? proc_of(n, pid, true) : NULL;

	if (!p)
		return -ENOMEM;
	if (p->live)
		return 0;
	return start_reading(p, rt);
}

/* A process's runtime, looked for once (live runs only). */
static struct pyproc *proc_ready(struct usc_cache *c, struct python_names *n, pid_t pid)
{
	struct pyproc *p = proc_of(n, pid, true);
	struct python_runtime rt;

	if (!p || p->looked || cache_frozen(c))
		return p;
	p->looked = true;
	if (python_find_pid(pid, &rt) == 0) {
		start_reading(p, &rt);
		python_runtime_free(&rt);
	}
	return p;
}

/* ---- told code objects ------------------------------------------------------ */

static struct told **told_slot(struct pyproc *p, uint64_t addr)
{
	size_t i = (size_t)mix(addr) & (p->told_cap - 1);

	while (p->told[i] && p->told[i]->addr != addr)
		i = (i + 1) & (p->told_cap - 1);
	return &p->told[i];
}

static struct told *told_find(struct pyproc *p, uint64_t addr)
{
	return p->told_cap ? *told_slot(p, addr) : NULL;
}

static int told_grow(struct pyproc *p)
{
	size_t old = p->told_cap;
	struct told **prev = p->told;

	p->told_cap = old ? old * 2 : 64;
	p->told = calloc(p->told_cap, sizeof(*p->told));
	if (!p->told) {
		p->told = prev;
		p->told_cap = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < old; i++)
		if (prev[i])
			*told_slot(p, prev[i]->addr) = prev[i];
	free(prev);
	return 0;
}

static int fresh_add(struct pyproc *p, uint64_t addr)
{
	if (core_reserve(p->fresh, p->fresh_cap, p->nfresh + 1, 64))
		return -ENOMEM;
	p->fresh[p->nfresh++] = addr;
	return 0;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int python_names_tell(struct usc_cache *c, pid_t pid, const struct python_code_info *ci)
{
	struct python_names *n = names_get(c);
	struct pyproc *p = n ? proc_of(n, pid, true) : NULL;
	struct told *t, **slot;

	if (!p || ((p->ntold + 1) * 2 > p->told_cap && told_grow(p)))
		return -ENOMEM;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->addr = ci->addr;
	t->module = dup_or_null(ci->module);
	t->qualname = strdup(ci->qualname ? ci->qualname : "?");
	t->filename = strdup(ci->filename ? ci->filename : "?");
	t->firstlineno = ci->firstlineno;
	t->firsttraceable = ci->firsttraceable;
	t->has_linetable = ci->linetable != NULL;
	if (ci->linetable_len && (t->linetable = malloc(ci->linetable_len)))
		memcpy(t->linetable, ci->linetable, ci->linetable_len);
	t->linetable_len = t->linetable ? ci->linetable_len : 0;
	if ((ci->module && !t->module) || !t->qualname || !t->filename ||
	    (ci->linetable_len && !t->linetable)) {
		told_free(t);
		return -ENOMEM;
	}
	slot = told_slot(p, ci->addr);
	if (*slot && !strcmp((*slot)->qualname, t->qualname) &&
	    !strcmp((*slot)->filename, t->filename)) {
		/* the same object told again: what each told stands (a py:
		 * probe's verdict has its module, a walk its line table) */
		if (!t->module && (*slot)->module) {
			t->module = (*slot)->module;
			(*slot)->module = NULL;
		}
		if (!t->has_linetable && (*slot)->has_linetable) {
			t->has_linetable = true;
			t->linetable = (*slot)->linetable;
			t->linetable_len = (*slot)->linetable_len;
			t->firsttraceable = (*slot)->firsttraceable;
			(*slot)->linetable = NULL;
		}
	}
	if (*slot) {
		told_free(*slot);
	} else {
		p->ntold++;
	}
	*slot = t;
	return fresh_add(p, ci->addr);
}

/* ---- code objects read ------------------------------------------------------ */

static struct seen *seen_slot(struct pyproc *p, uint64_t addr)
{
	size_t i = (size_t)mix(addr) & (p->seen_cap - 1);

	while (p->seen[i].addr && p->seen[i].addr != addr)
		i = (i + 1) & (p->seen_cap - 1);
	return &p->seen[i];
}

static int seen_grow(struct pyproc *p)
{
	size_t old = p->seen_cap;
	struct seen *prev = p->seen;

	p->seen_cap = old ? old * 2 : 256;
	p->seen = calloc(p->seen_cap, sizeof(*p->seen));
	if (!p->seen) {
		p->seen = prev;
		p->seen_cap = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < old; i++)
		if (prev[i].addr)
			*seen_slot(p, prev[i].addr) = prev[i];
	free(prev);
	return 0;
}

/* From the process's memory, checked against reuse now and then. */
static const struct python_code *read_code(struct pyproc *p, uint64_t addr)
{
	const struct python_code *pc = NULL;
	struct seen *s;
	uint64_t now;
	bool verify;
	int err;

	if (!p->live || !addr)
		return NULL;
	if ((p->nseen + 1) * 2 > p->seen_cap && seen_grow(p))
		return NULL;
	s = seen_slot(p, addr);
	now = now_ms();
	verify = !s->addr || now - s->checked_ms >= VERIFY_MS;
	err = python_sym_code(p->sym, addr, verify, &pc);
	if (err == -EFAULT && verify && s->addr)
		/* the process has gone: what was read of it stands */
		err = python_sym_code(p->sym, addr, false, &pc);
	if (err) {
		if (p->unread < UNREAD_LOGGED)
			log_debug("python: process %d: no code object at %#llx: %s%s", (int)p->pid,
				  (unsigned long long)addr, strerror(-err),
				  p->unread + 1 == UNREAD_LOGGED ? " (more not logged)" : "");
		p->unread++;
		return NULL;	/* not a code object (now), or gone */
	}
	if (!s->addr) {
		s->addr = addr;
		p->nseen++;
	}
	if (verify)
		s->checked_ms = now;
	if (s->code != pc) {
		/* first read, or read again (another object at the address) */
		s->code = pc;
		fresh_add(p, addr);
	}
	return pc;
}

int python_names_code(struct usc_cache *c, pid_t pid, uint64_t addr,
		      struct python_code_info *out)
{
	struct python_names *n = names_get(c);
	struct pyproc *p = n ? proc_ready(c, n, pid) : NULL;
	const struct python_code *pc;
	const struct told *t;

	memset(out, 0, sizeof(*out));
	if (!p)
		return -ENOENT;
	t = told_find(p, addr);
	/* a py: probe's function key of a later code object at an address
	 * (python/frame.h): what was told of it, else the object there now;
	 * one told whose names the object there now does not have is another
	 * object, freed since (a module's body): what was told stands */
	pc = PY_CODE_ADDR(addr) == addr || !t ? read_code(p, PY_CODE_ADDR(addr)) : NULL;
	if (pc && t && (strcmp(t->qualname, pc->qualname) || strcmp(t->filename, pc->filename)))
		pc = NULL;
	if (pc) {
		out->addr = addr;
		out->qualname = pc->qualname;
		out->filename = pc->filename;
		out->firstlineno = pc->firstlineno;
		out->firsttraceable = pc->firsttraceable;
		out->linetable = pc->linetable ? pc->linetable : (const uint8_t *)"";
		out->linetable_len = pc->linetable_len;
		/* its module, when told of this very object */
		if (t && t->module && !strcmp(t->qualname, pc->qualname) &&
		    !strcmp(t->filename, pc->filename))
			out->module = t->module;
		return 0;
	}
	if (!t) {
		log_debug("python: process %d: code object %#llx: %s", (int)pid,
			  (unsigned long long)addr, p->live ? "not readable" : "its memory is not read");
		return -ENOENT;
	}
	out->addr = addr;
	out->module = t->module;
	out->qualname = t->qualname;
	out->filename = t->filename;
	out->firstlineno = t->firstlineno;
	out->firsttraceable = t->firsttraceable;
	if (t->has_linetable) {
		out->linetable = t->linetable ? t->linetable : (const uint8_t *)"";
		out->linetable_len = t->linetable_len;
	}
	return 0;
}

int python_names_new_codes(struct usc_cache *c, pid_t pid,
			   int (*fn)(void *ctx, pid_t pid, const struct python_code_info *ci),
			   void *ctx)
{
	struct python_names *n = names_get(c);
	struct pyproc *p = n ? proc_of(n, pid, false) : NULL;
	int ret = 0;

	while (p && p->nfresh && !ret) {
		struct python_code_info ci;
		uint64_t addr = p->fresh[--p->nfresh];

		if (python_names_code(c, pid, addr, &ci) == 0)
			ret = fn(ctx, pid, &ci);
	}
	return ret;
}

/* ---- locations -------------------------------------------------------------- */

static uint64_t loc_hash(const char *q, const char *f, int line)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)(uint32_t)line;

	for (; *q; q++)
		h = (h ^ (uint8_t)*q) * 0x100000001b3ULL;
	h = (h ^ 0xff) * 0x100000001b3ULL;
	for (; *f; f++)
		h = (h ^ (uint8_t)*f) * 0x100000001b3ULL;
	return h ? h : 1;
}

static int loc_slots_grow(struct python_names *n)
{
	size_t cap = n->nslots ? n->nslots * 2 : 1024;
	uint32_t *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n->nlocs; i++) {
		size_t k = (size_t)n->locs[i].hash & (cap - 1);

		while (t[k])
			k = (k + 1) & (cap - 1);
		t[k] = (uint32_t)i + 1;
	}
	free(n->slots);
	n->slots = t;
	n->nslots = cap;
	return 0;
}

uint64_t python_names_intern(struct usc_cache *c, const char *qualname, const char *filename,
			     int line)
{
	struct python_names *n = names_get(c);
	uint64_t h;
	size_t k;

	if (!n || ((n->nlocs + 1) * 2 > n->nslots && loc_slots_grow(n)))
		return 0;
	h = loc_hash(qualname, filename, line);
	for (k = (size_t)h & (n->nslots - 1); n->slots[k]; k = (k + 1) & (n->nslots - 1)) {
		const struct loc *l = &n->locs[n->slots[k] - 1];

		if (l->hash == h && l->l.line == line && !strcmp(l->l.qualname, qualname) &&
		    !strcmp(l->l.filename, filename))
			return n->slots[k];
	}
	if (core_reserve(n->locs, n->cap, n->nlocs + 1, 256))
		return 0;
	n->locs[n->nlocs] = (struct loc){{strdup(qualname), strdup(filename), line}, h};
	if (!n->locs[n->nlocs].l.qualname || !n->locs[n->nlocs].l.filename) {
		free((char *)n->locs[n->nlocs].l.qualname);
		free((char *)n->locs[n->nlocs].l.filename);
		return 0;
	}
	n->slots[k] = (uint32_t)++n->nlocs;
	return n->nlocs;
}

const struct python_loc *python_names_loc(struct usc_cache *c, uint64_t id)
{
	struct python_names *n = names_get(c);

	if (!n || !id || id > n->nlocs)
		return NULL;
	return &n->locs[id - 1].l;
}

uint64_t python_names_frame(struct usc_cache *c, pid_t pid, const struct python_frame *f,
			    bool *hidden)
{
	struct python_code_info ci;
	char addr[32];
	int line = -1;

	*hidden = false;
	if (python_names_code(c, pid, f->code, &ci)) {
		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)f->code);
		return python_names_intern(c, "<unknown code>", addr, -1);
	}
	if (ci.linetable)
		line = python_linetable_line(ci.linetable, ci.linetable_len, ci.firstlineno,
					     f->instr);
	/* _PyFrame_IsIncomplete: before its first traceable instruction, and
	 * not a generator's */
	*hidden = ci.linetable && !(f->flags & (PYFRAME_GEN | PYFRAME_WHOLE)) &&
		  (int64_t)f->instr < 2 * (int64_t)ci.firsttraceable;
	return python_names_intern(c, ci.qualname, ci.filename, line);
}

const struct python_loc *python_names_func(struct usc_cache *c, pid_t pid, uint64_t code)
{
	struct python_names *n = names_get(c);
	struct python_code_info ci;
	char name[1024];
	int ret = python_names_code(c, pid, code, &ci);

	/* an in-place row has no process of its own: any process told of it */
	for (size_t i = 0; ret && n && i < n->nprocs; i++)
		if (n->procs[i]->pid != pid)
			ret = python_names_code(c, n->procs[i]->pid, code, &ci);
	if (ret) {
		snprintf(name, sizeof(name), "<code 0x%llx>", (unsigned long long)PY_CODE_ADDR(code));
		return python_names_loc(c, python_names_intern(c, name, "?", -1));
	}
	if (ci.module)
		snprintf(name, sizeof(name), "%s:%s", ci.module, ci.qualname);
	else
		snprintf(name, sizeof(name), "%s", ci.qualname);
	return python_names_loc(c, python_names_intern(c, name, ci.filename, ci.firstlineno));
}

static void set_bit(uint64_t *b, uint32_t i)
{
	b[i / 64] |= 1ULL << (i % 64);
}

int python_names_stack(struct usc_cache *c, pid_t pid, const void *bytes, uint32_t len,
		       struct usc_stack *st, uint32_t max)
{
	struct python_stack_hdr h;
	const struct python_frame *f;

	if (!python_stack_ok(bytes, len))
		return -EINVAL;
	memcpy(&h, bytes, sizeof(h));
	f = (const struct python_frame *)((const char *)bytes + sizeof(h));
	memset(st, 0, sizeof(*st));
	if (max > USC_STACK_FRAMES_MAX)
		max = USC_STACK_FRAMES_MAX;
	for (uint32_t i = 0; i < h.n; i++) {
		struct python_frame fr;
		bool hidden;
		uint64_t id;

		memcpy(&fr, f + i, sizeof(fr));
		id = python_names_frame(c, pid, &fr, &hidden);
		if (!id)
			return -ENOMEM;
		if (hidden)
			continue;
		if (st->n == max) {
			st->end = USC_STACK_END_LIMIT;
			return 0;
		}
		set_bit(st->python, st->n);
		st->pc[st->n++] = id;
	}
	/* an empty chain: the thread has a state but runs no Python now
	 * (CPython starting, or C code before any frame) */
	st->end = h.status == PYWALK_END && !h.n ? USC_STACK_END_NOPYTHON :
		  h.status == PYWALK_END ? USC_STACK_END_OUTERMOST :
		  h.status == PYWALK_FULL ? USC_STACK_END_LIMIT :
		  h.status == PYWALK_NONE ? USC_STACK_END_NOPYTHON :
		  h.status == PYWALK_NOTYET ? USC_STACK_END_PYNOTYET : USC_STACK_END_PYFAULT;
	return 0;
}
