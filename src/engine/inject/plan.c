/* The inject engine's plans: where each site's patch goes, decided once
 * from the file (the function's shape, resolve/shape.h), and how the sites
 * of one image become patches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/proc.h"
#include "engine/inject/inject_int.h"
#include "cache/cache.h"
#include "resolve/shape.h"
#include "x86/insn.h"

/* The undo of an entry's first instruction at code (len bytes): a push of a
 * register, or a sub of an immediate from rsp, undone by a lea of rsp (the
 * flags are dead at a function's entry). 0: it is none of those. */
static int pre_undo(const uint8_t *code, uint32_t len, struct inj_pre *pre)
{
	static const uint8_t lea8[] = {0x48, 0x8d, 0x64, 0x24}, lea32[] = {0x48, 0x8d, 0xa4, 0x24};
	int32_t n;

	if ((len == 1 && code[0] >= 0x50 && code[0] <= 0x57) ||
	    (len == 2 && code[0] == 0x41 && code[1] >= 0x50 && code[1] <= 0x57)) {
		memcpy(pre->undo, lea8, 4);
		pre->undo[4] = 8;		/* lea 8(%rsp),%rsp */
		pre->undo_len = 5;
	} else if (len == 4 && code[0] == 0x48 && code[1] == 0x83 && code[2] == 0xec) {
		memcpy(pre->undo, lea8, 4);
		pre->undo[4] = code[3];		/* lea imm8(%rsp),%rsp */
		pre->undo_len = 5;
	} else if (len == 7 && code[0] == 0x48 && code[1] == 0x81 && code[2] == 0xec) {
		memcpy(&n, code + 3, 4);
		memcpy(pre->undo, lea32, 4);
		memcpy(pre->undo + 4, &n, 4);	/* lea imm32(%rsp),%rsp */
		pre->undo_len = 8;
	} else {
		return 0;
	}
	pre->redo = true;
	return 1;
}

/* What a site's probes read of the state where they fire: bytes of each
 * general register (by its encoding, as struct x86_effects has them),
 * memory, or everything (a stack walk, Python, a script: what the agent
 * reads is not in the fetch programs alone). */
struct site_reads {
	uint8_t reg[16];
	bool mem, all;
};

/* enum usc_reg -> the register's encoding */
static const uint8_t reg_enc[USC_REG_NR] = {
	[USC_REG_AX] = 0, [USC_REG_CX] = 1, [USC_REG_DX] = 2, [USC_REG_BX] = 3,
	[USC_REG_SP] = 4, [USC_REG_BP] = 5, [USC_REG_SI] = 6, [USC_REG_DI] = 7,
	[USC_REG_R8] = 8, [USC_REG_R9] = 9, [USC_REG_R10] = 10, [USC_REG_R11] = 11,
	[USC_REG_R12] = 12, [USC_REG_R13] = 13, [USC_REG_R14] = 14, [USC_REG_R15] = 15,
	[USC_REG_IP] = 16,	/* (the site's address: never the register) */
};

static void read_reg(struct site_reads *r, unsigned reg, uint8_t bytes)
{
	if (reg >= USC_REG_NR)
		r->all = true;
	else if (reg_enc[reg] < 16)
		r->reg[reg_enc[reg]] |= bytes;
}

/* One fetch program's reads (probe/fetch.h's shape: a load, dereferences,
 * a store). */
