/* The probe part of a trampoline: save the registers below the red zone,
 * call the agent with them and the site, restore them. A count-only probe
 * is one increment of a per-CPU counter instead: in a restartable sequence
 * where the thread has an rseq area, else locked. A site that
 * aggregates integers from registers calls the agent's fast path first,
 * which keeps the registers itself, and the full call only when it asks;
 * a site that follows objects (objtrace) tests the set's filter inline
 * first, with no call at all.
 *
 * A probe that calls no agent when it runs (count-only, objtrace's test)
 * first tests whether the tracer has died, one load and a branch: then it
 * calls the agent, which lets go, or passes through once that is done.
 *
 * The flags are saved only where they may be live: not at a function's entry
 * nor at a return site, where the calling convention leaves them dead. The
 * agent is compiled with general registers only, so no vector state needs
 * saving. */
#include "engine/inject/tramp.h"

#include <errno.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "engine/inject/inject_shared.h"

struct emit {
	uint8_t *out;
	size_t len, cap;
	uint64_t at;
	int err;
};

static void emit_req(struct emit *e, ZydisEncoderRequest *req)
{
	ZyanUSize n = e->cap - e->len;

	if (e->err)
		return;
	req->machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	if (ZYAN_FAILED(ZydisEncoderEncodeInstructionAbsolute(req, e->out + e->len, &n,
							       e->at + e->len))) {
		e->err = -EINVAL;
		return;
	}
	e->len += n;
}

static ZydisEncoderRequest req0(ZydisMnemonic m)
{
	ZydisEncoderRequest r;

	memset(&r, 0, sizeof(r));
	r.mnemonic = m;
	return r;
}

static void op_reg(ZydisEncoderRequest *r, ZydisRegister reg)
{
	ZydisEncoderOperand *o = &r->operands[r->operand_count++];

	o->type = ZYDIS_OPERAND_TYPE_REGISTER;
	o->reg.value = reg;
}

static void op_mem(ZydisEncoderRequest *r, ZydisRegister base, int64_t disp, uint16_t size)
{
	ZydisEncoderOperand *o = &r->operands[r->operand_count++];

	o->type = ZYDIS_OPERAND_TYPE_MEMORY;
	o->mem.base = base;
	o->mem.displacement = disp;
	o->mem.size = size;
}

static void op_imm(ZydisEncoderRequest *r, int64_t imm)
{
	ZydisEncoderOperand *o = &r->operands[r->operand_count++];

	o->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	o->imm.s = imm;
}

static void emit_rr(struct emit *e, ZydisMnemonic m, ZydisRegister a, ZydisRegister b)
{
	ZydisEncoderRequest r = req0(m);

	op_reg(&r, a);
	op_reg(&r, b);
	emit_req(e, &r);
}

static void emit_ri(struct emit *e, ZydisMnemonic m, ZydisRegister a, int64_t imm)
{
	ZydisEncoderRequest r = req0(m);

	op_reg(&r, a);
	op_imm(&r, imm);
	emit_req(e, &r);
}

/* m reg, [rsp + disp] (mov: a load; lea: an address) */
static void emit_rm(struct emit *e, ZydisMnemonic m, ZydisRegister reg, int32_t disp)
{
	ZydisEncoderRequest r = req0(m);

	op_reg(&r, reg);
	op_mem(&r, ZYDIS_REGISTER_RSP, disp, 8);
	emit_req(e, &r);
}

/* lea rsp, [rsp + d]: moves the stack pointer without touching the flags */
static void emit_adjust_sp(struct emit *e, int32_t d)
{
	emit_rm(e, ZYDIS_MNEMONIC_LEA, ZYDIS_REGISTER_RSP, d);
}

static void emit_store(struct emit *e, int32_t disp, ZydisRegister reg)
{
	ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_MOV);

	op_mem(&r, ZYDIS_REGISTER_RSP, disp, 8);
	op_reg(&r, reg);
	emit_req(e, &r);
}

static void emit_r(struct emit *e, ZydisMnemonic m, ZydisRegister a)
{
	ZydisEncoderRequest r = req0(m);

	op_reg(&r, a);
	emit_req(e, &r);
}

static void emit_plain(struct emit *e, ZydisMnemonic m)
{
	ZydisEncoderRequest r = req0(m);

	emit_req(e, &r);
}

