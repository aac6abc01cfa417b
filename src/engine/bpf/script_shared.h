/* uscope script in the bpf engine: what the program that runs a script in
 * the kernel (script.bpf.c) and its user-space half (script.c) share.
 * Plain C types only: compiled for BPF too. */
#ifndef USC_ENGINE_BPF_SCRIPT_SHARED_H
#define USC_ENGINE_BPF_SCRIPT_SHARED_H

#include "engine/bpf/bpf_shared.h"
#include "script/prog.h"

/* A site: the probe it runs, its inputs (the fetch programs of its
 * arguments, bound: probe/fetch.h). The attach cookie is its index. */
struct bscript_site {
	unsigned long long vaddr, offset;	/* FOP_VADDR, FOP_FOFFS */
	unsigned int probe;			/* the program's probe */
	unsigned int session_site;		/* func, probe */
	unsigned int nargs;
	unsigned int pad;
	unsigned char arg_size[BPFENG_MAX_ARGS];	/* an integer's bytes (0: all 8) */
	unsigned char arg_sign[BPFENG_MAX_ARGS];
	struct bpfeng_arg args[BPFENG_MAX_ARGS];
};

/* A map's key in the kernel's maps (svals, saggs): the map, then its key's
 * bytes zero-padded to the longest key (the maps' key size, set at load). */
struct bscript_key {
	unsigned int map;
	unsigned int pad;
	unsigned char key[SCRIPT_KEY_MAX];
};

/* An output record in the ring buffer: who made it, then struct
 * script_rec and its values. */
struct bscript_out {
	unsigned long long ts;		/* CLOCK_MONOTONIC ns */
	unsigned int pid, tid;
	unsigned int site;		/* the engine's site (the attach cookie) */
	unsigned int cpu;
	char comm[16];
};

#define BSCRIPT_STEPS 65536	/* instructions a hit executes at most (bpf_loop's) */
#define BSCRIPT_INSNS 4096	/* a program's instructions, at most */
#define BSCRIPT_STRTAB 16384	/* bytes of its string table, at most */
#define BSCRIPT_VAL_MAX 2048	/* bytes of a map's value, at most */

/* The program as the kernel's maps hold it: one value each */
struct bscript_insns {
	struct script_insn i[BSCRIPT_INSNS + 4];	/* room for a masked probe's 3 */
};

struct bscript_strtab {
	char s[BSCRIPT_STRTAB];
};

struct bscript_maps {
	struct script_map m[SCRIPT_MAPS_MAX];
};

#endif
