/* x86-64 patch planning: see plan.h. Every patch is checked against the
 * whole function's analysis (analyze.c): no branch may land inside the
 * displaced bytes, and each of them must be relocatable (reloc.c). */
#include "x86/plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "x86/x86_int.h"

/* The checks every patch passes: no unknown jump table, no branch into
 * (addr, addr+len), and its instructions relocatable. */
static int an_check(const struct func_an *a, uint64_t addr, size_t len, const uint8_t *code,
		    struct refusal *rf)
{
	const struct an_target *t;
	const struct x86_region *r;
	uint8_t *scratch;
	ssize_t n;

	if (a->unknown) {
		*rf = a->unknown_rf;
		return a->unknown;
	}
	t = an_target_inside(a, addr, addr + len);
	if (t)
		return x86_refuse(rf, -ENOTSUP, X86_R_TARGET, " (0x%" PRIx64 " jumps to 0x%" PRIx64 ")",
			      t->from, t->to);
	r = &a->rg[a->in[an_find(a, addr)].region];
	scratch = malloc(X86_RELOC_MAX(len));
	if (!scratch)
		return -ENOMEM;
	/* relocated to where they are: only the allow-list and call rules can fail */
	n = x86_relocate_rf(code ? code : r->code + (addr - r->addr), len, addr, addr, scratch,
		     X86_RELOC_MAX(len), rf);
	free(scratch);
	return n < 0 ? (int)n : 0;
}

static size_t an_filler(const struct func_an *a, const struct x86_reader *rd, size_t k,
			size_t i, uint8_t *buf, size_t cap, size_t *beyond);

static int an_plan_probe(const struct func_an *a, const struct x86_reader *rd, uint64_t addr,
			 struct x86_patch *out, struct refusal *rf)
{
	ssize_t i = an_find(a, addr);
	size_t len = 0, k, beyond, took;
	const struct x86_region *r;
	uint8_t reg, buf[64];

	if (i < 0)
		return x86_refuse(rf, -EINVAL, X86_R_BOUNDARY, ": 0x%" PRIx64, addr);
	reg = a->in[i].region;
	r = &a->rg[reg];
	/* endbr64 at the entry stays, for indirect branches */
	if (addr == a->rg[0].addr && a->in[i].len == 4 &&
	    !memcmp(r->code + (addr - r->addr), "\xf3\x0f\x1e\xfa", 4)) {
		addr += 4;
		i++;
	}
	for (k = (size_t)i; len < X86_JMP_LEN && k < a->nin && a->in[k].region == reg; k++)
		len += a->in[k].len;
	/* short of the region's end, after its last ret or jmp (a USDT site's
	 * `nop; ret`): the filler after it, which nothing runs, may complete
	 * the patch, as for a return site */
	if (len < X86_JMP_LEN && k > (size_t)i &&
	    (a->in[k - 1].kind == K_RET || a->in[k - 1].kind == K_JMP ||
	     a->in[k - 1].kind == K_IJMP) &&
	    (took = an_filler(a, rd, (size_t)i, k - 1, buf, sizeof(buf), &beyond)) > 0) {
		len += took;
		*out = (struct x86_patch){addr, (uint32_t)len, 0, 0};
		return an_check(a, addr, len, buf, rf);
	}
	if (len < X86_JMP_LEN)
		return x86_refuse(rf, -ENOTSUP, X86_R_SHORT, " (%zu bytes from 0x%" PRIx64 ")", len, addr);
	*out = (struct x86_patch){addr, (uint32_t)len, 0, 0};
	return an_check(a, addr, len, NULL, rf);
}

/* Extend the patch [in[k], in[i]] (in[i] a ret or jmp) to X86_JMP_LEN bytes
 * over the NOPs after it, which nothing runs: alignment filler that no
 * branch targets, inside the region, then (at the region's end) up to the
 * next function, as rd->filler says. Returns the bytes taken (0: not
 * possible) with the code of the whole patch in buf. */