/* enum usc_reg order */
static const ZydisRegister gpr[USC_REG_NR] = {
	ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX,
	ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSP,
	ZYDIS_REGISTER_R8, ZYDIS_REGISTER_R9, ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11,
	ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R14, ZYDIS_REGISTER_R15,
	ZYDIS_REGISTER_NONE,
};

#define RED_ZONE 128

static size_t emit_branch(struct emit *e, ZydisMnemonic m);
static void patch_branch(struct emit *e, size_t rel_at);
static void emit_call_agent(struct emit *e, const struct tramp_spec *s);

/* test dword [reg + 0], imm (or cmp) */
static void emit_mem_imm(struct emit *e, ZydisMnemonic m, ZydisRegister reg, int64_t imm)
{
	ZydisEncoderRequest r = req0(m);
	ZydisEncoderOperand *o = &r.operands[r.operand_count++];

	o->type = ZYDIS_OPERAND_TYPE_MEMORY;
	o->mem.base = reg;
	o->mem.size = 4;
	op_imm(&r, imm);
	emit_req(e, &r);
}

/* The tracer has died: with reg loaded with the owner word's address,
 * jump to the returned branch when INJ_OWNER_DIED is set. */
static size_t emit_died(struct emit *e, const struct tramp_spec *s, ZydisRegister reg)
{
	emit_ri(e, ZYDIS_MNEMONIC_MOV, reg, (int64_t)s->owner);
	emit_mem_imm(e, ZYDIS_MNEMONIC_TEST, reg, INJ_OWNER_DIED);
	return emit_branch(e, ZYDIS_MNEMONIC_JNZ);
}

/* A stub's entry: below the red zone, the flags where they may be live,
 * then regs[0..n) pushed in that order. */
static void emit_enter(struct emit *e, const struct tramp_spec *s, const ZydisRegister *regs,
		       size_t n)
{
	emit_adjust_sp(e, -RED_ZONE);
	if (s->save_flags)
		emit_plain(e, ZYDIS_MNEMONIC_PUSHFQ);
	for (size_t i = 0; i < n; i++)
		emit_r(e, ZYDIS_MNEMONIC_PUSH, regs[i]);
}

/* regs[n-1..0] popped: emit_enter's pushes undone (pops keep the flags). */
static void emit_pops(struct emit *e, const ZydisRegister *regs, size_t n)
{
	for (size_t i = n; i-- > 0;)
		emit_r(e, ZYDIS_MNEMONIC_POP, regs[i]);
}

/* emit_enter undone: its registers, the flags, the red zone. */
static void emit_leave(struct emit *e, const struct tramp_spec *s, const ZydisRegister *regs,
		       size_t n)
{
	emit_pops(e, regs, n);
	if (s->save_flags)
		emit_plain(e, ZYDIS_MNEMONIC_POPFQ);
	emit_adjust_sp(e, RED_ZONE);
}

/* op fs:[disp] (a thread's struct rseq), size bytes */
static void op_fs(ZydisEncoderRequest *r, uint32_t disp, uint16_t size)
{
	ZydisEncoderOperand *o = &r->operands[r->operand_count++];

	r->prefixes |= ZYDIS_ATTRIB_HAS_SEGMENT_FS;
	o->type = ZYDIS_OPERAND_TYPE_MEMORY;
	o->mem.displacement = disp;
	o->mem.size = size;
}

/* eax = the thread's CPU as rseq says it (rseq_cpu_off set) or rdpid */
static void emit_cpu(struct emit *e, const struct tramp_spec *s)
{
	if (s->rseq_cpu_off) {
		ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_MOV);

		op_reg(&r, ZYDIS_REGISTER_EAX);
		op_fs(&r, s->rseq_cpu_off, 4);
		emit_req(e, &r);
	} else {
		emit_r(e, ZYDIS_MNEMONIC_RDPID, ZYDIS_REGISTER_RAX);
	}
}

