/* Unwind tables compiled from a module's CFI through libdw (stack_walk.h
 * says what a row holds).
 *
 * The FDEs of .eh_frame, and of .debug_frame where .eh_frame has none (as
 * libdw's unwinder looks: .eh_frame first), give the address ranges with
 * CFI; libdw's dwarf_cfi_addrframe gives the rule at each address and the
 * range that rule holds over, so a table is the rows of each FDE in turn,
 * classified (dwarf_frame_cfa, dwarf_frame_register) into what the walker
 * can follow or marked as what it cannot. Between FDEs: no CFI. The CFI
 * comes from libdwfl's module (dwfl_module_eh_cfi, dwfl_module_dwarf_cfi),
 * with the x86-64 ABI's default rules and the separate debug file found
 * as stack/unwind.c's unwinder finds them, so both read the same rules. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/grow.h"
#include "stack/unwgo.h"
#include "stack/unwtab.h"

#define REG_RBP 6
#define REG_RSP 7
#define REG_RIP 16
#define BLOCK_SHIFT_MIN 4
#define BLOCK_SHIFT_MAX 8

int stack_build_id(const char *path, uint8_t *id, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	const void *p = NULL;
	ssize_t n;
	Elf *e;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e) {
		close(fd);
		return -EINVAL;
	}
	n = dwelf_elf_gnu_build_id(e, &p);
	if (n < 0 || (size_t)n > max)
		n = 0;
	if (n > 0)
		memcpy(id, p, (size_t)n);
	elf_end(e);
	close(fd);
	return (int)n;
}

/* ---- a row from libdw's rule at an address -------------------------------- */

static bool is_cfa_plus(const Dwarf_Op *ops, size_t nops, int64_t *off, bool *value)
{
	/* [call_frame_cfa] [plus_uconst N] [stack_value]: a location at CFA + N,
	 * or with stack_value the value CFA + N */
	size_t k = 1;

	if (!nops || ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	*off = 0;
	if (k < nops && ops[k].atom == DW_OP_plus_uconst)
		*off = (int64_t)ops[k++].number;
	*value = k < nops && ops[k].atom == DW_OP_stack_value;
	if (*value)
		k++;
	return k == nops;
}

/* A register rule [call_frame_cfa] [breg7 N]: the location rsp + N (the
 * signal trampoline's registers, in the ucontext). */
static bool is_rsp_slot(Dwarf_Frame *fr, int reg, int64_t want)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;

	return dwarf_frame_register(fr, reg, mem, &ops, &nops) == 0 && nops == 2 &&
	       ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_breg7 &&
	       (int64_t)ops[1].number == want;
}

/* Linux's x86-64 rt_sigreturn frame as glibc describes __restore_rt: the
 * CFA is the saved rsp, *(rsp + 160), and rip, rsp, rbp are in the
 * ucontext at rsp. */
static bool is_linux_sigframe(Dwarf_Frame *fr, const Dwarf_Op *ops, size_t nops)
{
	return nops == 2 && ops[0].atom == DW_OP_breg7 &&
	       (int64_t)ops[0].number == STACK_UC_RSP && ops[1].atom == DW_OP_deref &&
	       is_rsp_slot(fr, REG_RIP, STACK_UC_RIP) && is_rsp_slot(fr, REG_RSP, STACK_UC_RSP) &&
	       is_rsp_slot(fr, REG_RBP, STACK_UC_RBP);
}

static uint8_t rbp_rule(Dwarf_Frame *fr, int8_t *off8)
{
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	int64_t off;
	bool value;

	*off8 = 0;
	if (dwarf_frame_register(fr, REG_RBP, mem, &ops, &nops) != 0)
		return STACK_RBP_LOST;
	if (nops == 0)
		return ops == NULL ? STACK_RBP_SAME : STACK_RBP_LOST;	/* same / undefined */
	if (!is_cfa_plus(ops, nops, &off, &value) || value || off % 8 || off / 8 < -128 ||
	    off / 8 > 127)
		return STACK_RBP_LOST;	/* a rule libdw follows and the row cannot hold */
	*off8 = (int8_t)(off / 8);
	return STACK_RBP_SAVED;
}

