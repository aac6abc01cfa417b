/* USDT probes: the .note.stapsdt notes and their argument specs (see usdt.h).
 *
 * Both parsers read untrusted bytes: every read is bounded by the section
 * (notes) or the NUL of the spec string (arguments), and a failure names
 * the byte offset where it happened. */
#include "usdt/usdt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/log.h"

/* ---- notes ------------------------------------------------------------ */

#define NT_STAPSDT 3
#define NOTE_HDR 12		/* namesz, descsz, type */
#define DESC_HDR 24		/* pc, base, sema */

static uint32_t rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));	/* x86-64 only: the file is little-endian */
	return v;
}

static uint64_t rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

void usdt_notes_free(struct usdt_note *notes, size_t n)
{
	if (!notes)
		return;
	for (size_t i = 0; i < n; i++) {
		free(notes[i].provider);
		free(notes[i].name);
		free(notes[i].args);
	}
	free(notes);
}

/* One stapsdt desc (desc[0..len)) into *note. Returns 0, or -EINVAL with
 * *what set, or -ENOMEM. */
static int parse_desc(const unsigned char *desc, size_t len, uint64_t actual_base,
		      struct usdt_note *note, const char **what)
{
	const char *str[3];
	static const char *const missing_nul[3] = {
		"provider is not NUL-terminated inside the desc",
		"probe name is not NUL-terminated inside the desc",
		"argument string is not NUL-terminated inside the desc",
	};
	size_t off = DESC_HDR;

	if (len < DESC_HDR) {
		*what = "desc is shorter than its 24-byte header (pc, base, semaphore)";
		return -EINVAL;
	}
	for (int k = 0; k < 3; k++) {
		const unsigned char *nul = off < len ? memchr(desc + off, 0, len - off) : NULL;

		if (!nul) {
			*what = missing_nul[k];
			return -EINVAL;
		}
		str[k] = (const char *)desc + off;
		off = (size_t)(nul - desc) + 1;
	}
	if (!*str[0]) {
		*what = "empty provider";
		return -EINVAL;
	}
	if (!*str[1]) {
		*what = "empty probe name";
		return -EINVAL;
	}
	note->pc = rd64(desc);
	note->base = rd64(desc + 8);
	note->sema = rd64(desc + 16);
	if (actual_base && note->base != actual_base) {
		/* .stapsdt.base moved after linking (prelink): shift, as
		 * libbpf and BCC do, with wrap-around arithmetic */
		uint64_t diff = actual_base - note->base;

		note->pc += diff;
		if (note->sema) {
			note->sema += diff;
			if (!note->sema) {
				*what = "the semaphore's address shifts to 0 with .stapsdt.base";
				return -EINVAL;
			}
		}
	}
	note->provider = strdup(str[0]);
	note->name = strdup(str[1]);
	note->args = strdup(str[2]);
	if (!note->provider || !note->name || !note->args) {
		free(note->provider);
		free(note->name);
		free(note->args);
		return -ENOMEM;
	}
	return 0;
}

/* usdt_read names the file in the one error line a malformed note gives */
static __thread const char *usdt_log_prefix = "";

int usdt_parse_notes(const void *data, size_t len, uint64_t actual_base,
		     struct usdt_note **out, size_t *n)
{
	const unsigned char *b = data;
	struct usdt_note *v = NULL;
	size_t nv = 0, cap = 0, off = 0, idx = 0;
	const char *what = NULL;
	int err = 0;

	*out = NULL;
	*n = 0;
	if (!data)
		len = 0;
	for (; off < len; idx++) {
		size_t name_off, desc_off, next, namesz, descsz;
		uint32_t type;

		if (len - off < NOTE_HDR) {
			what = "truncated note header";
			goto bad;
		}
		namesz = rd32(b + off);
		descsz = rd32(b + off + 4);
		type = rd32(b + off + 8);
		name_off = off + NOTE_HDR;
		if (namesz == 0) {
			what = "empty owner name (namesz 0)";
			goto bad;
		}
		/* the name is padded to 4 bytes before the desc */
		if (namesz > len - name_off || ((namesz + 3) & ~(size_t)3) > len - name_off) {
			what = "owner name runs past the end of the section";
			goto bad;
		}
		desc_off = name_off + ((namesz + 3) & ~(size_t)3);
		if (descsz > len - desc_off) {
			what = "desc runs past the end of the section";
			goto bad;
		}
		/* the desc's own padding may be missing after the last note */
		next = ((descsz + 3) & ~(size_t)3) <= len - desc_off ?
			desc_off + ((descsz + 3) & ~(size_t)3) : len;

		if (type == NT_STAPSDT && namesz == 8 && !memcmp(b + name_off, "stapsdt", 8)) {
			if (core_reserve(v, cap, nv + 1, 16)) {
				err = -ENOMEM;
				goto fail;
			}
			memset(&v[nv], 0, sizeof(v[nv]));
			err = parse_desc(b + desc_off, descsz, actual_base, &v[nv], &what);
			if (err == -EINVAL)
				goto bad;
			if (err)
				goto fail;
			nv++;
		}
		off = next;
	}
	*out = v;
	*n = nv;
	return 0;

bad:
	log_error("%s.note.stapsdt is malformed: note %zu at byte offset %zu: %s",
		  usdt_log_prefix, idx, off, what);
	err = -EINVAL;
fail:
	usdt_notes_free(v, nv);
	return err;
}

