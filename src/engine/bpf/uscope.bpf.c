// SPDX-License-Identifier: GPL-2.0
/* The bpf engine's one program: attached to every site, with the site's
 * index as the attach cookie, it interprets that site's fetch programs (the
 * same ones the parser, the USDT specs and the binder produce) and sends a
 * record through a ring buffer. Memory is read with bpf_probe_read_user, so
 * a bad pointer becomes a fault marker, never a crash. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "probe/fetch.h"
#include "engine/bpf/bpf_shared.h"

char LICENSE[] SEC("license") = "GPL";

/* set before load: uscope count wants the hit counts only */
const volatile __u32 count_only = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UB_MAX_SITES);
	__type(key, __u32);
	__type(value, struct ub_site);
} sites SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UB_MAX_SITES);
	__type(key, __u32);
	__type(value, struct ub_counts);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct scratch {
	__u64 regs[USC_REG_NR];	/* the context's registers, in enum usc_reg order:
				 * ctx fields can only be read at constant offsets */
	char buf[UB_REC_MAX + UB_STR_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

static __always_inline __u64 reg_value(const __u64 *regs, __u8 reg)
{
	return reg < USC_REG_NR ? regs[reg] : 0;
}

struct eval_ctx {
	const __u64 *regs;
	struct ub_site *site;
	char *buf;		/* the record being built */
	__u32 str_off;		/* where the next string goes */
	__u32 nargs;
	__u64 val;		/* the current argument's value */
	__u32 done;		/* the current argument is finished */
};

/* One step: instruction k of argument i (step = i * UB_MAX_INSN + k). A
 * bpf_loop callback, so the verifier checks it once, not once per step. */
static long eval_step(__u32 step, void *data)
{
	struct eval_ctx *c = data;
	__u32 i = step / UB_MAX_INSN, k = step % UB_MAX_INSN;
	struct ub_rec *rec = (struct ub_rec *)c->buf;
	__u64 ip = c->regs[USC_REG_IP], tmp = 0;
	struct ub_insn *in;
	struct ub_val *v;
	__u32 sz;
	long n;

	if (i >= UB_MAX_ARGS || i >= c->nargs)
		return 1;
	v = &rec->vals[i];
	if (k == 0) {
		c->val = 0;
		c->done = 0;
		v->kind = UB_INT;
		v->val = 0;
	}
	if (c->done)
		return 0;
	in = &c->site->args[i].insn[k];
	switch (in->op) {
	case FOP_END:
		goto done;
	case FOP_REG:
		c->val = reg_value(c->regs, in->reg);
		break;
	case FOP_STACK:
		if (bpf_probe_read_user(&c->val, 8, (void *)(c->regs[USC_REG_SP] + 8 * in->imm)))
			goto fault;
		break;
	case FOP_STACKP:
		c->val = c->regs[USC_REG_SP];
		break;
	case FOP_RETVAL:
		c->val = c->regs[USC_REG_AX];
		break;
	case FOP_IMM:
	case FOP_MEM:
		c->val = in->imm;
		break;
	case FOP_FOFFS:	/* as the kernel: probe address - probe offset + OFF */
		c->val = ip - c->site->offset + in->imm;
		break;
	case FOP_VADDR:	/* the module's load bias + a link-time address */
		c->val = ip - c->site->vaddr + in->imm;
		break;
	case FOP_ADD_REG:
		c->val += reg_value(c->regs, in->reg) * in->size;
		break;
	case FOP_DEREF:
		if (bpf_probe_read_user(&c->val, 8, (void *)(c->val + in->imm)))
			goto fault;
		break;
	case FOP_ST_RAW:
		break;
	case FOP_ST_MEM:
		sz = in->size;
		if (sz > 8)
			sz = 8;
		if (sz == 0 || bpf_probe_read_user(&tmp, sz, (void *)(c->val + in->imm)))
			goto fault;
		c->val = tmp;
		break;
	case FOP_COMM:
	case FOP_ST_STRING:
		if (c->str_off > UB_REC_MAX - UB_STR_MAX)
			goto fault;	/* no room left: shown as a fault */
		if (in->op == FOP_COMM) {
			if (bpf_get_current_comm(c->buf + (c->str_off & (UB_REC_MAX - 1)), 16))
				goto fault;
			n = 1;
			for (int j = 0; j < 15; j++, n++)
				if (!c->buf[(c->str_off + j) & (UB_REC_MAX - 1)])
					break;
		} else {
			n = bpf_probe_read_user_str(c->buf + (c->str_off & (UB_REC_MAX - 1)),
						    UB_STR_MAX, (void *)(c->val + in->imm));
		}
		if (n <= 0)
			goto fault;
		v->kind = UB_STR;
		v->str_off = c->str_off;
		v->str_len = n - 1;
		c->str_off += (n + 7) & ~7;
		c->done = 1;
		return 0;
	case FOP_MOD_BF:
		c->val = (c->val >> in->bf_offset) &
			 (in->bf_width >= 64 ? ~0ULL : ((1ULL << in->bf_width) - 1));
		break;
	default:
		goto fault;	/* FOP_ARG: never bound */
	}
	if (k < UB_MAX_INSN - 1)
		return 0;
done:
	v->val = c->val;
	c->done = 1;
	return 0;
fault:
	v->kind = UB_FAULT;
	c->done = 1;
	return 0;
}

SEC("uprobe")
int usc_probe(struct pt_regs *regs)
{
	__u32 id = (__u32)bpf_get_attach_cookie(regs), zero = 0, nargs;
	struct ub_counts *cnt = bpf_map_lookup_elem(&counts, &id);
	struct ub_site *site = bpf_map_lookup_elem(&sites, &id);
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	struct eval_ctx c = {};
	struct ub_rec *rec;
	__u64 pt = bpf_get_current_pid_tgid();

	if (!cnt)
		return 0;
	cnt->hits++;
	if (count_only || !site || !s)
		return 0;
	s->regs[USC_REG_AX] = regs->rax;
	s->regs[USC_REG_BX] = regs->rbx;
	s->regs[USC_REG_CX] = regs->rcx;
	s->regs[USC_REG_DX] = regs->rdx;
	s->regs[USC_REG_SI] = regs->rsi;
	s->regs[USC_REG_DI] = regs->rdi;
	s->regs[USC_REG_BP] = regs->rbp;
	s->regs[USC_REG_SP] = regs->rsp;
	s->regs[USC_REG_R8] = regs->r8;
	s->regs[USC_REG_R9] = regs->r9;
	s->regs[USC_REG_R10] = regs->r10;
	s->regs[USC_REG_R11] = regs->r11;
	s->regs[USC_REG_R12] = regs->r12;
	s->regs[USC_REG_R13] = regs->r13;
	s->regs[USC_REG_R14] = regs->r14;
	s->regs[USC_REG_R15] = regs->r15;
	s->regs[USC_REG_IP] = regs->rip;
	rec = (struct ub_rec *)s->buf;
	rec->ts = bpf_ktime_get_ns();
	rec->ip = regs->rip;
	rec->pid = pt >> 32;
	rec->tid = (__u32)pt;
	rec->site = id;
	rec->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	nargs = site->nargs;
	if (nargs > UB_MAX_ARGS)
		nargs = UB_MAX_ARGS;
	rec->nargs = nargs;
	c.regs = s->regs;
	c.site = site;
	c.buf = s->buf;
	c.str_off = sizeof(struct ub_rec);
	c.nargs = nargs;
	bpf_loop(nargs * UB_MAX_INSN, eval_step, &c, 0);
	rec->len = c.str_off;
	if (bpf_ringbuf_output(&events, s->buf, c.str_off & (UB_REC_MAX - 1), 0))
		cnt->lost++;
	return 0;
}