static size_t an_filler(const struct func_an *a, const struct x86_reader *rd, size_t k,
			size_t i, uint8_t *buf, size_t cap, size_t *beyond)
{
	const struct x86_region *rg = &a->rg[a->in[i].region];
	uint64_t start = a->in[k].addr, end = a->in[i].addr + a->in[i].len;
	size_t have = (size_t)(end - start), took = 0, avail;
	uint8_t pad[16];
	ZydisDecoder dec;
	ZydisDecodedInstruction in;

	*beyond = 0;
	for (size_t j = i + 1; have + took < X86_JMP_LEN; j++) {
		if (j >= a->nin || a->in[j].region != a->in[i].region)
			break;
		if (a->in[j].kind != K_NOP || an_has_target(a, a->in[j].addr))
			return 0;
		took += a->in[j].len;
	}
	if (have + took < X86_JMP_LEN) {
		uint64_t rend = rg->addr + rg->len;
		size_t more = 0;

		if (!rd || !rd->filler || !rd->read || end + took != rend || !x86_decoder_init(&dec))
			return 0;
		avail = rd->filler(rd->ctx, rend);
		if (avail > sizeof(pad))
			avail = sizeof(pad);
		if (!avail || rd->read(rd->ctx, rend, pad, avail))
			return 0;
		while (have + took + more < X86_JMP_LEN) {
			if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, pad + more,
									avail - more, &in)) ||
			    (in.meta.category != ZYDIS_CATEGORY_NOP &&
			     in.meta.category != ZYDIS_CATEGORY_WIDENOP))
				return 0;
			more += in.length;
		}
		if (have + took + more > cap)
			return 0;
		memcpy(buf + have + took, pad, more);
		memcpy(buf, rg->code + (start - rg->addr), have + took);
		*beyond = more;
		return took + more;
	}
	if (have + took > cap)
		return 0;
	memcpy(buf, rg->code + (start - rg->addr), have + took);
	return took;
}

/* The classic patch of the return site in[i]: its block, back from it. */
struct ret_geom {
	size_t k;		/* the block's first displaced instruction */
	size_t len;		/* bytes from in[k] to the end of the return */
	const char *what;	/* what ends the block short of X86_JMP_LEN; NULL: long enough */
	size_t pad;		/* filler NOPs taken after the return (an_filler); 0: none */
	size_t beyond;		/* of those, bytes after the end of the region */
	uint8_t buf[64];	/* the code of the whole patch, when pad */
};

static void an_ret_geom(const struct func_an *a, const struct x86_reader *rd, size_t i,
			struct ret_geom *g)
{
	size_t k = i, len = a->in[i].len;

	g->what = NULL;
	g->pad = g->beyond = 0;
	/* grow backwards over the ret's block: stop at a branch target (the
	 * start of the block), a call, a jmp or ret (the end of the one before) */
	while (len < X86_JMP_LEN) {
		if (an_has_target(a, a->in[k].addr))
			g->what = "a branch target";
		else if (k == 0 || a->in[k - 1].region != a->in[k].region)
			g->what = "the start of the function";
		else if (a->in[k - 1].flow == FLOW_CALL)
			g->what = "a call";
		else if (a->in[k - 1].flow == FLOW_END)
			g->what = "a jmp or ret";
		if (g->what) {
			g->pad = an_filler(a, rd, k, i, g->buf, sizeof(g->buf), &g->beyond);
			break;
		}
		k--;
		len += a->in[k].len;
	}
	g->k = k;
	g->len = len;
}

/* Does the return need a springboard: a block too short for the jmp rel32,
 * no filler to grow over, but room for a jmp rel8? */
static bool needs_spring(const struct ret_geom *g)
{
	return g->what && !g->pad && g->len >= X86_JMP8_LEN;
}

/* How many bytes after rend, up to rd->filler's bound, are whole padding
 * instructions (NOPs of any length, int3): at most cap, read into buf. */
static size_t an_padding(const struct x86_reader *rd, uint64_t rend, uint8_t *buf, size_t cap)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	size_t avail, n = 0;

	if (!rd || !rd->filler || !rd->read || !x86_decoder_init(&dec))
		return 0;
	avail = rd->filler(rd->ctx, rend);
	if (avail > cap)
		avail = cap;
	if (!avail || rd->read(rd->ctx, rend, buf, avail))
		return 0;
	while (n < avail &&
	       ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, buf + n, avail - n, &in)) &&
	       (in.meta.category == ZYDIS_CATEGORY_NOP ||
		in.meta.category == ZYDIS_CATEGORY_WIDENOP || in.mnemonic == ZYDIS_MNEMONIC_INT3))
		n += in.length;
	return n;
}


/* The springboard slot of the return site in[i], whose 2-byte jmp rel8 is
 * at `from`.
 *
 * Where: the filler after the end of the region holding the return, which
 * is dead: it follows the function's (or its cold part's) last byte, so no
 * instruction of the function runs into it; nothing branches to it (no
 * compiler targets alignment padding, and the function's own branch targets
 * are checked below); and it ends before the next symbol, which another
 * function's patches may use, as rd->filler bounds it (for an ELF file,
 * patchable_reader's: the next function symbol, the next FDE, the next
 * 16-byte boundary and the end of .text, whichever comes first). Only the
 * whole NOP and int3 instructions at its start count (an_padding): code is
 * never taken for filler. A function never uses the filler before it: that
 * is the previous function's.
 *
 * Which: a function's slots must never overlap, yet x86_plan_return sees
 * one site at a time. So the assignment depends on the function alone: the
 * filler bytes a classic patch of the region's last return grows over
 * (an_filler) come first and are skipped; then the k-th return site of the
 * region (in address order) that needs a springboard gets the k-th 5-byte
 * slot, nearest first. A site whose slot is not in the filler, or out of
 * the jmp rel8's reach, is refused; the others keep theirs. */