int usdt_read(const struct objfile *ef, struct usdt_note **out, size_t *n)
{
	const void *data = NULL, *bdata;
	size_t len = 0, blen;
	uint64_t addr, base = 0;
	int err;

	*out = NULL;
	*n = 0;
	err = objfile_section_data(ef, ".note.stapsdt", &data, &len, &addr);
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	if (!objfile_section_data(ef, ".stapsdt.base", &bdata, &blen, &addr))
		base = addr;
	char prefix[4200];

	snprintf(prefix, sizeof(prefix), "%s: ", ef->path);
	usdt_log_prefix = prefix;
	err = usdt_parse_notes(data, len, base, out, n);
	usdt_log_prefix = "";
	return err;
}

/* ---- argument specs --------------------------------------------------- */

/* The spec string and the cursor through it. */
struct lex {
	const char *s;
	size_t i;
	const struct objfile *ef;
	struct usdt_arg_error *err;
};

static int arg_fail(struct lex *lx, size_t pos, const char *msg)
{
	if (lx->err) {
		lx->err->pos = pos;
		lx->err->msg = msg;
	}
	return -EINVAL;
}

static int is_sep(char c)
{
	return c == ' ';
}

static int is_end(char c)
{
	return c == 0 || is_sep(c);
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_alnum(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_sym_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.';
}

static int is_sym(char c)
{
	return is_sym_start(c) || is_digit(c) || c == '$';
}

/* An unsigned decimal or 0x hex number at the cursor. 0, or -EINVAL (the
 * error names the number's position). */
static int lex_unsigned(struct lex *lx, uint64_t *out)
{
	const char *s = lx->s;
	size_t start = lx->i, i = start;
	uint64_t v = 0;
	unsigned base = 10;

	if (s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
		base = 16;
		i += 2;
	}
	size_t digits = i;

	for (;; i++) {
		char c = s[i];
		unsigned d;

		if (is_digit(c))
			d = (unsigned)(c - '0');
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a') + 10;
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A') + 10;
		else
			break;
		if (v > (UINT64_MAX - d) / base)
			return arg_fail(lx, start, "number out of range");
		v = v * base + d;
	}
	if (i == digits)
		return arg_fail(lx, start, "expected a number (decimal or 0x hex)");
	if (is_sym(s[i]))
		return arg_fail(lx, i, "unexpected character in a number");
	*out = v;
	lx->i = i;
	return 0;
}

/* [-]NUMBER as a signed 64-bit value: a negative one must fit INT64_MIN, a
 * positive one may use all 64 bits (an unsigned immediate). */
static int lex_signed(struct lex *lx, int64_t *out)
{
	size_t start = lx->i;
	bool neg = lx->s[lx->i] == '-';
	uint64_t v;

	if (neg)
		lx->i++;
	if (lex_unsigned(lx, &v))
		return -EINVAL;
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1)
			return arg_fail(lx, start, "number out of range");
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	} else {
		*out = (int64_t)v;
	}
	return 0;
}

/* %REG at the cursor. */
static int lex_reg(struct lex *lx, const struct fetch_reg_name **out)
{
	const char *s = lx->s;
	size_t start = lx->i, i = start + 1, n;

	if (s[start] != '%')
		return arg_fail(lx, start, "expected a register (%reg)");
	while (is_alnum(s[i]))
		i++;
	n = i - start - 1;
	*out = fetch_reg_lookup(s + start + 1, n);
	if (*out) {
		lx->i = i;
		return 0;
	}
	if (n == 2 && strchr("abcd", s[start + 1]) && s[start + 2] == 'h')
		return arg_fail(lx, start, "high-byte registers (%ah..%dh) are not supported");
	return arg_fail(lx, start, "unknown register");
}

