/* Images (stack_walk.h): a process's mappings and its modules' tables, as
 * the walker sees them; and the walker as the tracer runs it. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/grow.h"
#include "objfile/modules.h"
#include "stack/unwjit.h"
#include "stack/unwtab.h"

static int grow(void **v, uint32_t n, uint32_t add, size_t size)
{
	void *p;

	if ((uint64_t)n + add > UINT32_MAX / 2)
		return -ENOMEM;
	p = realloc(*v, ((size_t)n + add) * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	return 0;
}

int stack_image_tab(struct stack_image *img, const struct stack_utab *u)
{
	struct stack_tab t = u->tab;

	for (uint32_t i = 0; i < img->ntabs; i++)
		if (img->added[i] == u)
			return (int)i;
	if (grow((void **)&img->tabs, img->ntabs, 1, sizeof(*img->tabs)) ||
	    grow((void **)&img->added, img->ntabs, 1, sizeof(*img->added)) ||
	    grow((void **)&img->rows, img->nrows, t.nrows, sizeof(*img->rows)) ||
	    grow((void **)&img->idx, img->nidx, t.nidx, sizeof(*img->idx)))
		return -ENOMEM;
	memcpy(img->rows + img->nrows, u->rows, (size_t)t.nrows * sizeof(*u->rows));
	memcpy(img->idx + img->nidx, u->idx, (size_t)t.nidx * sizeof(*u->idx));
	t.rows = img->nrows;
	t.idx = img->nidx;
	img->nrows += t.nrows;
	img->nidx += t.nidx;
	img->tabs[img->ntabs] = t;
	img->added[img->ntabs] = u;
	return (int)img->ntabs++;
}

int stack_image_map(struct stack_image *img, uint64_t start, uint64_t end, uint64_t bias,
		    uint32_t tab)
{
	uint32_t at = img->nmaps;

	if (start >= end || img->nmaps >= STACK_MAPS_MAX)
		return -EINVAL;
	while (at && img->maps[at - 1].start > start)
		at--;
	if ((at && img->maps[at - 1].end > start) || (at < img->nmaps && img->maps[at].start < end))
		return -EINVAL;
	if (grow((void **)&img->maps, img->nmaps, 1, sizeof(*img->maps)))
		return -ENOMEM;
	memmove(img->maps + at + 1, img->maps + at, (img->nmaps - at) * sizeof(*img->maps));
	img->maps[at] = (struct stack_map){start, end, bias, tab, 0};
	img->nmaps++;
	return 0;
}

void stack_image_free(struct stack_image *img)
{
	free(img->tabs);
	free(img->rows);
	free(img->idx);
	free(img->maps);
	free(img->added);
	memset(img, 0, sizeof(*img));
}

/* The link-time address of file offset off of the file at path: from the
 * PT_LOAD segment holding it. 0 or -errno. */
static int file_vaddr(const char *path, uint64_t off, uint64_t *vaddr)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = -ENOENT;
	size_t n = 0;
	Elf *e;

	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	/* an executable segment first: another may share its first page */
	for (int pass = 0; e && pass < 2 && err; pass++) {
		if (elf_getphdrnum(e, &n) != 0)
			break;
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			uint64_t lo;

			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    (!pass && !(ph.p_flags & PF_X)))
				continue;
			/* the segment's first page holds off (the mapping is
			 * page-aligned, the segment may start within a page) */
			lo = ph.p_offset & ~4095ULL;
			if (off >= lo && off < ph.p_offset + ph.p_filesz) {
				*vaddr = ph.p_vaddr - (ph.p_offset - off);
				err = 0;
				break;
			}
		}
	}
	elf_end(e);
	close(fd);
	return err;
}

/* The link-time address of a mapping's file offset, remembered by file
 * (device, inode, or its path where a recording has neither) and offset. */
static int map_vaddr(struct stack_vmemo *memo, const struct proc_map *m, uint64_t *vaddr)
{
	struct stack_vmemo_ent *e;
	int err;

	for (size_t i = 0; memo && i < memo->n; i++) {
		e = &memo->v[i];
		if (e->dev == m->dev && e->ino == m->inode && e->pgoff == m->pgoff &&
		    (m->inode || !strcmp(e->path, m->path))) {
			*vaddr = e->vaddr;
			return e->err;
		}
	}
	err = file_vaddr(m->path, m->pgoff, vaddr);
	if (!memo || err == -ENOMEM)
		return err;
	if (core_reserve(memo->v, memo->cap, memo->n + 1, 32))
		return err;
	e = &memo->v[memo->n];
	e->path = m->inode ? NULL : strdup(m->path);
	if (!m->inode && !e->path)
		return err;
	e->dev = m->dev;
	e->ino = m->inode;
	e->pgoff = m->pgoff;
	e->vaddr = *vaddr;
	e->err = err;
	memo->n++;
	return err;
}

