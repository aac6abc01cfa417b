/* x86-64 function analysis (Zydis 4): see analyze.h.
 *
 * A function is decoded whole, every region of it (the body and the cold
 * parts the compiler split off), and every place a branch can land is
 * kept. What it knows of branches:
 *  - direct jmp/jcc/call/loop/jrcxz/xbegin: their targets;
 *  - jump tables of the usual GCC/Clang x86-64 shapes, read through the
 *    caller's reader:
 *        lea T(%rip),%rB ; movslq (%rB,%rI,4),%rX ; add %rB,%rX ; jmp *%rX
 *    (relative int32 entries, PIC) and jmp *T(,%rI,8) (absolute entries,
 *    non-PIC); each table is read entry by entry until an entry does not
 *    point at an instruction of the function, which takes at least every
 *    entry of the table (a switch's entries all point into its function) and
 *    perhaps more: more targets only make planning stricter;
 *  - any other jump through a table (an indexed load feeding the jump): its
 *    targets are unknown and every patch of the function is refused;
 *  - any other indirect jmp (jmp *%rax with no table, jmp *8(%rdi)) is
 *    ASSUMED to be a tail call through a function pointer, which enters a
 *    function at its entry, never inside this one's body. A jump table of a
 *    shape not recognised above would break this assumption;
 *  - ASSUMED too: nothing outside the function branches into it but at its
 *    entry, and exception landing pads (from .gcc_except_table, not read)
 *    never start inside displaced bytes: a landing pad starts a block that
 *    only the unwinder enters, and is not found among the few instructions
 *    at an entry or before a ret in practice (a call, after which one could
 *    resume, may only be the last displaced instruction). */
#include "x86/analyze.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "core/grow.h"
#include "x86/x86_int.h"

/* ---- function analysis ------------------------------------------------ */

void an_free(struct func_an *a)
{
	free(a->in);
	free(a->tg);
}

/* The first of the sorted targets whose address is above v (ntg: none). */
static size_t first_after(const struct func_an *a, uint64_t v)
{
	size_t lo = 0, hi = a->ntg;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->tg[mid].to <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int an_add_target(struct func_an *a, uint64_t to, uint64_t from)
{
	if (core_reserve(a->tg, a->ctg, a->ntg + 1, 32))
		return -ENOMEM;
	if (a->sorted) {
		/* keep the order an_target_inside searches: insert in place */
		size_t lo = first_after(a, to);

		memmove(&a->tg[lo + 1], &a->tg[lo], (a->ntg - lo) * sizeof(*a->tg));
		a->tg[lo] = (struct an_target){to, from};
		a->ntg++;
		return 0;
	}
	a->tg[a->ntg++] = (struct an_target){to, from};
	return 0;
}

static int cmp_target(const void *x, const void *y)
{
	const struct an_target *p = x, *q = y;

	return p->to < q->to ? -1 : p->to > q->to;
}

/* Targets [before, ntg) were appended to a sorted list: sort them and merge
 * them in, in one pass. */
static int an_merge_tail(struct func_an *a, size_t before)
{
	size_t n = a->ntg - before, i = 0, j = before, k = 0;
	struct an_target *m;

	if (!n)
		return 0;
	qsort(a->tg + before, n, sizeof(*a->tg), cmp_target);
	m = malloc(a->ntg * sizeof(*m));
	if (!m)
		return -ENOMEM;
	while (i < before || j < a->ntg)
		m[k++] = j == a->ntg || (i < before && a->tg[i].to <= a->tg[j].to) ? a->tg[i++] :
										    a->tg[j++];
	memcpy(a->tg, m, a->ntg * sizeof(*m));
	free(m);
	return 0;
}

/* The index of the instruction at addr, or -1. */
ssize_t an_find(const struct func_an *a, uint64_t addr)
{
	size_t lo = 0, hi = a->nin;

	/* regions are each sorted; search each */
	for (size_t r = 0; r < a->nrg; r++) {
		if (addr < a->rg[r].addr || addr >= a->rg[r].addr + a->rg[r].len)
			continue;
		lo = 0;
		hi = a->nin;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			const struct an_insn *m = &a->in[mid];

			if (m->region < r || (m->region == r && m->addr < addr))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < a->nin && a->in[lo].region == r && a->in[lo].addr == addr)
			return (ssize_t)lo;
		return -1;
	}
	return -1;
}