static void fetch_reads(const struct usc_fetcharg *a, struct site_reads *r)
{
	const struct fetch_insn *in = a->insn;

	if (!a->ninsn)
		return;
	switch (in[0].op) {
	case FOP_REG:
		/* a value stored as it is reads its low bytes; anything else
		 * (an address, a bit field) the whole register */
		read_reg(r, in[0].reg, a->ninsn >= 2 && in[1].op == FOP_ST_RAW && in[1].size &&
					       in[1].size < 8 && (a->ninsn == 2 || in[2].op == FOP_END) ?
					       (uint8_t)((1u << in[1].size) - 1) : 0xff);
		break;
	case FOP_STACK: case FOP_STACKP:
		read_reg(r, USC_REG_SP, 0xff);
		r->mem = true;
		break;
	case FOP_RETVAL:
		read_reg(r, USC_REG_AX, 0xff);
		read_reg(r, USC_REG_DX, 0xff);
		break;
	case FOP_GOID:
		read_reg(r, USC_REG_R14, 0xff);
		r->mem = true;
		break;
	case FOP_COMM: case FOP_IMM: case FOP_MEM: case FOP_FOFFS: case FOP_VADDR:
	case FOP_PID: case FOP_TID: case FOP_CPU:
		break;
	default:	/* stacks, Python's, unbound variables */
		r->all = true;
		break;
	}
	for (unsigned k = 1; k < a->ninsn && in[k].op != FOP_END; k++) {
		if (in[k].op == FOP_ADD_REG)
			read_reg(r, in[k].reg, 0xff);
		else if (in[k].op == FOP_DEREF || in[k].op == FOP_ST_MEM ||
			 in[k].op == FOP_ST_STRING || in[k].op == FOP_ST_BYTES)
			r->mem = true;
	}
}

static void site_reads(const struct usc_site *site, struct site_reads *r)
{
	static const uint8_t obj_regs[6] = {USC_REG_DI, USC_REG_SI, USC_REG_DX,
					    USC_REG_CX, USC_REG_R8, USC_REG_R9};

	memset(r, 0, sizeof(*r));
	r->all = site->python || site->py_hook || site->py_final || site->script >= 0;
	for (unsigned i = 0; i < site->nargs; i++)
		fetch_reads(&site->args[i], r);
	if (site->spec->obj_role != USC_OBJ_NONE)
		for (unsigned i = 0; i < 6; i++)
			if (site->obj_regs >> i & 1)
				read_reg(r, obj_regs[i], 0xff);
}

/* Can the instruction at the patch's start (e) run in place before the
 * patch, the site's probes firing after it as if before it? When it changes
 * nothing they read. */
static bool pre_in_place(const struct x86_effects *e, const struct site_reads *r)
{
	bool changes = false;

	if (!e->in_place || (e->writes_mem && (r->mem || r->all)))
		return false;
	for (int i = 0; i < 16; i++) {
		changes |= e->changed[i] != 0;
		if (e->changed[i] & r->reg[i])
			return false;
	}
	return !(changes && r->all);
}

/* A patch at a site's instruction (an entry, an offset, a USDT site) goes
 * after that instruction where it can, so that another tool's kernel uprobe
 * on the site (bpftrace, perf, which put theirs at a function's entry) runs
 * it out of line and lands on our jump, not inside it (foreign.c):
 *  - a push or a sub from rsp first in a function (shorter than the jump):
 *    the trampoline undoes it before the probes, which see the state at the
 *    entry, and does it again after them;
 *  - any instruction that changes nothing the site's probes read (no
 *    branch, no write of rsp; a register or memory they do not read): it
 *    runs in place, and the probes after it see what they would have seen
 *    before it. The flags it sets, live after it, are the one thing the
 *    probes would change: the trampoline runs it again after them where
 *    that is the same as running it once (test, cmp, a load or a move into
 *    a register it does not read), else the probes keep the flags.
 * The patch after it is planned there as any (no branch lands inside it;
 * a branch to the site runs the instruction, then the jump). */
static void plan_pre(const struct objfile *ef, const struct func_shape *sh,
		     const struct usc_site *site, struct x86_patch *p, struct inj_pre *pre)
{
	const struct x86_region *r = NULL;
	bool entry = site->func_vaddr && site->vaddr == site->func_vaddr;
	struct x86_effects e;
	struct site_reads rd;
	struct x86_patch at;
	const char *rule = NULL;
	size_t avail;

	memset(pre, 0, sizeof(*pre));
	for (size_t i = 0; i < sh->n && !r; i++)
		if (p->addr >= sh->rg[i].addr && p->addr < sh->rg[i].addr + sh->rg[i].len)
			r = &sh->rg[i];
	if (!r || p->spring || p->probe_off || site->ret_site || site->python)
		return;
	avail = (size_t)(r->addr + r->len - p->addr);
	if (x86_insn_effects(r->code + (p->addr - r->addr), avail, &e) ||
	    e.len > sizeof(pre->code) || e.len >= avail)
		return;
	if (!(e.len < X86_JMP_LEN && p->addr == sh->entry &&
	      pre_undo(r->code + (p->addr - r->addr), e.len, pre))) {
		site_reads(site, &rd);
		if (!pre_in_place(&e, &rd))
			return;
		/* at a function's entry the probes do not keep the flags */
		pre->redo = entry && e.writes_flags && e.rerun;
		pre->keep_flags = entry && e.writes_flags && !e.rerun;
	}
	pre->len = e.len;
	memcpy(pre->code, r->code + (p->addr - r->addr), e.len);
	/* (and no branch of the function lands after it: the probe would
	 * fire where the site did not run, a push be undone that was not
	 * done) */
	if (shape_branch_target(ef, sh, p->addr + e.len) ||
	    shape_plan_probe(ef, sh, p->addr + e.len, &at, &rule) || at.spring ||
	    at.probe_off || at.addr != p->addr + e.len) {
		log_debug("inject: %s: the patch stays over its first instruction (after it: %s)",
			  site->label, rule ? rule : "a branch lands there, or a springboard");
		memset(pre, 0, sizeof(*pre));
		return;
	}
	*p = at;
}