void stack_vmemo_free(struct stack_vmemo *memo)
{
	for (size_t i = 0; i < memo->n; i++)
		free(memo->v[i].path);
	free(memo->v);
	memset(memo, 0, sizeof(*memo));
}

int stack_image_add_maps(struct stack_image *tabs, struct stack_tabset *s,
			 struct stack_vmemo *memo, pid_t pid, const struct proc_map *m, size_t n,
			 struct stack_image *maps)
{
	int err = 0;

	elf_version(EV_CURRENT);
	for (size_t i = 0; i < n && !err; i++) {
		const struct stack_utab *u = NULL;
		uint64_t vaddr = 0;
		uint32_t tab;
		int r;

		/* the vDSO: no file, so no module for libdw either (stack/unwind.c
		 * reports files only): a walk ends there; a probe never fires
		 * there, only a sampled stack can start in it */
		if (m[i].path && !strcmp(m[i].path, "[vdso]") && m[i].perms[2] == 'x') {
			err = stack_image_map(maps, m[i].start, m[i].end, 0, STACK_TAB_NOFILE);
			if (err == -EINVAL)
				err = 0;
			continue;
		}
		/* anonymous executable memory (JIT code; a memfd, a named
		 * anonymous mapping): walked by frame pointer, or by the table
		 * of a shape known there (CPython's perf trampolines: unwjit.h) */
		if (m[i].perms[2] == 'x' &&
		    (!m[i].path || !m[i].path[0] || !strncmp(m[i].path, "/memfd:", 7) ||
		     !strncmp(m[i].path, "[anon:", 6))) {
			tab = STACK_TAB_ANON;
			if (stack_jit_tab(pid, &m[i], &u) == 0) {
				r = stack_image_tab(tabs, u);
				if (r < 0) {
					err = r;
					break;
				}
				tab = (uint32_t)r;
			}
			err = stack_image_map(maps, m[i].start, m[i].end,
					      tab == STACK_TAB_ANON ? 0 : m[i].start, tab);
			if (err == -EINVAL)
				err = 0;
			continue;
		}
		/* what stack/unwind.c reports to libdw: files, executable */
		if (!m[i].path || m[i].path[0] != '/' || !strncmp(m[i].path, "/memfd:", 7) ||
		    strstr(m[i].path, " (deleted)") || m[i].perms[2] != 'x')
			continue;
		if (map_vaddr(memo, &m[i], &vaddr))
			continue;
		r = stack_tabset_get(s, m[i].path, &u);
		if (r == 0) {
			r = stack_image_tab(tabs, u);
			if (r < 0) {
				err = r;
				break;
			}
			tab = (uint32_t)r;
		} else if (r == -ENOMEM) {
			err = r;
			break;
		} else {
			tab = r == -ENODATA ? STACK_TAB_NONE : STACK_TAB_FAIL;
		}
		err = stack_image_map(maps, m[i].start, m[i].end, m[i].start - vaddr, tab);
		if (err == -EINVAL) {
			log_debug("stack: mapping %llx-%llx of %s overlaps another",
				  (unsigned long long)m[i].start, (unsigned long long)m[i].end,
				  m[i].path);
			err = 0;
		}
	}
	return err;
}

int stack_image_proc(struct stack_image *img, struct stack_tabset *s, pid_t pid)
{
	struct proc_map *m = NULL;
	ssize_t n = procmaps_read(pid, &m);
	int err;

	if (n < 0)
		return (int)n;
	err = stack_image_add_maps(img, s, NULL, pid, m, (size_t)n, img);
	procmaps_free(m, (size_t)n);
	return err;
}

/* ---- the walker, as the tracer runs it ------------------------------------ */

struct uenv {
	const struct stack_image *img;
	stack_read_fn read;
	void *ctx;
};