/* A branch target t with lo < t < hi, or NULL. */
const struct an_target *an_target_inside(const struct func_an *a, uint64_t lo,
						uint64_t hi)
{
	size_t l = first_after(a, lo);

	return l < a->ntg && a->tg[l].to < hi ? &a->tg[l] : NULL;
}

bool an_has_target(const struct func_an *a, uint64_t t)
{
	return t > 0 && an_target_inside(a, t - 1, t + 1) != NULL;
}

static int an_decode(const struct func_an *a, size_t i, ZydisDecoder *dec,
		     ZydisDecodedInstruction *in, ZydisDecodedOperand *ops)
{
	const struct x86_region *r = &a->rg[a->in[i].region];
	uint64_t off = a->in[i].addr - r->addr;

	return ZYAN_SUCCESS(ZydisDecoderDecodeFull(dec, r->code + off, r->len - off, in, ops)) ?
	       0 : -ENOEXEC;
}

/* Does the instruction write (the 64-bit register enclosing) reg? */
static bool writes_reg(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
		       ZydisRegister reg)
{
	for (int k = 0; k < in->operand_count; k++)
		if (ops[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[k].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    x86_reg64(ops[k].reg.value) == reg)
			return true;
	return false;
}

/* Walking back from instruction i (exclusive), within its region and block
 * (no branch target on the way, no call or other control flow), the last
 * instruction that writes reg: its index, or -1. At most 24 instructions. */
static ssize_t an_writer(const struct func_an *a, size_t i, ZydisRegister reg, ZydisDecoder *dec,
			 ZydisDecodedInstruction *in, ZydisDecodedOperand *ops)
{
	for (size_t k = 0; k < 24 && i > 0; k++) {
		if (an_has_target(a, a->in[i].addr) || a->in[i - 1].region != a->in[i].region)
			return -1;
		i--;
		if (a->in[i].flow != FLOW_NEXT || an_decode(a, i, dec, in, ops) ||
		    in->meta.category == ZYDIS_CATEGORY_COND_BR)
			return -1;
		if (writes_reg(in, ops, reg))
			return (ssize_t)i;
	}
	return -1;
}

/* Is addr the start of an instruction of the function? */
static bool an_is_insn(const struct func_an *a, uint64_t addr)
{
	return an_find(a, addr) >= 0;
}

/* Read a jump table: entries of esize bytes (4: relative to base, 8:
 * absolute) at table, until one does not point at an instruction of the
 * function. Returns the number of entries taken (0: none). A table several
 * jumps share (an interpreter's dispatch through computed gotos) is read
 * once. */
static ssize_t an_read_table(struct func_an *a, const struct x86_reader *rd, uint64_t jmp,
			     uint64_t table, unsigned esize)
{
	ssize_t n = 0;

	size_t before = a->ntg;
	bool sorted = a->sorted;

	for (size_t k = 0; k < a->ntables; k++)
		if (a->tables[k].addr == table && a->tables[k].esize == esize)
			return a->tables[k].n;
	a->sorted = false;	/* appended, then merged in at once */
	for (; n < 4096; n++) {
		uint64_t t;

		if (esize == 4) {
			int32_t e;

			if (rd->read(rd->ctx, table + 4 * (uint64_t)n, &e, 4))
				break;
			t = table + (uint64_t)(int64_t)e;
		} else {
			if (rd->read(rd->ctx, table + 8 * (uint64_t)n, &t, 8))
				break;
		}
		if (!an_is_insn(a, t))
			break;
		if (an_add_target(a, t, jmp))
			return -ENOMEM;
	}
	a->sorted = sorted;
	if (sorted && an_merge_tail(a, before))
		return -ENOMEM;
	if (a->ntables < sizeof(a->tables) / sizeof(a->tables[0]))
		a->tables[a->ntables++] = (typeof(a->tables[0])){table, esize, n};
	return n;
}

static int tail_call(struct func_an *a, size_t i)
{
	a->in[i].tail = true;
	return 0;
}

/* An indirect jmp at instruction i: find and read its table, or mark the
 * function's targets unknown, or (no table) take it for a tail call. */
static int an_indirect(struct func_an *a, size_t i, const ZydisDecodedOperand *op,
		       const struct x86_reader *rd)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t at = a->in[i].addr, table = 0;
	unsigned esize = 0;
	ssize_t w, n;

	if (!x86_decoder_init(&dec))
		return -ENOEXEC;
	if (op->type == ZYDIS_OPERAND_TYPE_MEMORY) {
		if (op->mem.index == ZYDIS_REGISTER_NONE)
			return tail_call(a, i);	/* jmp *8(%rax), jmp *x@GOTPCREL(%rip) */
		if (op->mem.base == ZYDIS_REGISTER_NONE && op->mem.scale == 8) {
			table = (uint64_t)op->mem.disp.value;	/* jmp *T(,%rI,8) */
			esize = 8;
		}
	} else if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		ZydisRegister r = x86_reg64(op->reg.value), b, x;
		ssize_t wb, wx;

		w = an_writer(a, i, r, &dec, &in, ops);
		if (w < 0)
			return tail_call(a, i);	/* not computed here */
		if (in.mnemonic == ZYDIS_MNEMONIC_MOV && ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    ops[1].mem.index == ZYDIS_REGISTER_NONE)
			return tail_call(a, i);	/* mov 8(%rdi),%rax; jmp *%rax */
		if (in.mnemonic == ZYDIS_MNEMONIC_MOV && ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    ops[1].mem.base == ZYDIS_REGISTER_NONE && ops[1].mem.scale == 8 &&
		    ops[1].mem.index != ZYDIS_REGISTER_NONE) {
			/* mov T(,%rI,8),%rX; jmp *%rX: absolute entries (non-PIC),
			 * as an interpreter's computed gotos dispatch (CPython) */
			table = (uint64_t)ops[1].mem.disp.value;
			esize = 8;
			goto read;
		}
		if (in.mnemonic != ZYDIS_MNEMONIC_ADD || ops[1].type != ZYDIS_OPERAND_TYPE_REGISTER) {
			/* an indexed load, or anything else that computes it */
			bool idx = false;

			for (int k = 0; k < in.operand_count_visible; k++)
				idx |= ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY &&
				       ops[k].mem.index != ZYDIS_REGISTER_NONE;
			if (!idx && in.mnemonic == ZYDIS_MNEMONIC_MOV)
				return tail_call(a, i);	/* mov %rdi,%rax; jmp *%rax */
			if (in.mnemonic == ZYDIS_MNEMONIC_LEA && ops[1].mem.base == ZYDIS_REGISTER_RIP &&
			    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[1], a->in[w].addr, &table)))
				return an_is_insn(a, table) ? an_add_target(a, table, at) :
				       tail_call(a, i);	/* lea L(%rip),%rax; jmp *%rax */
			goto unknown;
		}
		/* add %rB,%rX (or %rX,%rB): one is the table, the other an entry */
		b = x86_reg64(ops[1].reg.value);
		x = r;
		wb = an_writer(a, (size_t)w, b, &dec, &in, ops);
		if (wb >= 0 && in.mnemonic == ZYDIS_MNEMONIC_MOVSXD) {
			ZydisRegister t = b;

			b = x;
			x = t;
			wb = an_writer(a, (size_t)w, b, &dec, &in, ops);
		}
		/* the table's address: lea T(%rip),%rB */
		if (wb < 0 || in.mnemonic != ZYDIS_MNEMONIC_LEA || ops[1].mem.base != ZYDIS_REGISTER_RIP ||
		    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[1], a->in[wb].addr, &table)))
			goto unknown;
		/* the entry: movslq (%rB,%rI,4),%rX, with rB still the table */
		wx = an_writer(a, (size_t)w, x, &dec, &in, ops);
		if (wx < 0 || wx < wb || in.mnemonic != ZYDIS_MNEMONIC_MOVSXD ||
		    ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY || x86_reg64(ops[1].mem.base) != b ||
		    ops[1].mem.scale != 4 || ops[1].mem.disp.value != 0)
			goto unknown;
		esize = 4;
	}
