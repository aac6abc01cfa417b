/* The shape of a function: see shape.h. */
#include "resolve/shape.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>

/* Read the code of rg[i] for i in [from, n) from the file. */
static int read_code(const struct objfile *ef, struct x86_region *rg, size_t from, size_t n)
{
	for (size_t i = from; i < n; i++) {
		uint8_t *code = malloc(rg[i].len ? rg[i].len : 1);
		int ret = code ? objfile_read(ef, rg[i].addr, code, rg[i].len) : -ENOMEM;

		rg[i].code = code;
		if (ret)
			return ret;
	}
	return 0;
}

/* Parts of the function a stripped file names not (no NAME.cold symbol):
 * code its jmp/jcc reach outside its regions and outside every known
 * function, whose FDE starts mid-function (its CFA is not an entry's). */
static int add_unnamed_parts(const struct objfile *ef, struct func_shape *s)
{
	bool added = true;

	while (added && s->n < SHAPE_MAX_REGIONS) {
		uint64_t t[64];
		ssize_t nt = x86_branches_out(s->rg, s->n, t, 64);

		added = false;
		for (ssize_t i = 0; i < nt && s->n < SHAPE_MAX_REGIONS; i++) {
			struct objfile_fde fde;
			bool known = false;
			int ret;

			for (size_t r = 0; r < s->n; r++)
				known |= t[i] >= s->rg[r].addr && t[i] - s->rg[r].addr < s->rg[r].len;
			if (known || objfile_func_at(ef, t[i]) || objfile_in_plt(ef, t[i]) ||
			    objfile_fde_at(ef, t[i], &fde) || !fde.mid ||
			    objfile_func_at(ef, fde.start) || objfile_func_at(ef, fde.end - 1) ||
			    fde.end - fde.start > (1u << 20))
				continue;
			s->rg[s->n] = (struct x86_region){NULL, fde.end - fde.start, fde.start};
			ret = read_code(ef, s->rg, s->n, s->n + 1);
			s->n++;
			if (ret)
				return ret;
			added = true;
		}
	}
	return 0;
}

/* NAME for NAME.cold or NAME.cold.N, into buf; false if sym is no such part. */
static bool cold_parent(const char *name, char *buf, size_t len)
{
	const char *c = strstr(name, ".cold");

	if (!c || c == name || (c[5] && c[5] != '.') || (size_t)(c - name) >= len)
		return false;
	memcpy(buf, name, (size_t)(c - name));
	buf[c - name] = 0;
	return true;
}

bool shape_is_part(const struct objfile_sym *fn)
{
	char name[8];

	return cold_parent(fn->name, name, sizeof(name)) || strstr(fn->name, ".cold") != NULL;
}

/* out's regions read, and the parts nothing names added; out freed on
 * failure. */
static int shape_finish(const struct objfile *ef, struct func_shape *out)
{
	int ret = read_code(ef, out->rg, 0, out->n);

	if (!ret)
		ret = add_unnamed_parts(ef, out);
	if (ret)
		shape_free(out);
	return ret;
}

int shape_of(const struct objfile *ef, const struct objfile_sym *fn, struct func_shape *out)
{
	const struct objfile_sym *parent = NULL;
	char name[1024];

	memset(out, 0, sizeof(*out));
	/* a part split off a function is that function's */
	if (cold_parent(fn->name, name, sizeof(name)) &&
	    objfile_func_lookup(ef, name, &parent, NULL, NULL) == 0 && parent->size)
		fn = parent;
	if (!fn->size)
		return -EINVAL;
	out->entry = fn->vaddr;
	out->sym = fn;
	out->rg[out->n++] = (struct x86_region){NULL, fn->size, fn->vaddr};
	/* NAME.cold and NAME.cold.N: the symbols are sorted by name */
	if ((size_t)snprintf(name, sizeof(name), "%s.cold", fn->name) < sizeof(name)) {
		size_t lo = 0, hi = ef->nsyms, len = strlen(name);

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (strcmp(ef->syms[mid].name, name) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < ef->nsyms && out->n < SHAPE_MAX_REGIONS &&
		       !strncmp(ef->syms[lo].name, name, len); lo++) {
			const struct objfile_sym *c = &ef->syms[lo];

			if ((c->name[len] == 0 || c->name[len] == '.') && c->size)
				out->rg[out->n++] = (struct x86_region){NULL, c->size, c->vaddr};
		}
	}
	return shape_finish(ef, out);
}

/* The function starting at an FDE's start (one that starts as functions
 * do), with its parts. */
static int shape_of_fde(const struct objfile *ef, const struct objfile_fde *fde,
			struct func_shape *out)
{
	const struct objfile_sym *fn = objfile_func_at(ef, fde->start);

	if (fn && fn->size && fn->vaddr == fde->start)
		return shape_of(ef, fn, out);
	memset(out, 0, sizeof(*out));
	out->entry = fde->start;
	out->rg[out->n++] = (struct x86_region){NULL, fde->end - fde->start, fde->start};
	return shape_finish(ef, out);
}

static bool covers(const struct func_shape *s, uint64_t vaddr)
{
	for (size_t i = 0; i < s->n; i++)
		if (vaddr >= s->rg[i].addr && vaddr - s->rg[i].addr < s->rg[i].len)
			return true;
	return false;
}

/* A part split off a function that nothing names (a stripped file's cold
 * code, where GCC puts the unlikely branches, USDT sites among them): its
 * function is the one its jumps go back into, if that function's shape
 * holds the part. */