/* The row for libdw's frame (its pc aside). */
static struct stack_row classify(Dwarf_Frame *fr)
{
	struct stack_row r = {0, 0, STACK_OP_BAD, 0};
	Dwarf_Op mem[3], *ops = NULL;
	size_t nops = 0;
	bool sig = false, value;
	int64_t off;
	int8_t bp8;
	uint8_t rbp;
	int ra = dwarf_frame_info(fr, NULL, NULL, &sig);

	if (ra != REG_RIP) {
		r.op = ra < 0 ? STACK_OP_BAD : STACK_OP_REG;
		return r;
	}
	/* the caller's pc: undefined is the outermost frame, for libdw too */
	if (dwarf_frame_register(fr, REG_RIP, mem, &ops, &nops) != 0)
		return r;
	if (nops == 0 && ops == mem) {
		r.op = STACK_OP_OUTERMOST;
		return r;
	}
	bool ra_std = is_cfa_plus(ops, nops, &off, &value) && !value && off == -8;

	if (dwarf_frame_cfa(fr, &ops, &nops) != 0)
		return r;
	if (sig) {
		r.op = is_linux_sigframe(fr, ops, nops) ? STACK_OP_SIGNAL : STACK_OP_SIGOTHER;
		return r;
	}
	if (nops != 1 || ops[0].atom != DW_OP_bregx) {
		r.op = STACK_OP_EXPR;
		return r;
	}
	if ((ops[0].number != REG_RSP && ops[0].number != REG_RBP) || !ra_std) {
		r.op = STACK_OP_REG;
		return r;
	}
	off = (int64_t)ops[0].number2;
	r.op = ops[0].number == REG_RSP ? STACK_OP_RSP : STACK_OP_RBP;
	/* the caller's rsp is the CFA (the ABI's rule) */
	if (dwarf_frame_register(fr, REG_RSP, mem, &ops, &nops) != 0)
		return (r.op = STACK_OP_BAD), r;
	{
		int64_t o;

		if (!is_cfa_plus(ops, nops, &o, &value) || !value || o != 0) {
			r.op = STACK_OP_REG;
			return r;
		}
	}
	if (off >= INT16_MIN && off <= INT16_MAX) {
		r.cfa_off = (int16_t)off;
	} else if (off % 8 == 0 && off / 8 >= INT16_MIN && off / 8 <= INT16_MAX) {
		r.cfa_off = (int16_t)(off / 8);	/* a frame of 32 KiB or more */
		r.op |= STACK_CFA_X8;
	} else {
		r.op = STACK_OP_RANGE;
		return r;
	}
	rbp = rbp_rule(fr, &bp8);
	r.op |= (uint8_t)(rbp << STACK_RBP_SHIFT);
	r.rbp_off = bp8;
	return r;
}

/* ---- the FDEs: where CFI is ------------------------------------------------ */

struct span {
	uint64_t start, end;	/* link-time addresses of the main file */
	bool debug;		/* .debug_frame's */
	uint32_t go;		/* 1 + a Go function's index (unwgo.h): rows from
				 * its pcsp table; 0: CFI's */
};

struct spans {
	struct span *v;
	size_t n, cap;
};

static int spans_put(struct spans *s, struct span sp)
{
	if (sp.start >= sp.end)
		return 0;
	if (core_reserve(s->v, s->cap, s->n + 1, 1024))
		return -ENOMEM;
	s->v[s->n++] = sp;
	return 0;
}