/* inc qword [counter + eax * stride], eax the CPU (locked or not) */
static void emit_inc(struct emit *e, const struct tramp_spec *s, bool lock)
{
	ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_IMUL);

	op_reg(&r, ZYDIS_REGISTER_RAX);
	op_reg(&r, ZYDIS_REGISTER_RAX);
	op_imm(&r, s->stride);
	emit_req(e, &r);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RCX, (int64_t)s->counter);
	r = req0(ZYDIS_MNEMONIC_INC);
	r.prefixes = lock ? ZYDIS_ATTRIB_HAS_LOCK : 0;
	{
		ZydisEncoderOperand *o = &r.operands[r.operand_count++];

		o->type = ZYDIS_OPERAND_TYPE_MEMORY;
		o->mem.base = ZYDIS_REGISTER_RCX;
		o->mem.index = ZYDIS_REGISTER_RAX;
		o->mem.scale = 1;
		o->mem.size = 8;
	}
	emit_req(e, &r);
}

/* mov qword fs:[rseq_cs], 0 */
static void emit_cs_clear(struct emit *e, uint32_t cs_off)
{
	ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_MOV);

	op_fs(&r, cs_off, 8);
	op_imm(&r, 0);
	emit_req(e, &r);
}

static void emit_jmp_to(struct emit *e, size_t to)
{
	ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_JMP);
	ZydisEncoderOperand *o = &r.operands[r.operand_count++];

	o->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	o->imm.s = (int64_t)(e->at + to);
	r.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	r.branch_width = ZYDIS_BRANCH_WIDTH_32;
	emit_req(e, &r);
}

static void emit_bytes(struct emit *e, const void *b, size_t n)
{
	if (e->err || e->cap - e->len < n) {
		e->err = e->err ? e->err : -ENOSPC;
		return;
	}
	memcpy(e->out + e->len, b, n);
	e->len += n;
}

/* The count in a restartable sequence (rseq(2), as librseq's per-CPU
 * counters): rseq_cs set to our descriptor, then [start, post): read the
 * CPU, increment its counter, without a lock. A thread preempted, migrated
 * or signalled inside is sent by the kernel to the abort handler, which
 * starts again; so a counter is only ever incremented by a thread on its
 * CPU, whole. rseq_cs is cleared after the commit: the descriptor lives in
 * the trampolines, which go at detach. Where another sequence's descriptor
 * is set (the process uses rseq itself: tcmalloc) or the CPU is past the 64
 * counters, the locked increment. Returns the branch to the end; *locked the
 * branch to the locked increment; the out-of-line part (abort handler and
 * descriptor) is emitted by emit_rseq_tail. */
struct rseq_marks {
	size_t retry, start, post, desc_imm;
};

static size_t emit_rseq_count(struct emit *e, const struct tramp_spec *s, struct rseq_marks *m,
			      size_t *to_locked, size_t *to_clear)
{
	uint32_t cs_off = s->rseq_cpu_off + 4;	/* struct rseq: cpu_id, then rseq_cs */
	ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_CMP);

	op_fs(&r, cs_off, 8);
	op_imm(&r, 0);
	emit_req(e, &r);
	*to_locked = emit_branch(e, ZYDIS_MNEMONIC_JNZ);
	m->retry = e->len;
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RCX, 0x1122334455667788LL);	/* desc */
	m->desc_imm = e->len - 8;
	r = req0(ZYDIS_MNEMONIC_MOV);
	op_fs(&r, cs_off, 8);
	op_reg(&r, ZYDIS_REGISTER_RCX);
	emit_req(e, &r);
	m->start = e->len;
	emit_cpu(e, s);
	emit_ri(e, ZYDIS_MNEMONIC_CMP, ZYDIS_REGISTER_EAX, 63);
	*to_clear = emit_branch(e, ZYDIS_MNEMONIC_JNBE);	/* unsigned: -1, -2 too */
	emit_inc(e, s, false);
	m->post = e->len;
	emit_cs_clear(e, cs_off);
	return emit_branch(e, ZYDIS_MNEMONIC_JMP);
}

