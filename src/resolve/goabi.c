/* Go's register ABI at a probe: $argN, $retvalN and $goid bound on a Go
 * function (see goabi.h). */
#include "resolve/goabi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "objfile/objfile.h"
#include "objfile/gotypes.h"
#include "cache/cache.h"

static const uint8_t go_regs[9] = {
	USC_REG_AX, USC_REG_BX, USC_REG_CX, USC_REG_DI, USC_REG_SI,
	USC_REG_R8, USC_REG_R9, USC_REG_R10, USC_REG_R11,
};

bool goabi_wants(const struct usc_fetcharg *in)
{
	uint8_t op = in->ninsn ? in->insn[0].op : FOP_END;

	return op == FOP_ARG || op == FOP_GOID || (op == FOP_RETVAL && in->insn[0].imm >= 2);
}

int goabi_goid_offset(int minor)
{
	/* runtime.g: stack, stackguard0/1, _panic, _defer, m, sched (a gobuf
	 * of 7 words), syscallsp, syscallpc, [syscallbp since 1.23,]
	 * stktopsp, param, atomicstatus, stackLock, goid */
	if (minor >= 17 && minor <= 22)
		return 152;
	if (minor >= 23 && minor <= 25)
		return 160;
	return -1;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* Is fn, in Go program ef, of Go's stack ABI0 (assembly, or before 1.17)? */
static bool is_abi0(struct objfile *ef, const struct objfile_sym *fn)
{
	int minor = gotypes_minor(ef);

	return (minor >= 0 && minor < 17) ||
	       (fn && ((fn->flags & OBJFILE_SYM_GO_ABI0) || ends_with(fn->name, ".abi0")));
}

/* The user's program after its load, with the load replaced by prog[0..n)
 * and a first store from memory folded in: [load, DEREF off] + ST_RAW size
 * is ST_MEM size at off. */
static int splice(const struct usc_fetcharg *in, const struct fetch_insn *prog, unsigned n,
		  int64_t deref_off, bool deref, struct usc_fetcharg *out)
{
	unsigned k = 0;

	memset(out->insn, 0, sizeof(out->insn));
	for (unsigned i = 0; i < n; i++)
		out->insn[k++] = prog[i];
	for (unsigned i = 1; i < in->ninsn; i++) {
		struct fetch_insn x = in->insn[i];

		if (deref && i == 1 && x.op == FOP_ST_RAW) {
			x = (struct fetch_insn){.op = FOP_ST_MEM, .size = x.size, .imm = deref_off};
			deref = false;
		} else if (deref && i == 1) {
			if (k >= USC_FETCH_MAX)
				return -E2BIG;
			out->insn[k++] = (struct fetch_insn){.op = FOP_DEREF, .imm = deref_off};
			deref = false;
		}
		if (k >= USC_FETCH_MAX)
			return -E2BIG;
		out->insn[k++] = x;
	}
	out->ninsn = (uint8_t)k;
	return 0;
}

bool goabi_regabi(struct usc_cache *c, const struct usc_site *site)
{
	const struct objfile_sym *fn;
	struct objfile *ef = NULL;

	if (!site->func_vaddr || cache_elf(c, site->path, &ef) || !ef->is_go)
		return false;
	fn = objfile_func_at(ef, site->func_vaddr);
	return fn && !is_abi0(ef, fn);
}

int goabi_bind(struct usc_cache *c, const struct usc_site *site, struct debuginfo *dm,
	       const struct usc_fetcharg *in, struct usc_fetcharg *out)
{
	const char *text = site->spec->text, *arg = text + in->pos;
	int alen = (int)in->len;
	uint8_t op = in->insn[0].op;
	int64_t idx = in->insn[0].imm;
	const struct objfile_sym *fn = NULL;
	struct objfile *ef = NULL;
	struct fetch_insn load;
	bool abi0;
	int minor;

	*out = *in;
	if (cache_elf(c, site->path, &ef) || !ef->is_go) {
		if (op == FOP_ARG && idx <= 6)
			return 1;
		log_error("%s: %.*s: %s", text, alen, arg,
			  op == FOP_ARG ? "$argN takes N from 1 to 6 on a C function (9 on a Go one)" :
			  "works on Go programs only");
		return -EINVAL;
	}
	if (site->func_vaddr)
		fn = objfile_func_at(ef, site->func_vaddr);
	minor = gotypes_minor(ef);
	/* assembly keeps Go's stack ABI0; so did every function before 1.17 */
	abi0 = is_abi0(ef, fn);
	switch (op) {
	case FOP_ARG:
		if (abi0) {	/* above the return address, at the entry */
			load = (struct fetch_insn){.op = FOP_STACK, .imm = idx};
		} else {
			if (idx > 9) {
				log_error("%s: %.*s: Go passes 9 integer words in registers: $arg1 "
					  "to $arg9", text, alen, arg);
				return -ERANGE;
			}
			load = (struct fetch_insn){.op = FOP_REG, .reg = go_regs[idx - 1]};
		}
		return splice(in, &load, 1, 0, false, out);
	case FOP_RETVAL:
		if (abi0) {
			log_error("%s: %.*s: %s returns its results on the stack (Go's ABI0): "
				  "$retvalN reads Go's register results", text, alen, arg,
				  fn ? objfile_sym_pretty(fn) : "the function");
			return -EINVAL;
		}
		load = (struct fetch_insn){.op = FOP_REG, .reg = go_regs[idx - 1]};
		return splice(in, &load, 1, 0, false, out);
	case FOP_GOID: {
		uint64_t off = 0;
		int known = goabi_goid_offset(minor);

		if (abi0) {
			log_error("%s: %.*s: R14 holds Go's g in Go 1.17+ register-ABI functions "
				  "only, not in %s", text, alen, arg,
				  fn ? objfile_sym_pretty(fn) : "this one");
			return -EINVAL;
		}
		if (!dm || debuginfo_struct_member_offset(dm, "runtime.g", "goid", &off)) {
			if (known < 0) {
				log_error("%s: %.*s: no debug info says where runtime.g keeps goid, "
					  "and uscope does not know it for %s", text, alen, arg,
					  ef->go_version ? ef->go_version : "this Go");
				return -ENOENT;
			}
			off = (uint64_t)known;
		}
		load = (struct fetch_insn){.op = FOP_REG, .reg = USC_REG_R14};
		return splice(in, &load, 1, (int64_t)off, true, out);
	}
	default:
		return 1;
	}
}

int goabi_bind_string(struct usc_cache *c, const struct usc_site *site,
		      const struct usc_fetcharg *in, struct usc_fetcharg *out, unsigned max)
{
	const char *text = site->spec->text;
	const struct objfile_sym *fn = NULL;
	struct objfile *ef = NULL;
	struct fetch_insn load[2];
	int64_t idx;
	bool abi0;

	if (in->ninsn < 3 || in->insn[0].op != FOP_ARG || in->insn[1].op != FOP_ST_STRING ||
	    in->insn[1].imm != 0 || in->insn[2].op != FOP_END)
		return 0;
	if (cache_elf(c, site->path, &ef) || !ef->is_go)
		return 0;
	if (site->func_vaddr)
		fn = objfile_func_at(ef, site->func_vaddr);
	abi0 = is_abi0(ef, fn);
	idx = in->insn[0].imm;
	if (!abi0 && (idx < 1 || idx > 8)) {
		log_error("%s: %.*s: a Go string takes two words, its length after its pointer: "
			  "$arg1 to $arg8", text, (int)in->len, text + in->pos);
		return -ERANGE;
	}
	if (max < 2) {
		log_error("%s: more than %d arguments", text, USC_MAX_ARGS);
		return -E2BIG;
	}
	for (int k = 0; k < 2; k++)
		load[k] = abi0 ? (struct fetch_insn){.op = FOP_STACK, .imm = idx + k} :
				 (struct fetch_insn){.op = FOP_REG, .reg = go_regs[idx - 1 + k]};
	out[0] = *in;
	out[1] = *in;
	if ((size_t)snprintf(out[0].name, sizeof(out[0].name), "%s__len", in->name) >=
	    sizeof(out[0].name)) {
		log_error("%s: '%s' is too long a name for a Go string", text, in->name);
		return -ENAMETOOLONG;
	}
	out[0].show = USC_SHOW_GO_PART;
	out[0].type = USC_T_U64;
	memset(out[0].insn, 0, sizeof(out[0].insn));
	out[0].insn[0] = load[1];
	out[0].insn[1] = (struct fetch_insn){.op = FOP_ST_RAW, .size = 8};
	out[0].ninsn = 3;
	out[1].show = USC_SHOW_GO_STRING;
	out[1].type = USC_T_STRING;
	out[1].go_type = "string";
	out[1].go_parts = 1;
	memset(out[1].insn, 0, sizeof(out[1].insn));
	out[1].insn[0] = load[0];
	out[1].insn[1] = (struct fetch_insn){.op = FOP_ST_BYTES, .size = 1, .imm = USC_GO_STR_MAX};
	out[1].ninsn = 3;
	return 2;
}

/* ---- the stack check ---------------------------------------------------------
 *
 * Go 1.17+ on amd64 (cmd/internal/obj/x86's stacksplit), R14 = g, its
 * stackguard0 at 0x10, by frame size:
 *   small:  cmp rsp, [r14+0x10]                    49 3b 66 10
 *   big:    lea r12, [rsp-N]                       4c 8d 64 24 d8 | 4c 8d a4 24 d32
 *           cmp r12, [r14+0x10]                    4d 3b 66 10
 *   huge:   mov r12, rsp                           49 89 e4
 *           sub r12, N                             49 83 ec i8 | 49 81 ec i32
 *           jb  morestack (the subtraction wrapped) 72 d8 | 0f 82 d32
 *           cmp r12, [r14+0x10]                    4d 3b 66 10
 * then jbe to the morestack call at the function's end (76 d8 | 0f 86 d32). */

/* A conditional jump (short opcode op8, near 0f op32) at b[*at]: forward,
 * inside the function of size size at vaddr 0 of b? *at moved past it. */
static bool go_jcc_out(const uint8_t *b, size_t n, size_t *at, uint8_t op8, uint8_t op32,
		       uint64_t size)
{
	int64_t rel;
	size_t i = *at;

	if (i + 2 <= n && b[i] == op8) {
		rel = (int8_t)b[i + 1];
		i += 2;
	} else if (i + 6 <= n && b[i] == 0x0f && b[i + 1] == op32) {
		int32_t r;

		memcpy(&r, b + i + 2, 4);
		rel = r;
		i += 6;
	} else {
		return false;
	}
	if (rel <= 0 || (uint64_t)((int64_t)i + rel) >= size)
		return false;
	*at = i;
	return true;
}

void goabi_past_stack_check(const struct objfile *ef, const struct objfile_sym *fn,
			    uint64_t *vaddr)
{
	static const uint8_t cmp_rsp[4] = {0x49, 0x3b, 0x66, 0x10};
	static const uint8_t cmp_r12[4] = {0x4d, 0x3b, 0x66, 0x10};
	static const uint8_t mov_r12[3] = {0x49, 0x89, 0xe4};
	uint8_t b[32];
	size_t at = 0, n = sizeof(b);
	const uint8_t *cmp = cmp_r12;

	if (!ef || !ef->is_go || !fn || *vaddr != fn->vaddr || !fn->size)
		return;
	if (fn->size < n)
		n = (size_t)fn->size;
	if (objfile_read(ef, fn->vaddr, b, n))
		return;
	if (n >= 5 && b[0] == 0x4c && b[1] == 0x8d && b[2] == 0x64 && b[3] == 0x24) {
		at = 5;		/* big: lea r12, [rsp+d8] */
	} else if (n >= 8 && b[0] == 0x4c && b[1] == 0x8d && b[2] == 0xa4 && b[3] == 0x24) {
		at = 8;		/* big: lea r12, [rsp+d32] */
	} else if (n >= 3 && !memcmp(b, mov_r12, 3)) {
		at = 3;		/* huge: mov r12, rsp; sub r12, N; jb */
		if (at + 4 <= n && b[at] == 0x49 && b[at + 1] == 0x83 && b[at + 2] == 0xec)
			at += 4;
		else if (at + 7 <= n && b[at] == 0x49 && b[at + 1] == 0x81 && b[at + 2] == 0xec)
			at += 7;
		else
			return;
		if (!go_jcc_out(b, n, &at, 0x72, 0x82, fn->size))
			return;
	} else {
		cmp = cmp_rsp;	/* small */
	}
	if (at + 4 > n || memcmp(b + at, cmp, 4))
		return;
	at += 4;
	if (!go_jcc_out(b, n, &at, 0x76, 0x86, fn->size))
		return;
	*vaddr = fn->vaddr + at;
}