static int spans_add(struct spans *s, uint64_t start, uint64_t end, bool debug)
{
	return spans_put(s, (struct span){start, end, debug, 0});
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Sorted, an FDE ending where the next one starts: libdw finds the FDE
 * starting last at or before an address, and no other. */
static void spans_sort(struct spans *s)
{
	size_t k = 0;

	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), span_cmp);
	for (size_t i = 0; i < s->n; i++) {
		if (k && s->v[k - 1].start == s->v[i].start)
			k--;	/* the same start twice: one of them */
		if (k && s->v[k - 1].end > s->v[i].start)
			s->v[k - 1].end = s->v[i].start;
		s->v[k++] = s->v[i];
	}
	s->n = k;
}

/* Size in bytes of a pointer of encoding enc at p (a LEB128's own length). */
static size_t enc_size(uint8_t enc, const uint8_t *p, const uint8_t *end)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: return 8;
	case DW_EH_PE_udata2: case DW_EH_PE_sdata2: return 2;
	case DW_EH_PE_udata4: case DW_EH_PE_sdata4: return 4;
	case DW_EH_PE_udata8: case DW_EH_PE_sdata8: return 8;
	case DW_EH_PE_uleb128: case DW_EH_PE_sleb128: {
		size_t n = 0;

		while (p + n < end && (p[n] & 0x80))
			n++;
		return p + n < end ? n + 1 : 0;
	}
	default: return 0;
	}
}

/* A pointer of encoding enc at *p, the field's own address at where (for
 * pc-relative ones); applied: whether to add where. */
static int read_enc(uint8_t enc, const uint8_t **p, const uint8_t *end, uint64_t where,
		    bool applied, uint64_t *out)
{
	const uint8_t *q = *p;
	size_t sz = enc_size(enc, q, end);
	uint64_t v = 0;
	int shift = 0;

	if (!sz || (size_t)(end - q) < sz)
		return -EINVAL;
	switch (enc & 0x0f) {
	case DW_EH_PE_uleb128:
	case DW_EH_PE_sleb128:
		for (size_t i = 0; i < sz && shift < 64; i++, shift += 7)
			v |= (uint64_t)(q[i] & 0x7f) << shift;
		if ((enc & 0x0f) == DW_EH_PE_sleb128 && shift < 64 && (q[sz - 1] & 0x40))
			v |= ~0ULL << shift;
		break;
	default:
		for (size_t i = 0; i < sz; i++)
			v |= (uint64_t)q[i] << (8 * i);
		if ((enc & 0x08) && sz < 8 && (v >> (8 * sz - 1)) & 1)
			v |= ~0ULL << (8 * sz);
		break;
	}
	*p = q + sz;
	if (applied) {
		switch (enc & 0x70) {
		case DW_EH_PE_absptr:
			break;
		case DW_EH_PE_pcrel:
			v += where;
			break;
		default:	/* textrel, datarel, funcrel: not in x86-64 FDEs */
			return -ENOTSUP;
		}
		if (enc & DW_EH_PE_indirect)
			return -ENOTSUP;
	}
	*out = v;
	return 0;
}

/* The FDE pointer encoding of a CIE ('R' in a "z" augmentation). */
static int cie_encoding(const Dwarf_CIE *c, uint8_t *enc)
{
	const char *a = c->augmentation;
	const uint8_t *d = c->augmentation_data, *e = d ? d + c->augmentation_data_size : d;

	*enc = DW_EH_PE_absptr;
	if (!a || !*a)
		return 0;
	if (a[0] != 'z')
		return -ENOTSUP;
	for (a++; *a; a++) {
		uint8_t pe;
		size_t sz;

		switch (*a) {
		case 'R':
			if (d >= e)
				return -EINVAL;
			*enc = *d;
			return 0;
		case 'L':
			if (d >= e)
				return -EINVAL;
			d++;
			break;
		case 'P':
			if (d >= e)
				return -EINVAL;
			pe = *d++;
			sz = enc_size(pe, d, e);
			if (!sz || (pe & 0x70) == DW_EH_PE_aligned)
				return -ENOTSUP;
			d += sz;
			break;
		case 'S':
		case 'B':
			break;
		default:
			return 0;	/* no 'R' before it: the default */
		}
	}
	return 0;
}

struct cie_enc {
	Dwarf_Off off;
	uint8_t enc;
};