read:
	if (!esize)
		goto unknown;
	if (!rd) {
		x86_refuse(&a->unknown_rf, -ENOTSUP, X86_R_TABLE, " (jump at 0x%" PRIx64 ", table at 0x%"
		       PRIx64 ": nothing to read it with)", at, table);
		a->unknown = -ENOTSUP;
		return 0;
	}
	n = an_read_table(a, rd, at, table, esize);
	if (n < 0)
		return (int)n;
	if (n > 0)
		return 0;
	x86_refuse(&a->unknown_rf, -ENOTSUP, X86_R_TABLE, " (jump at 0x%" PRIx64 ", table at 0x%" PRIx64
	       " unreadable)", at, table);
	a->unknown = -ENOTSUP;
	return 0;
unknown:
	x86_refuse(&a->unknown_rf, -ENOTSUP, X86_R_TABLE, " (jump at 0x%" PRIx64 ")", at);
	a->unknown = -ENOTSUP;
	return 0;
}

int an_build(struct func_an *a, const struct x86_region *rg, size_t nrg,
		    const struct x86_reader *rd, struct refusal *rf)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	size_t cap = 0, nind = 0, *ind = NULL;
	int ret = 0;

	memset(a, 0, sizeof(*a));
	a->rg = rg;
	a->nrg = nrg;
	if (!x86_decoder_init(&dec))
		return x86_refuse(rf, -ENOEXEC, X86_R_NOEXEC, NULL);
	for (size_t r = 0; r < nrg && r < 256; r++)
		cap += rg[r].len;
	a->in = malloc((cap ? cap : 1) * sizeof(*a->in));
	if (!a->in)
		return -ENOMEM;
	for (size_t r = 0; r < nrg && r < 256 && !ret; r++) {
		for (uint64_t pos = 0; pos < rg[r].len; pos += in.length) {
			uint64_t at = rg[r].addr + pos, target = 0;
			uint8_t flow = FLOW_NEXT, kind = K_OTHER;

			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, rg[r].code + pos,
								 rg[r].len - pos, &in, ops))) {
				ret = x86_refuse(rf, -ENOEXEC, X86_R_NOEXEC, " at 0x%" PRIx64, at);
				break;
			}
			if (in.attributes & ZYDIS_ATTRIB_IS_RELATIVE &&
			    ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[0].imm.is_relative) {
				target = at + in.length + (uint64_t)ops[0].imm.value.s;
				if ((ret = an_add_target(a, target, at)))
					break;
				if (in.mnemonic == ZYDIS_MNEMONIC_JMP)
					kind = K_JMP;
				else if (in.meta.category == ZYDIS_CATEGORY_COND_BR)
					kind = K_JCC;
			} else if (in.mnemonic == ZYDIS_MNEMONIC_JMP) {
				kind = K_IJMP;
			} else if (in.mnemonic == ZYDIS_MNEMONIC_RET) {
				kind = K_RET;
			} else if (in.meta.category == ZYDIS_CATEGORY_NOP ||
				   in.meta.category == ZYDIS_CATEGORY_WIDENOP) {
				kind = K_NOP;
			}
			if (in.mnemonic == ZYDIS_MNEMONIC_CALL) {
				flow = FLOW_CALL;
			} else if (in.mnemonic == ZYDIS_MNEMONIC_JMP || in.mnemonic == ZYDIS_MNEMONIC_RET ||
				   x86_refused_mnemonic(in.mnemonic)) {
				flow = FLOW_END;
				if (in.mnemonic == ZYDIS_MNEMONIC_JMP &&
				    ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) {
					size_t *v = realloc(ind, (nind + 1) * sizeof(*v));

					if (!v) {
						ret = -ENOMEM;
						break;
					}
					ind = v;
					ind[nind++] = a->nin;
				}
			}
			a->in[a->nin++] = (struct an_insn){at, target, in.length, flow, (uint8_t)r,
							   kind, false};
		}
	}
	/* jump tables, once the direct targets are known */
	if (a->ntg)
		qsort(a->tg, a->ntg, sizeof(*a->tg), cmp_target);
	a->sorted = true;
	for (size_t k = 0; k < nind && !ret; k++) {
		if (an_decode(a, ind[k], &dec, &in, ops)) {
			ret = x86_refuse(rf, -ENOEXEC, X86_R_NOEXEC, NULL);
			break;
		}
		ret = an_indirect(a, ind[k], &ops[0], rd);
	}
	free(ind);
	if (ret)
		an_free(a);
	return ret;
}

