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
	pre->len = (uint8_t)len;
	memcpy(pre->code, code, len);
	return 1;
}

/* An entry patch at the function's first instruction, when that one is
 * shorter than the jump and can be undone: the patch after it instead
 * (struct inj_pre), as the planner checks it there (no branch lands
 * inside it; its first byte is inside the first patch, checked so too). */
static void plan_pre(const struct objfile *ef, const struct func_shape *sh, struct x86_patch *p,
		     struct inj_pre *pre)
{
	const struct x86_region *r = &sh->rg[0];
	uint8_t code[16];
	struct x86_patch at;
	const char *rule = NULL;
	int len;

	size_t avail;

	memset(pre, 0, sizeof(*pre));
	if (p->spring || p->probe_off || p->addr != sh->entry || p->addr < r->addr ||
	    p->addr >= r->addr + r->len)
		return;
	avail = (size_t)(r->addr + r->len - p->addr);
	avail = avail < sizeof(code) ? avail : sizeof(code);
	memcpy(code, r->code + (p->addr - r->addr), avail);
	len = x86_insn_length(code, avail);
	if (len <= 0 || len >= X86_JMP_LEN || !pre_undo(code, (uint32_t)len, pre))
		return;
	if (shape_plan_probe(ef, sh, p->addr + (uint64_t)len, &at, &rule) || at.spring ||
	    at.probe_off || at.addr != p->addr + (uint64_t)len) {
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
	if (!ret && !site->ret_site)
		plan_pre(ef, &sh, p, &j->pre[site - s->sites]);
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