static int cie_find(const struct cie_enc *v, size_t n, Dwarf_Off off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].off == off ? v[lo].enc : -1;
}

/* The section named name of e. */
static Elf_Scn *find_scn(Elf *e, const char *name, GElf_Shdr *sh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(e, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh))
			continue;
		n = elf_strptr(e, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name) && sh->sh_type != SHT_NOBITS)
			return scn;
	}
	return NULL;
}

/* The FDEs of .eh_frame (eh) or .debug_frame of e, their addresses shifted
 * by adj into the main file's, into s. 0, -ENOENT (no section), -errno. */
static int read_fdes(Elf *e, bool eh, int64_t adj, struct spans *s, uint32_t *nfde)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_scn(e, eh ? ".eh_frame" : ".debug_frame", &sh);
	Elf_Data *data = scn ? elf_getdata(scn, NULL) : NULL;
	const unsigned char *ident = (const unsigned char *)elf_getident(e, NULL);
	struct cie_enc *cies = NULL;
	size_t ncies = 0, capcies = 0;
	Dwarf_Off off = 0, next;
	int err = 0;

	if (!data || !data->d_buf || !ident)
		return -ENOENT;
	for (;;) {
		Dwarf_CFI_Entry ent;
		int r = dwarf_next_cfi(ident, data, eh, off, &next, &ent);

		if (r > 0)
			break;
		if (r < 0) {
			if (next == (Dwarf_Off)-1 || next <= off) {
				err = -EINVAL;
				break;
			}
			off = next;	/* an entry it can skip */
			continue;
		}
		if (ent.CIE_id == LIBDW_CIE_ID) {
			uint8_t enc = DW_EH_PE_absptr;

			if (eh && cie_encoding(&ent.cie, &enc) != 0)
				enc = 0xff;	/* FDEs of this CIE cannot be read */
			if (core_reserve(cies, capcies, ncies + 1, 64)) {
				err = -ENOMEM;
				break;
			}
			cies[ncies++] = (struct cie_enc){off, enc};
		} else {
			const uint8_t *p = ent.fde.start, *end = ent.fde.end;
			int enc = cie_find(cies, ncies, ent.fde.CIE_pointer);
			uint64_t start, len, where = sh.sh_addr + (uint64_t)(p - (const uint8_t *)data->d_buf);

			if (enc < 0 || enc == 0xff ||
			    read_enc((uint8_t)enc, &p, end, where, true, &start) ||
			    read_enc((uint8_t)enc & 0x0f, &p, end, 0, false, &len)) {
				err = -ENOTSUP;
				break;
			}
			(*nfde)++;
			/* a zero start: an FDE of a function the linker dropped */
			if (start && spans_add(s, start + (uint64_t)adj, start + len + (uint64_t)adj,
					       !eh)) {
				err = -ENOMEM;
				break;
			}
		}
		off = next;
	}
	free(cies);
	return err;
}

/* The parts of dbg's spans (.debug_frame's, or Go functions') where eh's
 * (.eh_frame's, or all CFI's) have none (both sorted): into out. */
static int spans_uncovered(const struct spans *dbg, const struct spans *eh, struct spans *out)
{
	size_t j = 0;

	for (size_t i = 0; i < dbg->n; i++) {
		uint64_t s = dbg->v[i].start, e = dbg->v[i].end;

		while (s < e) {
			uint64_t stop;

			while (j < eh->n && eh->v[j].end <= s)
				j++;
			if (j < eh->n && eh->v[j].start <= s) {
				s = eh->v[j].end;
				continue;
			}
			stop = j < eh->n && eh->v[j].start < e ? eh->v[j].start : e;
			if (spans_put(out, (struct span){s, stop, dbg->v[i].debug, dbg->v[i].go}))
				return -ENOMEM;
			s = stop;
		}
	}
	return 0;
}

/* ---- rows ------------------------------------------------------------------ */