static int an_spring_slot(const struct func_an *a, const struct x86_reader *rd, size_t i,
			  const struct ret_geom *rg_i, uint64_t from, uint64_t *slot,
			  struct refusal *rf)
{
	uint8_t r = a->in[i].region, pad[256];
	const struct x86_region *rg = &a->rg[r];
	uint64_t rend = rg->addr + rg->len, at;
	size_t nth = 0, skip = 0, usable;
	const struct an_target *t;
	struct ret_geom g;
	int64_t rel;

	for (size_t j = 0; j < a->nin; j++) {
		if (a->in[j].region != r || !an_is_ret_site(a, j))
			continue;
		an_ret_geom(a, rd, j, &g);
		if (g.beyond > skip)
			skip = g.beyond;
		if (j < i && needs_spring(&g))
			nth++;
	}
	usable = an_padding(rd, rend, pad, sizeof(pad));
	at = rend + skip + X86_JMP_LEN * nth;
	if (at + X86_JMP_LEN > rend + usable)
		return x86_refuse(rf, -ENOTSUP, X86_R_NOSLOT, " (%zu bytes to the return at 0x%" PRIx64
			      ", after %s; slot %zu of %zu filler bytes after 0x%" PRIx64 ", %zu "
			      "taken)", rg_i->len, a->in[i].addr, rg_i->what, nth, usable, rend,
			      skip);
	rel = (int64_t)(at - (from + X86_JMP8_LEN));
	if (rel < INT8_MIN || rel > INT8_MAX)
		return x86_refuse(rf, -ENOTSUP, X86_R_NOSLOT, " (beyond a jmp rel8: slot 0x%" PRIx64
			      " for the return at 0x%" PRIx64 ", after %s)", at, a->in[i].addr,
			      rg_i->what);
	t = an_target_inside(a, at - 1, at + X86_JMP_LEN);
	if (t)
		return x86_refuse(rf, -ENOTSUP, X86_R_NOSLOT, " (0x%" PRIx64 " jumps into the filler at "
			      "0x%" PRIx64 ")", t->from, t->to);
	*slot = at;
	return 0;
}

static int an_plan_return(const struct func_an *a, const struct x86_reader *rd,
			  uint64_t ret_addr, struct x86_patch *out, struct refusal *rf)
{
	ssize_t i = an_find(a, ret_addr);
	struct ret_geom g;
	size_t k, len;
	uint64_t slot = 0;
	int ret;

	if (i < 0)
		return x86_refuse(rf, -EINVAL, X86_R_BOUNDARY, ": 0x%" PRIx64, ret_addr);
	an_ret_geom(a, rd, (size_t)i, &g);
	if (!g.what || g.pad) {
		len = g.len + g.pad;
		*out = (struct x86_patch){a->in[g.k].addr, (uint32_t)len,
					  (uint32_t)(ret_addr - a->in[g.k].addr), 0};
		return an_check(a, out->addr, len, g.pad ? g.buf : NULL, rf);
	}
	if (!needs_spring(&g)) {
		const struct an_target *t = an_target_inside(a, ret_addr - 1, ret_addr + 1);

		if (t && g.k == (size_t)i)
			return x86_refuse(rf, -ENOTSUP, X86_R_TARGET, " (0x%" PRIx64 " jumps to the "
				      "return at 0x%" PRIx64 ")", t->from, t->to);
		return x86_refuse(rf, -ENOTSUP, X86_R_RSHORT, " (%zu bytes from 0x%" PRIx64 " to the "
			      "return at 0x%" PRIx64 ", after %s)", g.len, a->in[g.k].addr,
			      ret_addr, g.what);
	}
	/* a springboard: as few instructions of the block as make a jmp rel8 */
	k = (size_t)i;
	len = a->in[k].len;
	while (len < X86_JMP8_LEN) {
		k--;
		len += a->in[k].len;
	}
	ret = an_spring_slot(a, rd, (size_t)i, &g, a->in[k].addr, &slot, rf);
	if (ret)
		return ret;
	*out = (struct x86_patch){a->in[k].addr, (uint32_t)len,
				  (uint32_t)(ret_addr - a->in[k].addr), slot};
	return an_check(a, out->addr, len, NULL, rf);
}