static int parent_of_part(const struct objfile *ef, const struct objfile_fde *part, uint64_t vaddr,
			  struct func_shape *out)
{
	struct x86_region rg = {NULL, part->end - part->start, part->start};
	uint64_t t[64];
	ssize_t nt;
	int ret = read_code(ef, &rg, 0, 1);

	if (ret) {
		free((void *)rg.code);
		return ret;
	}
	nt = x86_branches_out(&rg, 1, t, 64);
	free((void *)rg.code);
	for (ssize_t i = 0; i < nt; i++) {
		struct objfile_fde pf;

		if (objfile_fde_at(ef, t[i], &pf) || pf.mid || pf.start == part->start)
			continue;
		ret = shape_of_fde(ef, &pf, out);
		if (ret == -ENOMEM)
			return ret;
		if (!ret && covers(out, vaddr))
			return 0;
		if (!ret)
			shape_free(out);
	}
	memset(out, 0, sizeof(*out));
	return -ENOENT;
}

int shape_at(const struct objfile *ef, uint64_t vaddr, struct func_shape *out)
{
	const struct objfile_sym *fn = objfile_func_at(ef, vaddr);
	struct objfile_fde fde;

	if (fn && fn->size)
		return shape_of(ef, fn, out);
	memset(out, 0, sizeof(*out));
	if (objfile_fde_at(ef, vaddr, &fde))
		return -ENOENT;
	if (fde.mid)
		return parent_of_part(ef, &fde, vaddr, out);
	return shape_of_fde(ef, &fde, out);
}

void shape_free(struct func_shape *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free((void *)s->rg[i].code);
		s->rg[i].code = NULL;
	}
	s->n = 0;
}

/* ---- the reader: jump tables and filler ----------------------------------- */

static int read_ro(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	const struct objfile *ef = ctx;

	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct objfile_seg *s = &ef->segs[i];

		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz) {
			if (s->flags & PF_W || len > s->filesz - (vaddr - s->vaddr))
				return -EACCES;
			return objfile_read(ef, vaddr, buf, len);
		}
	}
	return -ENOENT;
}

/* Filler after a function (or a cold part) ending at `end`: bytes no code
 * runs and nothing branches to (compilers pad with NOPs or int3 to align
 * the next function; x86_reader's users also check that they decode as
 * such). It stops at the first of: the next function symbol, the next FDE
 * (a function or cold part a stripped file has no symbol for), the next
 * 16-byte boundary (where GCC and Clang align functions) and the end of
 * the executable section holding `end` (none outside one). None when
 * `end` is the end of (or inside) more than one function. */
static size_t filler(void *ctx, uint64_t end)
{
	const struct objfile *ef = ctx;
	uint64_t next = (end + 15) & ~(uint64_t)15, sec, send, owner = 0;
	struct objfile_fde fde;

	if (objfile_exec_section_at(ef, end, &sec, &send))
		return 0;
	if (next > send)
		next = send;
	for (uint64_t b = end; b < next; b++)
		if (objfile_fde_at(ef, b, &fde) == 0) {
			next = b;
			break;
		}
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *f = &ef->syms[i];

		if (f->vaddr >= end && f->vaddr < next)
			next = f->vaddr;
		/* the filler is one function's alone: x86_plan_return shares it out
		 * among that function's returns only. Not when functions of
		 * different starts end there, or one runs over `end` (a symbol
		 * nested in another, glibc's assembly has some) */
		if (f->vaddr < end && f->vaddr + f->size >= end) {
			if (owner && f->vaddr != owner)
				return 0;
			owner = f->vaddr;
		}
	}
	return (size_t)(next - end);
}

struct x86_reader shape_reader(const struct objfile *ef)
{
	return (struct x86_reader){read_ro, (void *)ef, filler};
}

/* ---- what the function does --------------------------------------------- */

ssize_t shape_returns(const struct objfile *ef, const struct func_shape *s,
		      struct x86_ret_site **out, const char **why)
{
	struct x86_reader rd = shape_reader(ef);

	return x86_return_sites(s->rg, s->n, &rd, out, why);
}

int shape_plan_probe(const struct objfile *ef, const struct func_shape *s, uint64_t vaddr,
		     struct x86_patch *out, const char **why)
{
	struct x86_reader rd = shape_reader(ef);

	return x86_plan_probe(s->rg, s->n, &rd, vaddr, out, why);
}

int shape_branch_target(const struct objfile *ef, const struct func_shape *s, uint64_t vaddr)
{
	struct x86_reader rd = shape_reader(ef);

	return x86_branch_target(s->rg, s->n, &rd, vaddr);
}

int shape_plan_return(const struct objfile *ef, const struct func_shape *s, uint64_t ret_addr,
		      struct x86_patch *out, const char **why)
{
	struct x86_reader rd = shape_reader(ef);

	return x86_plan_return(s->rg, s->n, &rd, ret_addr, out, why);
}

int shape_patchable(const struct objfile *ef, const struct objfile_sym *fn,
		    struct x86_patchability *out)
{
	struct x86_reader rd = shape_reader(ef);
	struct func_shape s;
	int ret = shape_of(ef, fn, &s);

	if (ret)
		return ret;
	ret = x86_func_patchable(s.rg, s.n, &rd, out);
	shape_free(&s);
	return ret;
}