struct rows {
	struct stack_row *v;
	size_t n, cap;
	uint64_t base, end;	/* the last row's end */
};

static bool row_same(const struct stack_row *a, const struct stack_row *b)
{
	return a->op == b->op && a->cfa_off == b->cfa_off && a->rbp_off == b->rbp_off;
}

/* Row r from start (to the next row): merged into the last when equal. */
static int rows_add(struct rows *rs, uint64_t start, uint64_t end, struct stack_row r)
{
	if (!rs->n)
		rs->base = start;
	rs->end = end;
	if (rs->n && row_same(&rs->v[rs->n - 1], &r))
		return 0;
	if (start - rs->base > UINT32_MAX)
		return -ENOTSUP;
	if (core_reserve(rs->v, rs->cap, rs->n + 1, 4096))
		return -ENOMEM;
	r.pc = (uint32_t)(start - rs->base);
	rs->v[rs->n++] = r;
	return 0;
}

/* The rows of one FDE's span [sp->start, sp->end), link-time addresses of
 * the CFI less adj. */
static int span_rows(Dwarf_CFI *cfi, int64_t adj, const struct span *sp, struct rows *rs)
{
	uint64_t pc = sp->start;

	while (pc < sp->end) {
		Dwarf_Frame *fr = NULL;
		Dwarf_Addr s, e;
		struct stack_row r;
		int err;

		if (dwarf_cfi_addrframe(cfi, pc - (uint64_t)adj, &fr) != 0) {
			/* CFI libdw cannot read: the walker leaves it to libdw */
			return rows_add(rs, pc, sp->end, (struct stack_row){0, 0, STACK_OP_BAD, 0});
		}
		dwarf_frame_info(fr, &s, &e, NULL);
		r = classify(fr);
		free(fr);
		e += (uint64_t)adj;
		if (e <= pc || e > sp->end)
			e = sp->end;
		err = rows_add(rs, pc, e, r);
		if (err)
			return err;
		pc = e;
	}
	return 0;
}

/* Blocks of about two rows on average: a lookup takes one or two steps of
 * its search (with 256-byte blocks, 4 and more in dense code: 25% slower
 * a walk), the index costs half the rows' bytes at most. Between 16 and
 * 256 bytes; wider still (below) where rows are sparse. */
static uint8_t block_shift(uint32_t span, uint32_t nrows)
{
	uint32_t per = nrows ? span / nrows : span;	/* bytes a row */
	uint8_t s = 1;

	while (s < 31 && (1u << s) <= per)
		s++;
	return s < BLOCK_SHIFT_MIN ? BLOCK_SHIFT_MIN : s > BLOCK_SHIFT_MAX ? BLOCK_SHIFT_MAX : s;
}

int stack_utab_index(struct stack_utab *u)
{
	struct stack_tab *t = &u->tab;
	uint32_t r = 0;

	if (!t->nrows || !t->span || t->shift > STACK_SHIFT_MAX || u->rows[0].pc)
		return -EINVAL;
	/* never more blocks than twice the rows (and some): a table's memory
	 * is its rows', whatever its span says */
	if (((t->span - 1) >> t->shift) + 1 > 2 * (uint64_t)t->nrows + 1024)
		return -EINVAL;
	t->nidx = ((t->span - 1) >> t->shift) + 1;
	free(u->idx);
	u->idx = malloc((size_t)t->nidx * sizeof(*u->idx));
	if (!u->idx)
		return -ENOMEM;
	for (uint32_t b = 0; b < t->nidx; b++) {
		uint64_t at = (uint64_t)b << t->shift;

		while (r + 1 < t->nrows && u->rows[r + 1].pc <= at)
			r++;
		u->idx[b] = r;
	}
	return 0;
}

/* The separate debug file, as libdw's unwinder finds it; but where the
 * file libdw takes first (by build-id) has no .debug_frame, none: libdw
 * would read its every debug section (and inflate the compressed ones, 50
 * ms for libc's) to find no CFI there. */
