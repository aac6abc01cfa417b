/* CPython's own description of its structures: _Py_DebugOffsets, the block
 * at the start of _PyRuntime from 3.13 on (a cookie "xdebugpy", the
 * PY_VERSION_HEX, a free-threaded flag, then per structure its size and the
 * offsets of some of its fields, all uint64_t).
 *
 * The reader takes bytes read from the file or the process, trusts none of
 * them (every word is within len, every offset within its structure's size,
 * every size within a bound), and knows where the words are for the minor
 * versions whose layout it has read (3.13, 3.14). uscope then checks them
 * against its table (offsets.c), or takes them where the table has no entry
 * or where USCOPE_PY_DEBUG_OFFSETS=1 asks for them. */
#ifndef USC_PYTHON_DEBUGOFFS_H
#define USC_PYTHON_DEBUGOFFS_H

#include <stddef.h>
#include <stdint.h>

#include "python/offsets.h"

/* Bytes to read at _PyRuntime: the largest layout the reader knows. */
#define PYTHON_DEBUGOFFS_MAX 888	/* 3.15's 111 words */

/* The fields uscope reads, by the name CPython gives them. */
enum python_dbg_field {
	PD_RT_INTERP_HEAD, PD_IS_NEXT, PD_IS_THREADS_HEAD,
	PD_TS_NEXT, PD_TS_CURRENT_FRAME, PD_TS_THREAD_ID, PD_TS_NATIVE_THREAD_ID,
	PD_FR_PREVIOUS, PD_FR_EXECUTABLE, PD_FR_INSTR_PTR, PD_FR_LOCALSPLUS, PD_FR_OWNER,
	PD_CO_FILENAME, PD_CO_NAME, PD_CO_QUALNAME, PD_CO_LINETABLE, PD_CO_FIRSTLINENO,
	PD_CO_ARGCOUNT, PD_CO_LOCALSPLUSNAMES, PD_CO_CODE_ADAPTIVE,
	PD_OB_TYPE, PD_TP_NAME, PD_TUPLE_ITEM, PD_DICT_KEYS, PD_DICT_VALUES,
	PD_LONG_TAG, PD_LONG_DIGIT, PD_BYTES_SIZE, PD_BYTES_SVAL,
	PD_STR_STATE, PD_STR_LENGTH, PD_STR_ASCII_SIZE,
	PD_N
};

struct python_debugoffs {
	uint32_t version;		/* PY_VERSION_HEX */
	uint64_t val[PD_N];		/* each within its structure's size */
	uint64_t rt_finalizing;		/* runtime_state.finalizing: only checked
					   against (what precedes it) */
};

/* The name of a field, "thread_state.current_frame". */
const char *python_debugoffs_name(enum python_dbg_field f);

/* Parse len bytes: 0; -EINVAL when they are not debug offsets (too short for
 * the cookie and version, or no cookie: not logged); -EPROTO for a block
 * uscope does not understand (a free-threaded build, a size or offset out
 * of bounds, fewer bytes than its layout: one line logged); -ENOTSUP for a
 * minor version whose layout the reader does not know (logged). */
int python_debugoffs_parse(const void *buf, size_t len, struct python_debugoffs *d);

/* The table's entry against them: 0, or -EPROTO with the first difference
 * logged (level error when loud, else debug). A field the entry has as
 * PYOFF_NONE is theirs to give (3.14's entry), not compared. Of the fields
 * they do not carry, those py: probes read are checked where a neighbour
 * they carry puts them (3.13 on: _PyRuntimeState.initialized 8 bytes before
 * _finalizing, f_globals 16 after previous, co_flags 4 before co_argcount,
 * co_kwonlyargcount 8 after it, co_nlocalsplus 4 after co_firstlineno,
 * _co_firsttraceable 16 before co_code_adaptive). */
int python_debugoffs_check(const struct python_debugoffs *d, const struct python_offsets *off,
			   int loud);

/* The offsets to walk with: base (the table's entry for that minor
 * version: flags, frame owners, and what the debug offsets do not carry)
 * with the fields the debug offsets carry taken from them. 0, or -ENOTSUP
 * (logged) when the table has no entry for the version, or a frame field
 * lies beyond what the walker reads of a frame. */
int python_debugoffs_apply(const struct python_debugoffs *d, const struct python_offsets *base,
			   struct python_offsets *out);

/* NULL when off has every field the walker and py: probes read, else the
 * name of the first it lacks. (The thread-specific key is not one: without
 * it a thread's state is found in its interpreter's thread list.) */
const char *python_offsets_missing(const struct python_offsets *off);

#endif