/* A register usable in an address: 64-bit, and rip only when allowed. */
static int lex_addr_reg(struct lex *lx, bool is_index, const struct fetch_reg_name **out)
{
	size_t start = lx->i;

	if (lex_reg(lx, out))
		return -EINVAL;
	if ((*out)->width != 8)
		return arg_fail(lx, start, "an address needs 64-bit registers");
	if (is_index && (*out)->reg == USC_REG_IP)
		return arg_fail(lx, start, "%rip cannot be an index register");
	if (is_index && (*out)->reg == USC_REG_SP)
		return arg_fail(lx, start, "%rsp cannot be an index register");
	return 0;
}

static void emit(struct usc_fetcharg *a, struct fetch_insn in)
{
	a->insn[a->ninsn++] = in;
}

/* LOC at the cursor into a's program (store size `size`). */
static int parse_loc(struct lex *lx, unsigned size, struct usc_fetcharg *a)
{
	const char *s = lx->s;
	size_t start = lx->i, sym_pos = 0, sym_len = 0;
	const struct fetch_reg_name *base = NULL, *index = NULL;
	int64_t disp = 0;
	uint64_t scale = 1;
	bool have_sym = false;

	if (s[start] == '%') {				/* %reg */
		const struct fetch_reg_name *r;

		if (lex_reg(lx, &r))
			return -EINVAL;
		if (r->reg == USC_REG_IP)
			return arg_fail(lx, start, "%rip is only allowed as sym(%rip)");
		emit(a, (struct fetch_insn){.op = FOP_REG, .reg = r->reg});
		emit(a, (struct fetch_insn){.op = FOP_ST_RAW, .size = (uint8_t)size});
		return 0;
	}
	if (s[start] == '$') {				/* $imm */
		int64_t v;

		lx->i++;
		if (lex_signed(lx, &v))
			return -EINVAL;
		emit(a, (struct fetch_insn){.op = FOP_IMM, .imm = v});
		emit(a, (struct fetch_insn){.op = FOP_ST_RAW, .size = (uint8_t)size});
		return 0;
	}

	/* memory: [DISP] [( [%base] [,%index[,scale]] )], DISP a sum of
	 * numbers and at most one symbol (GCC writes 24+sym, sym+24, sym-8) */
	if (s[start] == '-' || is_digit(s[start]) || is_sym_start(s[start])) {
		bool neg = false;

		for (;;) {
			size_t tp = lx->i;

			if (is_sym_start(s[tp])) {
				if (have_sym)
					return arg_fail(lx, tp, "only one symbol is allowed in an address");
				if (neg)
					return arg_fail(lx, tp, "a symbol cannot be subtracted");
				sym_pos = tp;
				while (is_sym(s[lx->i]))
					lx->i++;
				sym_len = lx->i - tp;
				have_sym = true;
			} else {
				uint64_t v;

				if (tp == start && s[tp] == '-') {
					neg = true;
					lx->i++;
				}
				if (lex_unsigned(lx, &v))
					return -EINVAL;
				disp = (int64_t)(neg ? (uint64_t)disp - v : (uint64_t)disp + v);
			}
			if (s[lx->i] != '+' && s[lx->i] != '-')
				break;
			neg = s[lx->i] == '-';
			lx->i++;
		}
	} else if (s[start] != '(') {
		return arg_fail(
			lx, start,
			"expected %reg, $imm, off(%reg), off(%base,%index,scale) or sym(%rip)");
	}

	if (s[lx->i] == '(') {
		lx->i++;
		if (s[lx->i] != ',') {
			if (lex_addr_reg(lx, false, &base))
				return -EINVAL;
		}
		if (s[lx->i] == ',') {
			lx->i++;
			if (lex_addr_reg(lx, true, &index))
				return -EINVAL;
			if (s[lx->i] == ',') {
				size_t sp = ++lx->i;

				if (!is_digit(s[sp]))
					return arg_fail(lx, sp, "expected a scale of 1, 2, 4 or 8");
				if (lex_unsigned(lx, &scale))
					return -EINVAL;
				if (scale != 1 && scale != 2 && scale != 4 && scale != 8)
					return arg_fail(lx, sp, "the scale must be 1, 2, 4 or 8");
			}
		}
		if (s[lx->i] != ')')
			return arg_fail(lx, lx->i, "expected ')'");
		lx->i++;
		if (!base && !index)
			return arg_fail(lx, start, "expected a register inside '()'");
		if (base && base->reg == USC_REG_IP && index)
			return arg_fail(lx, start, "%rip cannot take an index register");
	} else if (!have_sym) {
		return arg_fail(lx, lx->i, "expected '(' after the offset");
	}

	if (base && base->reg == USC_REG_IP && !have_sym)
		return arg_fail(lx, start, "an offset from %rip needs a symbol (sym(%rip)): "
				"the instruction's end is unknown");

	if (have_sym) {
		char name[256];
		uint64_t vaddr;

		if (!lx->ef)
			return arg_fail(lx, sym_pos, "a symbol operand needs the ELF file");
		if (base && base->reg != USC_REG_IP && index)
			return arg_fail(lx, start, "a symbol with both base and index registers "
					"is not supported");
		if (sym_len >= sizeof(name))
			return arg_fail(lx, sym_pos, "symbol name too long");
		memcpy(name, s + sym_pos, sym_len);
		name[sym_len] = 0;
		if (objfile_symbol_vaddr(lx->ef, name, &vaddr))
			return arg_fail(lx, sym_pos, "unknown symbol");
		/* sym(%rip) and absolute sym: the memory at sym+off;
		 * sym(%reg) and sym(,%index,scale): sym plus the register */
		emit(a, (struct fetch_insn){.op = FOP_VADDR, .imm = (int64_t)(vaddr + (uint64_t)disp)});
		if (base && base->reg != USC_REG_IP)
			emit(a, (struct fetch_insn){.op = FOP_ADD_REG, .reg = base->reg, .size = 1});
		else if (index)
			emit(a, (struct fetch_insn){.op = FOP_ADD_REG, .reg = index->reg,
						    .size = (uint8_t)scale});
		emit(a, (struct fetch_insn){.op = FOP_ST_MEM, .size = (uint8_t)size, .imm = 0});
		return 0;
	}
	if (base)
		emit(a, (struct fetch_insn){.op = FOP_REG, .reg = base->reg});
	else
		emit(a, (struct fetch_insn){.op = FOP_IMM, .imm = 0});
	if (index)
		emit(a, (struct fetch_insn){.op = FOP_ADD_REG, .reg = index->reg, .size = (uint8_t)scale});
	emit(a, (struct fetch_insn){.op = FOP_ST_MEM, .size = (uint8_t)size, .imm = disp});
	return 0;
}