static int find_debug_frame(Dwfl_Module *mod, void **ud, const char *name, Dwarf_Addr base,
			    const char *file, const char *link, GElf_Word crc, char **dname)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(mod, &bits, &vaddr);

	if (n > 1 && n <= STACK_BUILD_ID_MAX) {
		char path[64 + 2 * STACK_BUILD_ID_MAX], *p = path;
		uint8_t id[STACK_BUILD_ID_MAX];
		GElf_Shdr sh;
		bool has = false;
		int fd;
		Elf *e;

		p += sprintf(p, "/usr/lib/debug/.build-id/%02x/", bits[0]);
		for (int i = 1; i < n; i++)
			p += sprintf(p, "%02x", bits[i]);
		strcpy(p, ".debug");
		if (stack_build_id(path, id, sizeof(id)) == n && !memcmp(id, bits, (size_t)n)) {
			fd = open(path, O_RDONLY | O_CLOEXEC);
			e = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
			has = e && find_scn(e, ".debug_frame", &sh);
			elf_end(e);
			if (fd >= 0)
				close(fd);
			if (!has)
				return -1;
		}
	}
	return dwfl_standard_find_debuginfo(mod, ud, name, base, file, link, crc, dname);
}

static const Dwfl_Callbacks offline_cbs = {
	.find_debuginfo = find_debug_frame,
	.section_address = dwfl_offline_section_address,
};

/* The FDE spans of the module: .eh_frame's, then .debug_frame's where
 * .eh_frame has none. *eh, *dbg: the CFI of each (NULL: none). */
static int module_spans(Dwfl_Module *mod, struct spans *all, Dwarf_CFI **eh, int64_t *eh_adj,
			Dwarf_CFI **dbg, int64_t *dbg_adj, uint32_t *nfde)
{
	struct spans ehs = {0}, ds = {0};
	Dwarf_Addr mbias, bias;
	Elf *main = dwfl_module_getelf(mod, &mbias);
	int err = 0;

	if (!main)
		return -EINVAL;
	*eh = dwfl_module_eh_cfi(mod, &bias);
	*eh_adj = (int64_t)(bias - mbias);
	if (*eh) {
		err = read_fdes(main, true, 0, &ehs, nfde);
		if (err)
			goto out;	/* CFI libdw reads and this cannot list */
		spans_sort(&ehs);
	}
	*dbg = dwfl_module_dwarf_cfi(mod, &bias);
	*dbg_adj = (int64_t)(bias - mbias);
	if (*dbg) {
		Elf *de = dwarf_getelf(dwfl_module_getdwarf(mod, &bias));

		if (!de || read_fdes(de, false, *dbg_adj, &ds, nfde) != 0) {
			*dbg = NULL;	/* none to read: .eh_frame alone */
		} else {
			spans_sort(&ds);
			err = spans_uncovered(&ds, &ehs, all);
			if (err)
				goto out;
		}
	}
	for (size_t i = 0; i < ehs.n && !err; i++)
		err = spans_add(all, ehs.v[i].start, ehs.v[i].end, false);
	if (!err && all->n)
		qsort(all->v, all->n, sizeof(*all->v), span_cmp);
	if (!err && !*eh && !*dbg)
		err = -ENODATA;
out:
	free(ehs.v);
	free(ds.v);
	return err;
}

/* The Go functions of the module at path that no CFI span of all (sorted)
 * covers, or the parts of them it leaves, into all (sorted again): their
 * rows come from Go's pcsp tables (g). -ENODATA: not a Go program. */
static int go_spans(Elf *e, const char *path, struct spans *all, struct stack_gotab *g)
{
	struct spans fns = {0}, add = {0};
	int err = stack_gotab_open(path, e, g);

	if (err)
		return err;
	/* in address order, each ending by the next one's entry */
	for (size_t i = 0; i < g->n && !err; i++)
		err = spans_put(&fns, (struct span){g->fn[i].entry, g->fn[i].end, false,
						    (uint32_t)i + 1});
	if (!err)
		err = spans_uncovered(&fns, all, &add);
	for (size_t i = 0; i < add.n && !err; i++)
		err = spans_put(all, add.v[i]);
	if (!err && add.n)
		qsort(all->v, all->n, sizeof(*all->v), span_cmp);
	free(fns.v);
	free(add.v);
	return err;
}