static void emit_rseq_tail(struct emit *e, const struct tramp_spec *s, const struct rseq_marks *m)
{
	/* the signature before the abort handler: ud1 edi, [rip + sig] */
	const uint8_t ud1[3] = {0x0f, 0xb9, 0x3d};
	uint64_t desc[4];
	size_t abort_at;

	emit_bytes(e, ud1, 3);
	emit_bytes(e, &s->rseq_sig, 4);
	abort_at = e->len;
	emit_jmp_to(e, m->retry);	/* the kernel cleared rseq_cs */
	while (!e->err && (e->at + e->len) % 32)
		emit_bytes(e, "\xcc", 1);
	desc[0] = 0;			/* version 0, flags 0 */
	desc[1] = e->at + m->start;
	desc[2] = m->post - m->start;	/* post_commit_offset */
	desc[3] = e->at + abort_at;
	{
		uint64_t at = e->at + e->len;

		if (!e->err)
			memcpy(e->out + m->desc_imm, &at, 8);
	}
	emit_bytes(e, desc, sizeof(desc));
}

static void emit_count(struct emit *e, const struct tramp_spec *s)
{
	static const ZydisRegister saved[] = {ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RCX};
	struct rseq_marks m;
	bool rseq = s->rseq_cpu_off && s->rseq_sig;
	size_t to_died, to_pass, to_done, to_done2, to_skip = 0, to_rseq = 0, to_locked = 0,
							   to_clear = 0, to_end;

	emit_enter(e, s, saved, 2);
	to_died = emit_died(e, s, ZYDIS_REGISTER_RAX);
	if (s->self) {
		/* a forked child not followed (its self word 0) counts nothing */
		emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RAX, (int64_t)s->self);
		emit_mem_imm(e, ZYDIS_MNEMONIC_CMP, ZYDIS_REGISTER_RAX, 0);
		to_skip = emit_branch(e, ZYDIS_MNEMONIC_JZ);
	}
	if (rseq) {
		to_rseq = emit_rseq_count(e, s, &m, &to_locked, &to_clear);
		patch_branch(e, to_clear);
		emit_cs_clear(e, s->rseq_cpu_off + 4);
		patch_branch(e, to_locked);
	}
	if (s->rseq_cpu_off || s->have_rdpid) {
		emit_cpu(e, s);
		emit_ri(e, ZYDIS_MNEMONIC_AND, ZYDIS_REGISTER_EAX, 63);
	} else {
		emit_rr(e, ZYDIS_MNEMONIC_XOR, ZYDIS_REGISTER_EAX, ZYDIS_REGISTER_EAX);
	}
	emit_inc(e, s, true);
	if (rseq)
		patch_branch(e, to_rseq);
	if (s->self)
		patch_branch(e, to_skip);
	emit_leave(e, s, saved, 2);
	to_done = emit_branch(e, ZYDIS_MNEMONIC_JMP);
	/* the tracer has died: the agent lets go, or has */
	patch_branch(e, to_died);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RAX, (int64_t)s->letgo);
	emit_mem_imm(e, ZYDIS_MNEMONIC_CMP, ZYDIS_REGISTER_RAX, INJ_LETGO_AGENT);
	to_pass = emit_branch(e, ZYDIS_MNEMONIC_JNB);
	emit_leave(e, s, saved, 2);
	emit_call_agent(e, s);
	to_done2 = emit_branch(e, ZYDIS_MNEMONIC_JMP);
	patch_branch(e, to_pass);
	emit_leave(e, s, saved, 2);
	to_end = emit_branch(e, ZYDIS_MNEMONIC_JMP);
	if (rseq)
		emit_rseq_tail(e, s, &m);
	patch_branch(e, to_done);
	patch_branch(e, to_done2);
	patch_branch(e, to_end);
}