/* -p: is another tool's kernel uprobe on the patch in the process now (its
 * int3 over the file's bytes there)? Its address, or 0. The process's maps
 * read once. */
static uint64_t foreign_uprobe(struct inj *j, const struct objfile *ef, const char *path,
			       const struct x86_patch *p)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	uint8_t file[32], now[32];
	uint64_t off, rt;
	struct remote rem;
	int got;

	if (s->target->kind != USC_TARGET_PID || p->len > sizeof(file))
		return 0;
	if (!j->plan_maps && !j->plan_nomaps) {
		ssize_t n = procmaps_read(s->target->pid, &j->plan_maps);

		j->plan_nmaps = n > 0 ? (size_t)n : 0;
		j->plan_nomaps = n <= 0;
	}
	if (!j->plan_nmaps || objfile_vaddr_to_offset(ef, p->addr, &off) ||
	    procmaps_file_offset_to_addr(j->plan_maps, j->plan_nmaps, path, off, &rt) ||
	    objfile_read(ef, p->addr, file, p->len) || remote_open(&rem, s->target->pid))
		return 0;
	got = remote_read(&rem, rt, now, p->len);
	remote_forget(&rem);
	return !got && inj_bytes_over(now, file, p->len) == 1 ? rt : 0;
}

int inj_plan_site(struct inj *j, const struct usc_site *site, char *why, size_t len)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	struct x86_patch *p = &j->plans[site - s->sites];
	const char *rule = NULL;
	struct objfile *ef;
	struct func_shape sh;
	int ret;

	if (site->python) {
		/* no patch: the agent's profile function fires it */
		if (strlen(site->spec->module) >= INJ_PY_PAT ||
		    strlen(site->spec->symbol) >= INJ_PY_PAT) {
			snprintf(why, len, "a py: probe's globs take %d bytes at most",
				 INJ_PY_PAT - 1);
			return -ENOTSUP;
		}
		return site->nargs > INJ_MAX_ARGS ? -ENOTSUP : 0;
	}
	if (site->is_return && !site->ret_site) {
		snprintf(why, len, "the inject engine probes returns on their return sites only "
			 "(--uretprobe needs -e tracefs)");
		return -ENOTSUP;
	}
	if (site->nargs > INJ_MAX_ARGS) {
		snprintf(why, len, "more than %d fetch arguments", INJ_MAX_ARGS);
		return -ENOTSUP;
	}
	ret = cache_elf(s->cache, site->path, &ef);
	if (ret) {
		snprintf(why, len, "cannot read %s: %s", site->path, strerror(-ret));
		return -ENOTSUP;
	}
	ret = shape_at(ef, site->vaddr, &sh);
	if (ret == -ENOENT || ret == -EINVAL) {
		snprintf(why, len, "no known function bounds around it to check the patch "
			 "against (no symbol with a size, no call-frame entry)");
		return -ENOTSUP;
	}
	if (ret) {
		snprintf(why, len, "cannot read the code around it: %s", strerror(-ret));
		return -ENOTSUP;
	}
	ret = site->ret_site ? shape_plan_return(ef, &sh, site->vaddr, p, &rule) :
			       shape_plan_probe(ef, &sh, site->vaddr, p, &rule);
	if (!ret)
		plan_pre(ef, &sh, site, p, &j->pre[site - s->sites]);
	shape_free(&sh);
	if (!ret) {
		uint64_t at = foreign_uprobe(j, ef, site->path, p);

		if (at) {
			snprintf(why, len, "another tool's uprobe is on it in process %d (a "
				 "breakpoint at 0x%llx: bpftrace, perf, a kernel engine): a patch there "
				 "would break the process when that uprobe goes; a kernel engine shares it",
				 (int)s->target->pid, (unsigned long long)at);
			return -ENOTSUP;
		}
	}
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		snprintf(why, len, "%s", rule ? rule : strerror(-ret));
		return -ENOTSUP;
	}
	return 0;
}