/* The rows of a Go function's span from its pcsp table: a range for each
 * of its values, as Go's linker writes .debug_frame from it; what the
 * table does not describe (it cannot be read) is left to libdw. */
static int go_rows(const struct stack_gotab *g, const struct span *sp, struct rows *rs)
{
	const struct gopclntab_func *f = &g->fn[sp->go - 1];
	struct gopclntab_pcv it;
	uint64_t lo, hi, done = sp->start;
	int32_t v;
	int r, err;

	gopclntab_pcv_start(f->pcsp, f->entry, f->end, &it);
	while ((r = gopclntab_pcv_next(g->tab, g->len, &g->h, &it, &lo, &hi, &v)) > 0) {
		if (hi <= done || lo >= hi)
			continue;
		if (lo >= sp->end)
			break;
		if (lo > done)
			break;	/* a gap: not a table Go's linker wrote */
		hi = hi < sp->end ? hi : sp->end;
		err = rows_add(rs, done, hi, stack_go_row(v));
		if (err)
			return err;
		done = hi;
	}
	if (done < sp->end)
		return rows_add(rs, done, sp->end, (struct stack_row){0, 0, STACK_OP_BAD, 0});
	return 0;
}

static int build(Dwfl_Module *mod, const char *path, struct stack_utab *u)
{
	struct spans all = {0};
	struct rows rs = {0};
	struct stack_gotab go = {0};
	Dwarf_CFI *eh = NULL, *dbg = NULL;
	int64_t eh_adj = 0, dbg_adj = 0;
	Dwarf_Addr mbias;
	Elf *main = dwfl_module_getelf(mod, &mbias);
	int err = module_spans(mod, &all, &eh, &eh_adj, &dbg, &dbg_adj, &u->fdes);

	/* Go functions CFI does not cover (CFI wins where both are: libdw's
	 * unwinder reads it, and for Go code it says what pcsp says) */
	if ((!err || err == -ENODATA) && main) {
		int gerr = go_spans(main, path, &all, &go);

		if (gerr == -ENOMEM)
			err = gerr;
		else if (!gerr && all.n)
			err = 0;
	}
	for (size_t i = 0; i < all.n && !err; i++) {
		size_t before;

		/* no CFI between the previous FDE and this one */
		if (rs.n && all.v[i].start > rs.end)
			err = rows_add(&rs, rs.end, all.v[i].start,
				       (struct stack_row){0, 0, STACK_OP_NOCFI, 0});
		before = rs.n;
		if (!err && all.v[i].go)
			err = go_rows(&go, &all.v[i], &rs);
		else if (!err)
			err = span_rows(all.v[i].debug ? dbg : eh, all.v[i].debug ? dbg_adj : eh_adj,
				&all.v[i], &rs);
		if (all.v[i].go)
			u->go_rows += (uint32_t)(rs.n - before);
		else if (all.v[i].debug)
			u->debug_rows += (uint32_t)(rs.n - before);
	}
	stack_gotab_close(&go);
	free(all.v);
	if (!err && !rs.n)
		err = -ENODATA;
	if (!err && rs.end - rs.base > UINT32_MAX)
		err = -ENOTSUP;
	if (err) {
		free(rs.v);
		return err;
	}
	u->rows = rs.v;
	u->tab.base = rs.base;
	u->tab.span = (uint32_t)(rs.end - rs.base);
	u->tab.nrows = (uint32_t)rs.n;
	u->tab.shift = block_shift(u->tab.span, (uint32_t)rs.n);
	/* wider blocks where rows are sparse, the index bounded by the rows */
	while (((u->tab.span - 1) >> u->tab.shift) + 1 > 2 * (uint64_t)rs.n + 1024 &&
	       u->tab.shift < STACK_SHIFT_MAX)
		u->tab.shift++;
	for (size_t i = 0; i < rs.n; i++)
		u->by_op[rs.v[i].op & STACK_OP_MASK]++;
	err = stack_utab_index(u);
	return err == -EINVAL ? -ENOTSUP : err;	/* rows too sparse for the index */
}

