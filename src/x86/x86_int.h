/* Internal to src/x86: refusals with their rule, the relocator's core, and
 * the function analysis (analyze.c) that the planner (plan.c) works on. */
#ifndef USC_X86_X86_INT_H
#define USC_X86_X86_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <Zydis/Zydis.h>

#include "x86/plan.h"

/* Rule names: one string each, so refusals can be counted by rule. */
extern const char X86_R_SHORT[], X86_R_RSHORT[], X86_R_TARGET[], X86_R_TABLE[], X86_R_INSN[],
	X86_R_CALL[], X86_R_RANGE[], X86_R_NOEXEC[], X86_R_BOUNDARY[], X86_R_NOSLOT[],
	X86_R_COND_TAIL[], X86_R_NORET[];

/* A refusal: the rule and its details. */
struct refusal {
	const char *rule;
	char why[192];
};

/* Fill *rf (rule, then fmt's details) and return err. */
int x86_refuse(struct refusal *rf, int err, const char *rule, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
bool x86_decoder_init(ZydisDecoder *dec);
uint64_t x86_reg64(ZydisRegister r);
/* Instructions that end the flow and are never relocated (traps, ud2...). */
bool x86_refused_mnemonic(ZydisMnemonic m);
/* x86_relocate with the refusal's rule. */
ssize_t x86_relocate_rf(const uint8_t *code, size_t len, uint64_t from, uint64_t to,
			uint8_t *out, size_t cap, struct refusal *rf);

/* ---- the function analysis (analyze.c) ---- */

enum an_flow { FLOW_NEXT, FLOW_CALL, FLOW_END /* jmp, ret, ud2: no fall-through */ };

enum an_kind { K_OTHER, K_RET, K_JMP, K_JCC, K_IJMP, K_NOP };

struct an_insn {
	uint64_t addr;
	uint64_t target;	/* of a direct branch */
	uint8_t len;
	uint8_t flow;		/* enum an_flow */
	uint8_t region;
	uint8_t kind;		/* enum an_kind */
	bool tail;		/* K_IJMP taken for a tail call */
};

struct an_target {
	uint64_t to, from;
};

/* Every instruction of a function's regions, and every place a branch of
 * it can land. */
struct func_an {
	const struct x86_region *rg;
	size_t nrg;
	struct an_insn *in;	/* every region's instructions, in region order */
	size_t nin;
	struct an_target *tg;	/* branch targets, sorted by .to once sorted is set */
	size_t ntg, ctg;
	bool sorted;
	int unknown;		/* 0 or -ENOTSUP: a jump table could not be read */
	struct refusal unknown_rf;
	struct {
		uint64_t addr;
		unsigned esize;
		ssize_t n;	/* entries taken */
	} tables[32];		/* the jump tables read, each once */
	size_t ntables;
};

int an_build(struct func_an *a, const struct x86_region *rg, size_t nrg,
	     const struct x86_reader *rd, struct refusal *rf);
void an_free(struct func_an *a);
/* The index of the instruction at addr, or -1. */
ssize_t an_find(const struct func_an *a, uint64_t addr);
/* A branch target t with lo < t < hi, or NULL. */
const struct an_target *an_target_inside(const struct func_an *a, uint64_t lo, uint64_t hi);
bool an_has_target(const struct func_an *a, uint64_t t);
bool an_in_regions(const struct func_an *a, uint64_t t);
/* Is in[i] a return site, as an_return_sites finds them? */
bool an_is_ret_site(const struct func_an *a, size_t i);
ssize_t an_return_sites(const struct func_an *a, struct x86_ret_site **out, struct refusal *rf);

#endif