/* What a public call does on the function's analysis. */
enum an_job { JOB_RET_SITES, JOB_PROBE, JOB_RETURN };

/* What x86_return_sites, x86_plan_probe and x86_plan_return share: the
 * function's analysis, job on it (at addr; out: the caller's struct
 * x86_ret_site ** for JOB_RET_SITES, else its struct x86_patch), and the
 * refusal's words in *why (valid until this thread's next call). */
static ssize_t analyzed(const struct x86_region *regions, size_t nregions,
			const struct x86_reader *rd, enum an_job job, uint64_t addr, void *out,
			const char **why)
{
	static __thread struct refusal rf;
	struct func_an a;
	ssize_t ret;

	rf.rule = NULL;
	ret = an_build(&a, regions, nregions, rd, &rf);
	if (!ret) {
		ret = job == JOB_RET_SITES ? an_return_sites(&a, out, &rf) :
		      job == JOB_RETURN    ? an_plan_return(&a, rd, addr, out, &rf) :
					     an_plan_probe(&a, rd, addr, out, &rf);
		an_free(&a);
	}
	*why = rf.rule ? rf.why : NULL;
	return ret;
}

ssize_t x86_return_sites(const struct x86_region *regions, size_t nregions,
			 const struct x86_reader *rd, struct x86_ret_site **out,
			 const char **why)
{
	*out = NULL;
	return analyzed(regions, nregions, rd, JOB_RET_SITES, 0, out, why);
}

int x86_plan_probe(const struct x86_region *regions, size_t nregions,
		   const struct x86_reader *rd, uint64_t addr,
		   struct x86_patch *out, const char **why)
{
	return (int)analyzed(regions, nregions, rd, JOB_PROBE, addr, out, why);
}

int x86_plan_return(const struct x86_region *regions, size_t nregions,
		    const struct x86_reader *rd, uint64_t ret_addr,
		    struct x86_patch *out, const char **why)
{
	return (int)analyzed(regions, nregions, rd, JOB_RETURN, ret_addr, out, why);
}

int x86_branch_target(const struct x86_region *regions, size_t nregions,
		      const struct x86_reader *rd, uint64_t addr)
{
	struct refusal rf = {0};
	struct func_an a;
	int ret = an_build(&a, regions, nregions, rd, &rf);

	if (ret)
		return ret == -ENOMEM ? ret : 1;
	ret = a.unknown || an_has_target(&a, addr);
	an_free(&a);
	return ret;
}

static void set_result(int *res, const char **rule, char *why, size_t wsize, int ret,
		       const struct refusal *rf)
{
	*res = ret;
	*rule = ret ? (rf->rule ? rf->rule : "out of memory") : NULL;
	snprintf(why, wsize, "%s", ret ? (rf->rule ? rf->why : "out of memory") : "ok");
}

int x86_func_patchable(const struct x86_region *regions, size_t nregions,
		       const struct x86_reader *rd, struct x86_patchability *out)
{
	struct func_an a;
	struct refusal rf = {0};
	struct x86_ret_site *rs = NULL;
	struct x86_patch p;
	ssize_t n;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!nregions)
		return -EINVAL;
	ret = an_build(&a, regions, nregions, rd, &rf);
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		set_result(&out->entry, &out->entry_rule, out->entry_why, sizeof(out->entry_why),
			   ret, &rf);
		set_result(&out->ret, &out->ret_rule, out->ret_why, sizeof(out->ret_why), ret, &rf);
		return 0;
	}
	ret = an_plan_probe(&a, rd, regions[0].addr, &p, &rf);
	if (ret == -ENOMEM)
		goto out;
	set_result(&out->entry, &out->entry_rule, out->entry_why, sizeof(out->entry_why), ret,
		   &rf);
	n = an_return_sites(&a, &rs, &rf);
	if (n == -ENOMEM) {
		ret = -ENOMEM;
		goto out;
	}
	if (n < 0) {
		set_result(&out->ret, &out->ret_rule, out->ret_why, sizeof(out->ret_why),
			   (int)n, &rf);
		ret = 0;
		goto out;
	}
	out->nret = (size_t)n;
	ret = 0;
	for (ssize_t k = 0; k < n && !ret; k++) {
		ret = an_plan_return(&a, rd, rs[k].addr, &p, &rf);
		out->nspring += !ret && p.spring;
	}
	set_result(&out->ret, &out->ret_rule, out->ret_why, sizeof(out->ret_why), ret, &rf);
	ret = ret == -ENOMEM ? ret : 0;
out:
	free(rs);
	an_free(&a);
	return ret;
}