/* What about a running process rules the engine out: a seccomp filter
 * (the system calls run in it could kill it), a shadow stack (a relocated
 * call pushes its return address by hand). A process in another PID
 * namespace is traced: the agent works with its inner ids, which the
 * tracer makes the host's (ns/ns.h). */
int inj_proc_refusal(pid_t pid, char *why, size_t len)
{
	struct proc_status st;

	if (proc_status_read(pid, &st))
		return 0;	/* gone: said elsewhere */
	if (st.seccomp) {
		snprintf(why, len, "process %d runs under seccomp, which could kill it for the "
			 "system calls the inject engine makes in it; -e tracefs or -e bpf can "
			 "trace it", (int)pid);
		return -ENOTSUP;
	}
	if (st.shstk) {
		snprintf(why, len, "process %d has a shadow stack, which the inject engine's "
			 "relocated calls would break; -e tracefs or -e bpf can trace it",
			 (int)pid);
		return -ENOTSUP;
	}
	return 0;
}

static int cmp_patch(const void *a, const void *b)
{
	const struct inj_patch *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Whether site x (at probe offset xo) fires after site y (at yo) in one
 * patch: by offset; at one offset, a cont site (the tail calls whose
 * callee returns there) after the others, so the callee's own return is
 * delivered before its tail-calling callers'. */
static bool fires_after(const struct usc_engine *e, size_t x, uint32_t xo, size_t y, uint32_t yo)
{
	if (xo != yo)
		return xo > yo;
	return e->sites[x]->cont && !e->sites[y]->cont;
}

static void patch_free(struct inj_patch *p)
{
	free(p->sites);
	free(p->probe_off);
	p->sites = NULL;
	p->probe_off = NULL;
}

/* A patch after the entry's first instruction (struct inj_pre) that
 * overlaps another: over that instruction too, as an entry patch is
 * without it (no branch lands inside either: plan_pre checked both). */
static void pre_drop(struct inj_image *img)
{
	for (size_t p = 0; p < img->npatches; p++) {
		struct inj_patch *a = &img->patches[p];
		uint64_t lo = a->addr - a->pre.len, hi = a->addr + a->plan.len;
		bool over = false;

		if (!a->pre.len)
			continue;
		for (size_t q = 0; q < img->npatches && !over; q++)
			over = q != p && img->patches[q].addr < hi &&
			       img->patches[q].addr + img->patches[q].plan.len > lo;
		if (!over)
			continue;
		a->addr = lo;
		a->plan.addr -= a->pre.len;
		a->plan.len += a->pre.len;
		memset(&a->pre, 0, sizeof(a->pre));	/* (its probes, at the entry: at 0) */
	}
}

/* Overlapping patches become one over their union: an entry probe and a
 * return site of a short function, say. Each was checked safe (no branch
 * into its interior); overlapping, their interiors cover the union's. */
static int merge_overlaps(struct inj *j, struct inj_image *img)
{
	size_t out = 0;

	pre_drop(img);
	qsort(img->patches, img->npatches, sizeof(*img->patches), cmp_patch);
	for (size_t p = 0; p < img->npatches; p++) {
		struct inj_patch *a = out ? &img->patches[out - 1] : NULL, *b = &img->patches[p];

		if (!a || a->addr + a->plan.len <= b->addr ||
		    (a->bias != b->bias && !a->plan.spring && !b->plan.spring)) {
			img->patches[out++] = *b;
			continue;
		}
		uint64_t end = b->addr + b->plan.len > a->addr + a->plan.len ?
				       b->addr + b->plan.len : a->addr + a->plan.len;
		size_t n = a->nsites + b->nsites, k = 0, x = 0, y = 0;
		size_t *ns = malloc(n * sizeof(*ns));
		uint32_t *no = malloc(n * sizeof(*no)), shift = (uint32_t)(b->addr - a->addr);

		if (!ns || !no || end - a->addr > sizeof(a->orig) || a->plan.spring ||
		    b->plan.spring || a->bias != b->bias) {
			free(ns);
			free(no);
			log_error("%s and %s: their patches overlap (0x%llx and 0x%llx); probe one "
				  "of them with -e tracefs", j->base.sites[a->sites[0]]->label,
				  j->base.sites[b->sites[0]]->label, (unsigned long long)a->addr,
				  (unsigned long long)b->addr);
			for (size_t q = p; q < img->npatches; q++)
				patch_free(&img->patches[q]);
			img->npatches = out;
			return -ENOTSUP;
		}
		while (x < a->nsites || y < b->nsites) {	/* merge by offset */
			if (y == b->nsites ||
			    (x < a->nsites && !fires_after(&j->base, a->sites[x], a->probe_off[x],
							   b->sites[y], b->probe_off[y] + shift))) {
				ns[k] = a->sites[x];
				no[k++] = a->probe_off[x++];
			} else {
				ns[k] = b->sites[y];
				no[k++] = b->probe_off[y++] + shift;
			}
		}
		patch_free(a);
		patch_free(b);
		a->sites = ns;
		a->probe_off = no;
		a->nsites = n;
		a->plan.len = (uint32_t)(end - a->addr);
	}
	img->npatches = out;
	return 0;
}

int inj_patches(struct inj *j, struct inj_image *img, const struct proc_map *maps,
		size_t nmaps)
{
	struct usc_engine *e = &j->base;
	const struct usc_engine_ctx *s = e->ctx;

	img->patches = calloc(e->nsites + 1, sizeof(*img->patches));
	if (!img->patches)
		return -ENOMEM;
	for (size_t i = 0; i < e->nsites; i++) {
		const struct usc_site *site = e->sites[i];
		struct x86_patch plan = j->plans[site - s->sites];
		struct inj_patch *pa;
		uint64_t rt, bias;
		size_t p, k;

		if (procmaps_file_offset_to_addr(maps, nmaps, site->path, site->offset, &rt))
			continue;	/* not in this image (a library it does not map) */
		bias = rt - site->vaddr;
		for (p = 0; p < img->npatches; p++)
			if (img->patches[p].addr == plan.addr + bias &&
			    img->patches[p].plan.len == plan.len &&
			    img->patches[p].plan.spring == plan.spring &&
			    !memcmp(&img->patches[p].pre, &j->pre[site - s->sites],
				    sizeof(struct inj_pre)))
				break;
		if (p == img->npatches) {
			pa = &img->patches[img->npatches++];
			pa->addr = plan.addr + bias;
			pa->plan = plan;
			pa->bias = bias;
			pa->spring = plan.spring ? plan.spring + bias : 0;
			pa->pre = j->pre[site - s->sites];
		}
		pa = &img->patches[p];
		size_t *ns = realloc(pa->sites, (pa->nsites + 1) * sizeof(*ns));
		uint32_t *no = ns ? realloc(pa->probe_off, (pa->nsites + 1) * sizeof(*no)) : NULL;

		if (ns)
			pa->sites = ns;
		if (no)
			pa->probe_off = no;
		if (!ns || !no)
			return -ENOMEM;
		/* keep them ordered by where they fire (stable for equal offsets),
		 * and at one ret the function's own return before the tail calls
		 * that end with it (a cont site): the innermost call returns first */
		for (k = pa->nsites; k > 0 && fires_after(e, pa->sites[k - 1], pa->probe_off[k - 1],
							  i, plan.probe_off); k--) {
			pa->sites[k] = pa->sites[k - 1];
			pa->probe_off[k] = pa->probe_off[k - 1];
		}
		pa->sites[k] = i;
		pa->probe_off[k] = plan.probe_off;
		pa->nsites++;
	}
	return merge_overlaps(j, img);
}