static void emit_call_agent(struct emit *e, const struct tramp_spec *s)
{
	const int32_t frame = 8 * USC_REG_NR;	/* struct inj_regs */
	int32_t above = frame + RED_ZONE + (s->save_flags ? 8 : 0);

	emit_enter(e, s, NULL, 0);
	if (s->save_flags)
		emit_plain(e, ZYDIS_MNEMONIC_CLD);	/* the agent's C code assumes DF=0 */
	emit_adjust_sp(e, -frame);
	for (int i = 0; i < USC_REG_NR; i++)
		if (gpr[i] != ZYDIS_REGISTER_NONE && gpr[i] != ZYDIS_REGISTER_RSP)
			emit_store(e, 8 * i, gpr[i]);
	/* regs[SP]: the stack pointer where the probe fired */
	emit_rm(e, ZYDIS_MNEMONIC_LEA, ZYDIS_REGISTER_RAX, above);
	emit_store(e, 8 * USC_REG_SP, ZYDIS_REGISTER_RAX);
	emit_rr(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RSP);
	emit_ri(e, ZYDIS_MNEMONIC_AND, ZYDIS_REGISTER_RSP, -16);	/* the ABI's alignment */
	emit_rr(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RBX);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RSI, (int64_t)s->site);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RAX, (int64_t)s->hit);
	emit_r(e, ZYDIS_MNEMONIC_CALL, ZYDIS_REGISTER_RAX);
	emit_rr(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RSP, ZYDIS_REGISTER_RBX);
	/* the agent keeps the callee-saved registers (the ABI): only rbx, which
	 * held the frame, and the caller-saved ones need reloading */
	for (int i = 0; i < USC_REG_NR; i++)
		if (gpr[i] != ZYDIS_REGISTER_NONE && gpr[i] != ZYDIS_REGISTER_RSP &&
		    gpr[i] != ZYDIS_REGISTER_RBP && gpr[i] != ZYDIS_REGISTER_R12 &&
		    gpr[i] != ZYDIS_REGISTER_R13 && gpr[i] != ZYDIS_REGISTER_R14 &&
		    gpr[i] != ZYDIS_REGISTER_R15)
			emit_rm(e, ZYDIS_MNEMONIC_MOV, gpr[i], 8 * i);
	emit_adjust_sp(e, frame);
	emit_leave(e, s, NULL, 0);
}

/* jcc/jmp rel32 to a target inside this trampoline, patched once known:
 * returns where its rel32 is. */
static size_t emit_branch(struct emit *e, ZydisMnemonic m)
{
	ZydisEncoderRequest r = req0(m);
	ZydisEncoderOperand *o = &r.operands[r.operand_count++];

	o->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	o->imm.s = (int64_t)(e->at + e->len + 64);	/* any near target: patched */
	r.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	r.branch_width = ZYDIS_BRANCH_WIDTH_32;
	emit_req(e, &r);
	return e->len - 4;
}

static void patch_branch(struct emit *e, size_t rel_at)
{
	int32_t rel = (int32_t)(e->len - (rel_at + 4));

	if (!e->err)
		memcpy(e->out + rel_at, &rel, 4);
}

/* The registers fast() is given: the value where the probe fired. rax, rdi,
 * rsi and rdx are on the stack by then (pushed in that order), above them
 * the flags where saved, the red zone, and the word the probe's stack
 * pointer points at. */
static void emit_fast_arg(struct emit *e, const struct tramp_spec *s, ZydisRegister dst,
			  uint8_t reg)
{
	static const struct {
		uint8_t reg;
		int32_t disp;
	} pushed[] = {{USC_REG_DX, 0}, {USC_REG_SI, 8}, {USC_REG_DI, 16}, {USC_REG_AX, 24}};

	if (reg == TRAMP_FAST_RETADDR) {
		emit_rm(e, ZYDIS_MNEMONIC_MOV, dst, 32 + (s->save_flags ? 8 : 0) + RED_ZONE);
		return;
	}
	if (reg >= USC_REG_NR || gpr[reg] == ZYDIS_REGISTER_NONE) {
		emit_rr(e, ZYDIS_MNEMONIC_XOR, dst, dst);
		return;
	}
	for (size_t i = 0; i < sizeof(pushed) / sizeof(pushed[0]); i++)
		if (pushed[i].reg == reg) {
			emit_rm(e, ZYDIS_MNEMONIC_MOV, dst, pushed[i].disp);
			return;
		}
	emit_rr(e, ZYDIS_MNEMONIC_MOV, dst, gpr[reg]);
}

/* The fast path: fast(site, a, b) keeps every register but the flags and
 * rax, its result; when it says no, the full call. */
