/* What the bpf engine's kernel program and its user-space half share: the
 * per-site fetch programs (the same fetch_insn as everywhere) and the
 * record layout. Plain C types only: this is compiled for BPF too. */
#ifndef USC_ENGINE_BPF_SHARED_H
#define USC_ENGINE_BPF_SHARED_H

#define UB_MAX_SITES 4096
#define UB_MAX_ARGS 16		/* per site, the hidden return address included */
#define UB_MAX_INSN 16		/* = USC_FETCH_MAX */
#define UB_STR_MAX 128		/* bytes of one string, NUL included */
#define UB_REC_MAX 4096		/* one record, strings included */

struct ub_insn {		/* = struct fetch_insn */
	unsigned char op, size, reg, bf_width, bf_offset, pad[3];
	long long imm;
};

struct ub_arg {
	unsigned int ninsn;
	unsigned int is_string;
	struct ub_insn insn[UB_MAX_INSN];
};

struct ub_site {
	unsigned long long vaddr;	/* link-time address of the probe point */
	unsigned long long offset;	/* its file offset */
	unsigned int nargs;
	unsigned int pad;
	struct ub_arg args[UB_MAX_ARGS];
};

enum ub_kind { UB_INT = 0, UB_STR = 1, UB_FAULT = 2 };

struct ub_val {
	unsigned long long val;		/* UB_INT */
	unsigned short str_off;		/* UB_STR: from the record's start */
	unsigned short str_len;		/* without the NUL */
	unsigned char kind;
	unsigned char pad[3];
};

struct ub_rec {
	unsigned long long ts;		/* CLOCK_MONOTONIC ns */
	unsigned long long ip;		/* the probe's runtime address */
	unsigned int pid, tid;
	unsigned int site;
	unsigned int cpu;
	unsigned int nargs;
	unsigned int len;		/* bytes of the whole record */
	char comm[16];
	struct ub_val vals[UB_MAX_ARGS];
	/* strings follow */
};

struct ub_counts {
	unsigned long long hits, lost;
};

#endif