bool an_in_regions(const struct func_an *a, uint64_t t)
{
	for (size_t r = 0; r < a->nrg; r++)
		if (t >= a->rg[r].addr && t - a->rg[r].addr < a->rg[r].len)
			return true;
	return false;
}

/* Is in[i] a return site, as an_return_sites finds them? */
bool an_is_ret_site(const struct func_an *a, size_t i)
{
	const struct an_insn *in = &a->in[i];

	return in->kind == K_RET || (in->kind == K_JMP && !an_in_regions(a, in->target)) ||
	       (in->kind == K_IJMP && in->tail);
}


/* As x86_return_sites, with jump tables resolved: a jump table's jmp is no
 * return site, a jmp through a pointer is a tail call. */
ssize_t an_return_sites(const struct func_an *a, struct x86_ret_site **out,
			       struct refusal *rf)
{
	struct x86_ret_site *v = NULL;
	size_t n = 0;

	*out = NULL;
	if (a->unknown) {
		*rf = a->unknown_rf;
		return a->unknown;
	}
	for (size_t i = 0; i < a->nin; i++) {
		const struct an_insn *in = &a->in[i];
		bool out_of = in->kind == K_JMP || in->kind == K_JCC ?
			      !an_in_regions(a, in->target) : false;

		if (in->kind == K_JCC && out_of) {
			free(v);
			return x86_refuse(rf, -ENOTSUP, X86_R_COND_TAIL, " (a conditional jump out of the "
				      "function at 0x%" PRIx64 ", to 0x%" PRIx64 ")", in->addr,
				      in->target);
		}
		if (an_is_ret_site(a, i)) {
			struct x86_ret_site *nv = realloc(v, (n + 1) * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
			v[n++] = (struct x86_ret_site){in->addr,
						      in->kind == K_RET ? X86_RET : X86_TAIL_JMP,
						      in->kind == K_JMP ? in->target : 0};
		}
	}
	if (!n)
		return x86_refuse(rf, -ENOENT, X86_R_NORET, NULL);
	*out = v;
	return (ssize_t)n;
}

ssize_t x86_branches_out(const struct x86_region *regions, size_t nregions,
			 uint64_t *targets, size_t max)
{
	struct refusal rf;
	struct func_an a;
	size_t n = 0;
	int ret = an_build(&a, regions, nregions, NULL, &rf);

	if (ret)
		return ret;
	for (size_t i = 0; i < a.nin && n < max; i++)
		if ((a.in[i].kind == K_JMP || a.in[i].kind == K_JCC) &&
		    !an_in_regions(&a, a.in[i].target))
			targets[n++] = a.in[i].target;
	an_free(&a);
	return (ssize_t)n;
}