static enum usc_type type_for(unsigned size, bool is_signed)
{
	switch (size) {
	case 1: return is_signed ? USC_T_S8 : USC_T_U8;
	case 2: return is_signed ? USC_T_S16 : USC_T_U16;
	case 4: return is_signed ? USC_T_S32 : USC_T_U32;
	default: return is_signed ? USC_T_S64 : USC_T_U64;
	}
}

/* One [-]SIZE@LOC at the cursor. */
static int parse_one(struct lex *lx, unsigned idx, struct usc_fetcharg *a)
{
	const char *s = lx->s;
	size_t start = lx->i, sp;
	bool is_signed = false;
	unsigned size = 0;

	memset(a, 0, sizeof(*a));
	if (s[lx->i] == '-') {
		is_signed = true;
		lx->i++;
	}
	sp = lx->i;
	if (!is_digit(s[sp]))
		return arg_fail(lx, sp, "expected an argument size (1, 2, 4 or 8, negative if signed)");
	while (is_digit(s[lx->i]) && lx->i - sp < 3)
		size = size * 10 + (unsigned)(s[lx->i++] - '0');
	if (is_digit(s[lx->i]) || (size != 1 && size != 2 && size != 4 && size != 8))
		return arg_fail(lx, sp, "the argument size must be 1, 2, 4 or 8");
	if (s[lx->i] != '@')
		return arg_fail(lx, lx->i, "expected '@' after the argument size");
	lx->i++;
	if (parse_loc(lx, size, a))
		return -EINVAL;
	if (!is_end(s[lx->i]))
		return arg_fail(lx, lx->i, "unexpected text after the operand");
	emit(a, (struct fetch_insn){.op = FOP_END});
	snprintf(a->name, sizeof(a->name), "arg%u", idx + 1);
	a->type = type_for(size, is_signed);
	a->type_given = false;
	a->pos = (uint32_t)start;
	a->len = (uint32_t)(lx->i - start);
	return 0;
}

int usdt_parse_args(const char *spec, const struct objfile *ef, struct usc_fetcharg *args,
		    unsigned max, unsigned *nargs, struct usdt_arg_error *err)
{
	struct lex lx = {.s = spec, .i = 0, .ef = ef, .err = err};
	unsigned n = 0;

	*nargs = 0;
	if (err)
		*err = (struct usdt_arg_error){0};
	for (;;) {
		while (is_sep(spec[lx.i]))
			lx.i++;
		if (!spec[lx.i])
			break;
		if (n >= max)
			return arg_fail(&lx, lx.i, "too many arguments");
		if (parse_one(&lx, n, &args[n]))
			return -EINVAL;
		n++;
	}
	*nargs = n;
	return 0;
}