#define UENV(env) ((const struct uenv *)(env))
#define STACK_STEP stack_step_user
#define STACK_INLINE static inline
#define STACK_READ(env, dst, addr) UENV(env)->read(UENV(env)->ctx, addr, dst)
#define STACK_NMAPS(env) UENV(env)->img->nmaps
#define STACK_MAP(env, i) ((i) < UENV(env)->img->nmaps ? &UENV(env)->img->maps[i] : NULL)
#define STACK_TAB(env, i) ((i) < UENV(env)->img->ntabs ? &UENV(env)->img->tabs[i] : NULL)
#define STACK_ROW(env, i) ((i) < UENV(env)->img->nrows ? &UENV(env)->img->rows[i] : NULL)
#define STACK_IDX(env, i) ((i) < UENV(env)->img->nidx ? &UENV(env)->img->idx[i] : NULL)
#include "stack/stack_walk.h"

void stack_walk_image(const struct stack_image *img, uint64_t pc, uint64_t sp, uint64_t bp,
		      uint32_t max, stack_read_fn read, void *ctx, uint64_t *pcs,
		      struct stack_walk *w)
{
	struct uenv env = {img, read, ctx};

	stack_walk_init(w, pc, sp, bp, max, pcs);
	while (!stack_step_user(w, pcs, &env))
		;
}

static void set_bit(uint64_t *bits, uint32_t i)
{
	bits[i / 64] |= 1ULL << (i % 64);
}

int stack_walk_usc(const struct stack_walk *w, const uint64_t *pcs, bool from_copy,
		   struct usc_stack *out)
{
	static const uint8_t ends[] = {
		[STACK_WALK_OUTERMOST] = USC_STACK_END_OUTERMOST,
		[STACK_WALK_LIMIT] = USC_STACK_END_LIMIT,
		[STACK_WALK_NOCFI] = USC_STACK_END_NOCFI,
		[STACK_WALK_NOMODULE] = USC_STACK_END_NOMODULE,
	};

	memset(out, 0, sizeof(*out));
	if (w->end == STACK_WALK_FALLBACK || w->end == STACK_WALK_GOING ||
	    w->end > STACK_WALK_FALLBACK)
		return -EAGAIN;
	out->n = w->n;
	memcpy(out->pc, pcs, (size_t)w->n * sizeof(*pcs));
	if (w->end == STACK_WALK_UNREAD)
		out->end = from_copy ? USC_STACK_END_COPY : USC_STACK_END_UNREAD;
	else
		out->end = ends[w->end];
	out->end_pc = w->end_pc;
	if (w->n)
		set_bit(out->exact, 0);
	for (uint32_t k = 0; k < w->nsig && k < STACK_SIGS_MAX; k++) {
		uint32_t i = w->sig[k];

		/* the trampoline and the code it interrupted are exact (libdw's
		 * activation frames) */
		if (i < w->n) {
			set_bit(out->sigframe, i);
			set_bit(out->exact, i);
		}
		if (i + 1 < w->n)
			set_bit(out->exact, i + 1);
	}
	return 0;
}

int stack_walked(const void *v, size_t len, struct usc_stack *out, uint32_t max)
{
	uint64_t pcs[STACK_WALK_MAX];
	struct fetch_walk_hdr h;
	struct stack_walk w;
	bool cut;

	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, v, sizeof(h));
	/* a walk stopped at a row it cannot follow, counted as far as it went
	 * (the bpf engine's, when there was no room for a copy): the CFI
	 * could not be followed at end_pc */
	cut = h.end == STACK_WALK_FALLBACK;
	if (cut)
		h.end = STACK_WALK_UNREAD;
	if (len != sizeof(h) + 8 * (size_t)h.n || h.n > STACK_WALK_MAX || h.nsig > STACK_SIGS_MAX ||
	    h.end < STACK_WALK_OUTERMOST || h.end > STACK_WALK_UNREAD)
		return -EINVAL;
	for (unsigned k = 0; k < h.nsig; k++)
		if (h.sig[k] >= h.n)
			return -EINVAL;
	if (h.n > max)
		return -EINVAL;
	memset(&w, 0, sizeof(w));
	w.n = h.n;
	w.end = h.end;
	w.end_pc = h.end_pc;
	w.nsig = h.nsig;
	for (uint32_t k = 0; k < h.nsig; k++)
		w.sig[k] = h.sig[k];
	memcpy(pcs, (const uint8_t *)v + sizeof(h), 8 * (size_t)h.n);
	if (stack_walk_usc(&w, pcs, false, out))
		return -EINVAL;
	if (cut)
		out->end = USC_STACK_END_ERROR;
	return 0;
}
