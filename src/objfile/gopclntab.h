/* Go's function table, .gopclntab: the table the Go runtime reads to name
 * the functions of a stack trace. Every Go binary has it, stripped or not,
 * with every function's name and entry address.
 *
 * Layouts, told apart by the header's magic (little-endian; x86-64 only):
 *   0xfffffffb  Go 1.2 - 1.15  functab of (entry, _func offset) uintptr pairs;
 *                              names and _funcs relative to the table's start
 *   0xfffffffa  Go 1.16 - 1.17 a header of offsets to the name table, the
 *                              pc tables and the functab (uintptr pairs)
 *   0xfffffff0  Go 1.18 - 1.19 as 1.16, plus textStart; the functab holds
 *   0xfffffff1  Go 1.20 -      uint32 pairs, entries relative to textStart
 * The functab has one more entry than functions: the end of the last one.
 *
 * Everything is read from a caller's buffer with every offset bounded: a
 * truncated or corrupt table gives -EINVAL or fewer functions, never a read
 * outside [data, data + len). Reasons are logged with log_debug only (the
 * caller decides what a missing table means). */
#ifndef USC_OBJFILE_GOPCLNTAB_H
#define USC_OBJFILE_GOPCLNTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum gopclntab_version {
	GOPCLNTAB_12 = 12,	/* Go 1.2 - 1.15 */
	GOPCLNTAB_116 = 116,	/* Go 1.16 - 1.17 */
	GOPCLNTAB_118 = 118,	/* Go 1.18 - 1.19 */
	GOPCLNTAB_120 = 120,	/* Go 1.20 and later */
};

#define GOPCLNTAB_MAGIC_12 0xfffffffbu
#define GOPCLNTAB_MAGIC_116 0xfffffffau
#define GOPCLNTAB_MAGIC_118 0xfffffff0u
#define GOPCLNTAB_MAGIC_120 0xfffffff1u

struct gopclntab_hdr {
	unsigned version;	/* enum gopclntab_version */
	unsigned quantum;	/* pc quantum (1 on x86) */
	unsigned ptrsize;	/* 4 or 8 */
	uint64_t nfunc;
	/* 1.18+: what the functab's entries are relative to (runtime.text),
	 * as the header records it; the caller may correct it (a PIE linked
	 * by a linker that leaves relocated words 0) before reading the
	 * functions. 0 for the older layouts (absolute entries). */
	uint64_t text_start;
	size_t text_start_off;	/* 1.18+: where the header holds it, else 0 */
	/* offsets into the table */
	uint64_t funcname_off;	/* names: nameoff is relative to this */
	uint64_t pctab_off;	/* pc-value tables: pcsp is relative to this */
	uint64_t functab_off;	/* the functab; _func offsets are relative to
				   funcdata_off */
	uint64_t funcdata_off;
	uint64_t cutab_off;	/* 1.16+: each unit's file indexes (uint32s) */
	uint64_t filetab_off;	/* file names; Go 1.2: its count and offsets
				 * (0: none) */
	unsigned fieldsz;	/* size of one functab field: ptrsize, or 4 (1.18+) */
};

struct gopclntab_func {
	const char *name;	/* NUL-terminated, points into the table */
	uint64_t entry;		/* link-time address */
	uint64_t end;		/* exclusive: entry + the size Go's linker gave it */
	bool asm_abi0;		/* Go 1.18+: written in assembly (funcFlag_ASM): Go's
				 * stack-based ABI0, not the register ABIInternal */
	uint8_t funcid;		/* Go 1.18+: the runtime's funcID (0: an ordinary
				 * function; the last of its values, a wrapper) */
	/* its pc-value tables, relative to pctab_off (0: none): the stack
	 * pointer's offset from the entry's (pcsp: set only when the table
	 * covers [entry, end) exactly), the file number (pcfile), the line
	 * (pcln); and its compilation unit (1.16+: where its file numbers
	 * start in the cutab); 1.16+: where code inlined into it is (the
	 * index of its inlined call, -1 outside inlined code: pcdata 2,
	 * PCDATA_InlTreeIndex) */
	uint32_t pcsp, pcfile, pcln, cu, inltree;
};

/* Recognise and check the header of the table at data[0..len). 0, or
 * -EINVAL (not a table this reader knows, or offsets outside len). */
int gopclntab_header(const void *data, size_t len, struct gopclntab_hdr *h);

/* The functions of the table whose header is h, in address order (as the
 * table has them). A function's end is where its pc-value table for the
 * stack pointer (pcsp) ends, which is the size Go's linker gave its symbol
 * (the code without the alignment padding that follows); when that table
 * is missing or does not fit before the next function, the next function's
 * entry (the table's final entry for the last one). Functions whose _func
 * record or name is out of bounds or inconsistent are left out. Returns the
 * count with *out malloc'd (NULL for 0), or -EINVAL (entries out of order,
 * or an entry that overflows), -ENOMEM. */
ssize_t gopclntab_funcs(const void *data, size_t len, const struct gopclntab_hdr *h,
			struct gopclntab_func **out);

/* The function holding pc (entry <= pc < end): 0, or -ENOENT. */
int gopclntab_func_at(const void *data, size_t len, const struct gopclntab_hdr *h, uint64_t pc,
		      struct gopclntab_func *f);

/* A pc-value table (pcsp, pcfile, pcln) read a range at a time: the value
 * holds over [lo, hi). Every range lies in [entry, end); each step reads
 * at least two bytes of the table, so a walk of it ends. */
struct gopclntab_pcv {
	uint32_t tab;		/* the table, relative to pctab_off */
	uint64_t off;		/* the next byte (0: not started) */
	uint64_t pc, end;
	int32_t val;
	bool first;
};
void gopclntab_pcv_start(uint32_t tab, uint64_t entry, uint64_t end, struct gopclntab_pcv *it);
/* 1 and the next range, 0 at the table's end, -EINVAL: a table that is
 * cut short, or a range past end. */
int gopclntab_pcv_next(const void *data, size_t len, const struct gopclntab_hdr *h,
		       struct gopclntab_pcv *it, uint64_t *lo, uint64_t *hi, int32_t *val);
/* The value of the table at pc: 0, -ENOENT (no range holds pc), -EINVAL. */
int gopclntab_pcvalue(const void *data, size_t len, const struct gopclntab_hdr *h, uint32_t tab,
		      uint64_t entry, uint64_t end, uint64_t pc, int32_t *val);
/* The name of f's file number fileno (a pcfile value), NUL-terminated in
 * the table; NULL when the table has none. */
const char *gopclntab_file(const void *data, size_t len, const struct gopclntab_hdr *h,
			   const struct gopclntab_func *f, int32_t fileno);

#endif