int stack_utab_build(const char *path, struct stack_utab **out)
{
	struct stack_utab *u = calloc(1, sizeof(*u));
	Dwfl *d = dwfl_begin(&offline_cbs);
	Dwfl_Module *mod = NULL;
	GElf_Ehdr eh;
	Dwarf_Addr b;
	Elf *e;
	int err;

	*out = NULL;
	if (!u || !d) {
		free(u);
		if (d)
			dwfl_end(d);
		return -ENOMEM;
	}
	dwfl_report_begin(d);
	mod = dwfl_report_offline(d, path, path, -1);
	dwfl_report_end(d, NULL, NULL);
	e = mod ? dwfl_module_getelf(mod, &b) : NULL;
	if (!e) {
		err = access(path, R_OK) ? -errno : -EINVAL;
		log_debug("stack: %s: %s", path, dwfl_errmsg(-1));
	} else if (!gelf_getehdr(e, &eh) || eh.e_machine != EM_X86_64 ||
		   eh.e_ident[EI_CLASS] != ELFCLASS64) {
		err = -ENOTSUP;
	} else {
		int n = stack_build_id(path, u->build_id, sizeof(u->build_id));

		u->build_id_len = n > 0 ? (uint32_t)n : 0;
		err = build(mod, path, u);
	}
	dwfl_end(d);
	if (err) {
		stack_utab_free(u);
		return err;
	}
	*out = u;
	return 0;
}

void stack_utab_free(struct stack_utab *u)
{
	if (!u)
		return;
	free(u->rows);
	free(u->idx);
	free(u);
}

size_t stack_utab_bytes(const struct stack_utab *u)
{
	return sizeof(u->tab) + (size_t)u->tab.nrows * sizeof(*u->rows) +
	       (size_t)u->tab.nidx * sizeof(*u->idx);
}

static const char *const op_names[STACK_OP_NR] = {
	[STACK_OP_NOCFI] = "nocfi", [STACK_OP_RSP] = "rsp", [STACK_OP_RBP] = "rbp",
	[STACK_OP_OUTERMOST] = "outermost", [STACK_OP_SIGNAL] = "signal",
	[STACK_OP_EXPR] = "expr", [STACK_OP_REG] = "reg", [STACK_OP_RANGE] = "range",
	[STACK_OP_SIGOTHER] = "sigother", [STACK_OP_BAD] = "bad",
};

const char *stack_op_name(unsigned op)
{
	return op < STACK_OP_NR ? op_names[op] : "?";
}

const char *stack_why_name(unsigned why)
{
	switch (why) {
	case STACK_WHY_RBP: return "rbp-lost";
	case STACK_WHY_TABLE: return "table";
	case STACK_WHY_SIGS: return "signals";
	default: return stack_op_name(why);
	}
}

const char *stack_fallback_name(unsigned fb)
{
	static const char *const names[STACK_FB_NR] = {
		[STACK_FB_NONE] = "copy",
		[STACK_FB_EXPR] = "expr",
		[STACK_FB_REG] = "reg",
		[STACK_FB_RANGE] = "range",
		[STACK_FB_SIGOTHER] = "sigother",
		[STACK_FB_BADCFI] = "badcfi",
		[STACK_FB_RBP] = "rbp-lost",
		[STACK_FB_TABLE] = "table",
		[STACK_FB_SIGS] = "signals",
		[STACK_FB_NOMODULE] = "nomodule",
		[STACK_FB_NOPROC] = "noproc",
		[STACK_FB_CHANGED] = "changed",
	};

	return fb < STACK_FB_NR ? names[fb] : "?";
}