static void emit_call_fast(struct emit *e, const struct tramp_spec *s)
{
	static const ZydisRegister saved[] = {ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RDI,
					      ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDX};
	size_t to_slow, to_done;

	emit_enter(e, s, saved, 4);
	emit_fast_arg(e, s, ZYDIS_REGISTER_RSI, s->fast_a);
	emit_fast_arg(e, s, ZYDIS_REGISTER_RDX, s->fast_b);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RDI, (int64_t)s->site);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RAX, (int64_t)s->fast);
	if (s->save_flags)
		emit_plain(e, ZYDIS_MNEMONIC_CLD);
	emit_r(e, ZYDIS_MNEMONIC_CALL, ZYDIS_REGISTER_RAX);
	emit_rr(e, ZYDIS_MNEMONIC_TEST, ZYDIS_REGISTER_EAX, ZYDIS_REGISTER_EAX);
	/* pops and lea keep the flags */
	emit_pops(e, saved, 4);
	to_slow = emit_branch(e, ZYDIS_MNEMONIC_JNZ);
	emit_leave(e, s, NULL, 0);
	to_done = emit_branch(e, ZYDIS_MNEMONIC_JMP);
	patch_branch(e, to_slow);
	emit_leave(e, s, NULL, 0);
	emit_call_agent(e, s);
	patch_branch(e, to_done);
}

/* objtrace: the set's filter tested here, with no call: a counter of the
 * filter (engine/inject/objset.h) per argument register, at the hash of
 * its value; a call whose registers all find 0 passes no followed object,
 * and that is the whole hit. Otherwise the full call decides. Saves rax,
 * r10 and r11, and the flags where they may be live. */
static void emit_objtest(struct emit *e, const struct tramp_spec *s)
{
	static const ZydisRegister args[] = {ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RSI,
					     ZYDIS_REGISTER_RDX, ZYDIS_REGISTER_RCX,
					     ZYDIS_REGISTER_R8, ZYDIS_REGISTER_R9};
	static const ZydisRegister saved[] = {ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_R10,
					      ZYDIS_REGISTER_R11};
	size_t to_maybe[6], to_done, to_died;

	emit_enter(e, s, saved, 3);
	to_died = emit_died(e, s, ZYDIS_REGISTER_R10);	/* the agent lets go */
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_RAX, (int64_t)0x9e3779b97f4a7c15ULL);
	emit_ri(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_R10, (int64_t)s->obj_filter);
	for (size_t i = 0; i < 6; i++) {
		ZydisEncoderRequest r = req0(ZYDIS_MNEMONIC_CMP);
		ZydisEncoderOperand *o = &r.operands[r.operand_count++];

		to_maybe[i] = SIZE_MAX;
		if (!(s->obj_regs >> i & 1))
			continue;	/* not a parameter that can hold one */
		emit_rr(e, ZYDIS_MNEMONIC_MOV, ZYDIS_REGISTER_R11, args[i]);
		emit_rr(e, ZYDIS_MNEMONIC_IMUL, ZYDIS_REGISTER_R11, ZYDIS_REGISTER_RAX);
		emit_ri(e, ZYDIS_MNEMONIC_SHR, ZYDIS_REGISTER_R11, s->obj_shift);
		/* cmp word [r10 + r11 * 2], 0 */
		o->type = ZYDIS_OPERAND_TYPE_MEMORY;
		o->mem.base = ZYDIS_REGISTER_R10;
		o->mem.index = ZYDIS_REGISTER_R11;
		o->mem.scale = 2;
		o->mem.size = 2;
		op_imm(&r, 0);
		emit_req(e, &r);
		to_maybe[i] = emit_branch(e, ZYDIS_MNEMONIC_JNZ);
	}
	emit_leave(e, s, saved, 3);
	to_done = emit_branch(e, ZYDIS_MNEMONIC_JMP);
	for (size_t i = 0; i < 6; i++)
		if (to_maybe[i] != SIZE_MAX)
			patch_branch(e, to_maybe[i]);
	patch_branch(e, to_died);
	emit_leave(e, s, saved, 3);
	emit_call_agent(e, s);
	patch_branch(e, to_done);
}

ssize_t tramp_encode_probe(const struct tramp_spec *spec, uint8_t *out, size_t cap)
{
	struct emit e = {.out = out, .cap = cap, .at = spec->probe_at};

	if (!spec->hit || !spec->owner || !spec->letgo)
		return -EINVAL;		/* every probe may call the agent */
	if (spec->counter)
		emit_count(&e, spec);
	else if (spec->obj_filter)
		emit_objtest(&e, spec);
	else if (spec->fast)
		emit_call_fast(&e, spec);
	else
		emit_call_agent(&e, spec);
	return e.err ? e.err : (ssize_t)e.len;
}
