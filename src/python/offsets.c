/* The one table of CPython's structure offsets that uscope reads.
 *
 * Where the values come from, for each version:
 *   - the struct layouts of that version's headers: Include/internal/
 *     pycore_frame.h (_PyInterpreterFrame, enum _frameowner),
 *     pycore_runtime.h (_PyRuntimeState, _gilstate_runtime_state),
 *     pycore_interp.h (PyInterpreterState), Include/cpython/pystate.h
 *     (PyThreadState, _PyCFrame), cpython/code.h (PyCodeObject),
 *     cpython/unicodeobject.h (PyASCIIObject, PyCompactUnicodeObject),
 *     cpython/bytesobject.h, object.h;
 *   - checked against the DWARF of builds that have it (pahole-style
 *     `ptype /o` and offsetof on the pyenv builds 3.11.7, 3.12.1 and 3.13.0
 *     here, libpython3.X.so.1.0 with debug info), and for 3.11 against
 *     Debian's own 3.11.2 headers (libpython3.11-dev, compiled with
 *     Py_BUILD_CORE): identical, as Debian's /usr/bin/python3.11 (stripped)
 *     has no DWARF. tests/unit/test_python.c repeats the DWARF check on
 *     every entry of this table whenever such a build is installed;
 *   - 3.13 carries the same numbers in _Py_DebugOffsets at the start of
 *     _PyRuntime: debugoffs.c reads them and compares them at run time.
 * Layouts are fixed within a minor version (CPython keeps these structures
 * stable in patch releases; 3.11.2 and 3.11.7 headers agree field for
 * field), so one entry serves every 3.X.Y. Only x86-64 (LP64) is described.
 *
 * Things every entry shares:
 *   - PyObject: ob_refcnt at 0, ob_type at 8; PyVarObject: ob_size at 16;
 *     PyBytesObject: ob_shash at 24, ob_sval at 32.
 *   - PyASCIIObject: length at 16, hash at 24, state at 32, a word whose bit
 *     fields are, from bit 0: interned:2, kind:3, compact:1, ascii:1, then
 *     ready:1 (3.11) or statically_allocated:1 (3.12, 3.13).
 *   - Py_tss_t: { int _is_initialized; pthread_key_t _key; }: the key is 4
 *     bytes after the struct's start.
 *   - For py: probes: PyTupleObject.ob_item at 24, PyTypeObject.tp_name at
 *     24, an int's digits at 24 (ob_size, or 3.12's lv_tag, at 16);
 *     PyDictObject { ..., ma_used, ma_version_tag, ma_keys 32, ma_values
 *     40 }, PyDictKeysObject { dk_refcnt, dk_log2_size 8,
 *     dk_log2_index_bytes 9, dk_kind 10, dk_version, dk_usable,
 *     dk_nentries 24, dk_indices 32 } (Include/internal/pycore_dict.h: the
 *     same in 3.11 to 3.13 without free threading), its entries 24 bytes
 *     (hash, key, value) or 16 with str keys (key, value).
 */
#include "python/offsets.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "python/linetable.h"

/* What every entry has the same: the objects above ("Things every entry
 * shares"), a thread state's next, and the frame's and code object's fields
 * that no version moved. */
#define PYOFF_EVERY_VERSION						\
	.ts_next = 0x8,							\
	.fr_instr = 0x38,		/* prev_instr; instr_ptr (3.13) */	\
	.owner_generator = 1,						\
	.co_filename = 0x70,						\
	.co_name = 0x78,						\
	.co_qualname = 0x80,						\
	.co_linetable = 0x88,						\
	.ob_type = 8,							\
	.ob_size = 16,							\
	.bytes_sval = 32,						\
	.str_length = 16,						\
	.str_state = 32,						\
	.str_kind_shift = 2,						\
	.str_compact_bit = 5,						\
	.str_ascii_bit = 6,						\
	/* py: probes */						\
	.pyframe_frame = 0x18,		/* PyObject_HEAD, f_back, f_frame */	\
	.fr_localsplus = 0x48,		/* after owner (3.11: and 2 bytes of	\
					   padding) */			\
	.co_flags = 0x30,						\
	.co_localsplusnames = 0x60,					\
	.tuple_item = 0x18,						\
	.type_name = 0x18,						\
	.long_digit = 0x18,						\
	.long_size = 0x10,						\
	.dict_keys = 0x20,						\
	.dict_values = 0x28,						\
	.dk_log2_size = 0x8,						\
	.dk_log2_index_bytes = 0x9,					\
	.dk_kind = 0xa,							\
	.dk_nentries = 0x18,						\
	.dk_indices = 0x20,						\
	.dk_entry = 24,							\
	.dk_str_entry = 16

/* What 3.12 and 3.13 have the same, and 3.11 not: the frame starts with
 * f_code and previous (f_code, previous, f_funcobj, f_globals, f_builtins,
 * f_locals, frame_obj, prev_instr or instr_ptr, int stacktop, uint16_t
 * return_offset, char owner); is_entry is gone (the evaluator pushes a shim
 * frame owned by the C stack); no tstate_current (the GIL is per
 * interpreter); PyASCIIObject has no wstr, nor a ready bit (bit 7 is
 * statically_allocated). */
#define PYOFF_SINCE_3_12						\
	.rt_tstate_current = PYOFF_NONE,				\
	.fr_code = 0x0,							\
	.fr_previous = 0x8,						\
	.fr_is_entry = PYOFF_NONE,					\
	.fr_owner = 0x46,						\
	.owner_cstack = 3,						\
	.co_firstlineno = 0x44,						\
	.str_ascii_size = 40,		/* wstr is gone */		\
	.str_compact_size = 56,		/* + utf8_length, utf8 */	\
	.str_ready_bit = 0xff,						\
	/* py: probes */						\
	.fr_globals = 0x18,						\
	.co_argcount = 0x34,						\
	.co_kwonlyargcount = 0x3c,					\
	.co_nlocalsplus = 0x48

/* What 3.14 and 3.15 have the same (from their headers: 3.14.0's, and
 * Debian's 3.15.2's, libpython3.15-dev, offsetof with them): the frame
 * (f_executable a _PyStackRef, previous, f_funcobj, f_globals 0x18,
 * f_builtins, f_locals, frame_obj, instr_ptr 0x38, stackpointer,
 * return_offset 0x48, owner 0x4a, visited, localsplus 0x50); the code
 * object (as 3.13 up to _co_monitoring, then _co_unique_id,
 * _co_firsttraceable 0xc0, co_extra, co_code_adaptive 0xd0); a tuple's
 * ob_hash (ob_item at 0x20); no thread-specific key; the frame owners
 * THREAD 0, GENERATOR 1, FRAME_OBJECT 2, INTERPRETER 3 (the evaluator's
 * entry frame), and in 3.14 CSTACK 4. */
#define PYOFF_SINCE_3_14						\
	.rt_tss_key = PYOFF_NONE,					\
	.rt_tss_init = PYOFF_NONE,					\
	.rt_tstate_current = PYOFF_NONE,				\
	.is_next = PYOFF_NONE,						\
	.is_threads_head = PYOFF_NONE,					\
	.ts_next = 0x8,							\
	.ts_frame = 0x48,						\
	.cf_current_frame = PYOFF_NONE,					\
	.fr_code = 0x0,							\
	.fr_previous = 0x8,						\
	.fr_instr = 0x38,						\
	.fr_is_entry = PYOFF_NONE,					\
	.fr_owner = 0x4a,						\
	.owner_generator = 1,						\
	.owner_cstack = 3,	/* INTERPRETER and CSTACK */		\
	.co_firstlineno = 0x44,						\
	.co_filename = 0x70,						\
	.co_name = 0x78,						\
	.co_qualname = 0x80,						\
	.co_linetable = 0x88,						\
	.co_firsttraceable = 0xc0,					\
	.co_code_adaptive = 0xd0,					\
	.ob_type = 8,							\
	.ob_size = 16,							\
	.bytes_sval = 32,						\
	.str_length = 16,						\
	.str_state = 32,						\
	.str_ascii_size = 40,						\
	.str_compact_size = 56,						\
	.str_kind_shift = 2,						\
	.str_compact_bit = 5,						\
	.str_ascii_bit = 6,						\
	.str_ready_bit = 0xff,						\
	/* py: probes */						\
	.ts_c_profilefunc = PYOFF_NONE,					\
	.ts_c_profileobj = PYOFF_NONE,					\
	.pyframe_frame = 0x18,						\
	.fr_globals = 0x18,						\
	.fr_localsplus = 0x50,						\
	.co_flags = 0x30,						\
	.co_argcount = 0x34,						\
	.co_kwonlyargcount = 0x3c,					\
	.co_nlocalsplus = 0x48,						\
	.co_localsplusnames = 0x60,					\
	.tuple_item = 0x20,						\
	.type_name = 0x18,						\
	.long_digit = 0x18,						\
	.long_size = 0x10,						\
	.dict_keys = 0x20,						\
	.dict_values = 0x28,						\
	.dk_log2_size = 0x8,						\
	.dk_log2_index_bytes = 0x9,					\
	.dk_kind = 0xa,							\
	.dk_nentries = 0x18,						\
	.dk_indices = 0x20,						\
	.dk_entry = 24,							\
	.dk_str_entry = 16

/* What 3.8, 3.9 and 3.10 have the same (their headers' PyFrameObject,
 * PyThreadState, PyCodeObject, _PyRuntimeState, Objects/dict-common.h;
 * checked against the DWARF of pyenv's 3.8.18, 3.9.18 and 3.10.13 by
 * tests/unit/test_python.c): _PyRuntimeState { preinitializing,
 * preinitialized, core_initialized, initialized 0xc, _finalizing,
 * interpreters { mutex, head 0x20 } }; PyInterpreterState { next,
 * tstate_head }; PyThreadState { prev, next, interp, frame 0x18, ...,
 * tracing 0x2c, ..., c_profilefunc 0x38, c_tracefunc, c_profileobj 0x48,
 * ..., thread_id 0xb0 } (no native_thread_id); PyFrameObject {
 * PyObject_VAR_HEAD, f_back 0x18, f_code 0x20, f_builtins, f_globals
 * 0x30, ... f_lasti, f_lineno, ..., f_localsplus }; PyCodeObject {
 * PyObject_HEAD, co_argcount 0x10, co_posonlyargcount,
 * co_kwonlyargcount 0x18, co_nlocals 0x1c, co_stacksize, co_flags 0x24,
 * co_firstlineno 0x28, co_code 0x30, co_consts, co_names, co_varnames
 * 0x48, co_freevars, co_cellvars 0x58, co_cell2arg 0x60, co_filename
 * 0x68, co_name 0x70, co_lnotab or co_linetable 0x78 }: no co_qualname
 * (a function's qualified name is on the function object, which neither
 * a frame nor a profile function's arguments reach: its co_name stands
 * for it); PyASCIIObject with wstr (as 3.11); an int's ob_size the signed
 * count of its digits; a dict's keys { dk_refcnt, dk_size 8, dk_lookup,
 * dk_usable, dk_nentries 0x20, dk_indices 0x28 } with 24-byte entries. */
#define PYOFF_BEFORE_3_11						\
	.rt_interp_head = 0x20,						\
	.is_next = 0x0,							\
	.is_threads_head = 0x8,		/* tstate_head */		\
	.ts_next = 0x8,							\
	.ts_thread_id = 0xb0,						\
	.ts_native_thread_id = PYOFF_NONE,				\
	.ts_frame = 0x18,						\
	.cf_current_frame = PYOFF_NONE,					\
	.fr_code = 0x20,						\
	.fr_previous = 0x18,		/* f_back */			\
	.fr_is_entry = PYOFF_NONE,					\
	.fr_owner = PYOFF_NONE,						\
	.owner_generator = 0xff,					\
	.owner_cstack = 0xff,						\
	.co_firstlineno = 0x28,						\
	.co_filename = 0x68,						\
	.co_name = 0x70,						\
	.co_qualname = 0x70,		/* co_name */			\
	.co_linetable = 0x78,		/* co_lnotab (3.8, 3.9) */	\
	.co_firsttraceable = PYOFF_NONE,				\
	.co_code_adaptive = PYOFF_NONE,					\
	.ob_type = 8,							\
	.ob_size = 16,							\
	.bytes_sval = 32,						\
	.str_length = 16,						\
	.str_state = 32,						\
	.str_ascii_size = 48,						\
	.str_compact_size = 72,						\
	.str_kind_shift = 2,						\
	.str_compact_bit = 5,						\
	.str_ascii_bit = 6,						\
	.str_ready_bit = 7,						\
	.rt_initialized = 0xc,						\
	.ts_c_profilefunc = 0x38,					\
	.ts_c_profileobj = 0x48,					\
	.pyframe_frame = PYOFF_NONE,	/* the frame is the frame object */ \
	.fr_globals = 0x30,						\
	.co_flags = 0x24,						\
	.co_argcount = 0x10,						\
	.co_kwonlyargcount = 0x18,					\
	.co_nlocalsplus = 0x1c,		/* co_nlocals */		\
	.co_localsplusnames = 0x48,	/* co_varnames */		\
	.tuple_item = 0x18,						\
	.type_name = 0x18,						\
	.long_digit = 0x18,						\
	.long_size = 0x10,						\
	.dict_keys = 0x20,						\
	.dict_values = 0x28,						\
	.dk_log2_size = 0x8,		/* dk_size (PYOFF_DICT_OLD) */	\
	.dk_log2_index_bytes = PYOFF_NONE,				\
	.dk_kind = PYOFF_NONE,						\
	.dk_nentries = 0x20,						\
	.dk_indices = 0x28,						\
	.dk_entry = 24,							\
	.dk_str_entry = 24,						\
	.ts_tracing = 0x2c,						\
	.co_code = 0x30,						\
	.co_cellvars = 0x58,						\
	.co_cell2arg = 0x60

static const struct python_offsets table[] = {
	{
		/* 3.8: gilstate at 0x550 { check_enabled, tstate_current 0x558,
		 * getframe, autoInterpreterState, autoTSSkey 0x570 };
		 * PyInterpreterState.eval_frame 0x238; PyThreadState.use_tracing
		 * 0x30; PyFrameObject.f_lasti 0x68 (bytes), f_localsplus 0x168 */
		.version = 0x03080000,
		.flags = PYOFF_FRAMEOBJ | PYOFF_DICT_OLD | PYOFF_EVAL_38,
		.rt_tss_key = 0x570 + 4,
		.rt_tss_init = 0x570,
		.rt_tstate_current = 0x558,
		.fr_instr = 0x68,
		.fr_localsplus = 0x168,
		.ts_use_tracing = 0x30,
		.is_eval_frame = 0x238,
		.lt_format = PYLT_LNOTAB,
		PYOFF_BEFORE_3_11,
	},
	{
		/* 3.9: gilstate at 0x230 (getframe is gone): tstate_current
		 * 0x238, autoTSSkey 0x248; _PyInterpreterState_SetEvalFrameFunc
		 * and _PyEval_SetProfile; f_lasti 0x68, f_localsplus 0x168 */
		.version = 0x03090000,
		.flags = PYOFF_FRAMEOBJ | PYOFF_DICT_OLD,
		.rt_tss_key = 0x248 + 4,
		.rt_tss_init = 0x248,
		.rt_tstate_current = 0x238,
		.fr_instr = 0x68,
		.fr_localsplus = 0x168,
		.lt_format = PYLT_LNOTAB,
		PYOFF_BEFORE_3_11,
	},
	{
		/* 3.10: as 3.9, but f_stacktop gave way to f_stackdepth and
		 * f_executing to f_state: f_lasti 0x60 (code units),
		 * f_localsplus 0x160; co_linetable (PEP 626) for co_lnotab */
		.version = 0x030a0000,
		.flags = PYOFF_FRAMEOBJ | PYOFF_DICT_OLD | PYOFF_LASTI_UNITS,
		.rt_tss_key = 0x248 + 4,
		.rt_tss_init = 0x248,
		.rt_tstate_current = 0x238,
		.fr_instr = 0x60,
		.fr_localsplus = 0x160,
		.lt_format = PYLT_310,
		PYOFF_BEFORE_3_11,
	},
	{
		/* 3.11 */
		.version = 0x030b0000,
		.flags = PYOFF_CFRAME | PYOFF_IS_ENTRY,
		/* _PyRuntimeState: 5 ints, _finalizing, then interpreters
		 * { mutex, head, main, next_id } from 0x20; gilstate at 0x238
		 * { check_enabled, tstate_current 0x8, autoInterpreterState,
		 * autoTSSkey 0x18 } */
		.rt_interp_head = 0x28,
		.rt_tss_key = 0x238 + 0x18 + 4,
		.rt_tss_init = 0x238 + 0x18,
		.rt_tstate_current = 0x238 + 0x8,
		.is_next = 0x0,
		.is_threads_head = 0x10,	/* threads { next_unique_id, head } */
		/* PyThreadState: prev, next, interp, 7 ints, cframe at 0x38 */
		.ts_thread_id = 0x98,
		.ts_native_thread_id = 0xa0,
		.ts_frame = 0x38,
		.cf_current_frame = 0x8,	/* after uint8_t use_tracing */
		/* f_func, f_globals, f_builtins, f_locals, f_code, frame_obj,
		 * previous, prev_instr, int stacktop, bool is_entry, char owner */
		.fr_code = 0x20,
		.fr_previous = 0x30,
		.fr_is_entry = 0x44,
		.fr_owner = 0x45,
		.owner_cstack = 0xff,
		.co_firstlineno = 0x48,
		.co_firsttraceable = 0xa8,
		.co_code_adaptive = 0xb8,
		.str_ascii_size = 48,		/* ..., state, wchar_t *wstr */
		.str_compact_size = 72,		/* + utf8_length, utf8, wstr_length */
		.str_ready_bit = 7,
		/* py: probes */
		.rt_initialized = 0x10,		/* after _initialized, preinitializing,
						   preinitialized, core_initialized */
		.ts_c_profilefunc = 0x40,	/* after the 7 ints: c_profilefunc,
						   c_tracefunc, c_profileobj */
		.ts_c_profileobj = 0x50,
		.fr_globals = 0x8,
		.co_argcount = 0x38,
		.co_kwonlyargcount = 0x40,
		.co_nlocalsplus = 0x4c,
		.ts_tracing = 0x2c,		/* after recursion_*, stackcheck_counter */
		PYOFF_EVERY_VERSION,
	},
	{
		/* 3.12: autoTSSkey moved out of gilstate; the frame, the code
		 * object and strings as PYOFF_SINCE_3_12 says */
		.version = 0x030c0000,
		.flags = PYOFF_CFRAME | PYOFF_LONG_TAG,
		.rt_interp_head = 0x28,
		.rt_tss_key = 0x608 + 4,
		.rt_tss_init = 0x608,
		.is_next = 0x0,
		.is_threads_head = 0x48,
		.ts_thread_id = 0x88,
		.ts_native_thread_id = 0x90,
		.ts_frame = 0x38,
		.cf_current_frame = 0x0,	/* use_tracing is gone */
		.co_firsttraceable = 0xb0,
		.co_code_adaptive = 0xc0,
		/* py: probes */
		.rt_initialized = 0x10,
		.ts_c_profilefunc = 0x40,
		.ts_c_profileobj = 0x50,
		PYOFF_EVERY_VERSION,
		PYOFF_SINCE_3_12,
	},
	{
		/* 3.13: no _PyCFrame (the thread state holds current_frame);
		 * f_executable for f_code, instr_ptr for prev_instr (the
		 * instruction the frame is at, LASTI = instr_ptr - code) */
		.version = 0x030d0000,
		.flags = PYOFF_LONG_TAG,
		.rt_interp_head = 0x278,
		.rt_tss_key = 0x870 + 4,
		.rt_tss_init = 0x870,
		.is_next = 0x1c60,
		.is_threads_head = 0x1cb0,
		.ts_thread_id = 0x98,
		.ts_native_thread_id = 0xa0,
		.ts_frame = 0x48,
		.cf_current_frame = PYOFF_NONE,
		.co_firsttraceable = 0xb8,
		.co_code_adaptive = 0xc8,
		/* py: probes */
		.rt_initialized = 0x258,	/* after _Py_DebugOffsets */
		.ts_c_profilefunc = 0x50,	/* _status grew, and py_recursion_* */
		.ts_c_profileobj = 0x60,
		PYOFF_EVERY_VERSION,
		PYOFF_SINCE_3_12,
	},
	{
		/* 3.14, from v3.14.0's headers (Include/internal/
		 * pycore_runtime_structs.h, pycore_interp_structs.h,
		 * pycore_interpframe_structs.h, cpython/code.h, pycore_tuple.h)
		 * and checked, where they overlap, against the
		 * _Py_DebugOffsets of the process at run time (debugoffs.c:
		 * they win; one that disagrees is refused). PYOFF_NONE where
		 * the debug offsets give the value and the headers here were
		 * not read for it (the interpreter state's next, threads.head).
		 *   - no thread-specific key: a thread's state is found in its
		 *     interpreter's thread list (walk.h's tfind);
		 *   - _PyRuntimeState: _Py_DebugOffsets is 95 words (0x2f8
		 *     bytes), then _initialized, preinitializing,
		 *     preinitialized, core_initialized, initialized 0x308,
		 *     _finalizing, _finalizing_id, interpreters { mutex, head
		 *     0x328 };
		 *   - the frame: f_executable (a _PyStackRef), previous,
		 *     f_funcobj, f_globals 0x18, f_builtins, f_locals,
		 *     frame_obj, instr_ptr 0x38, stackpointer, return_offset
		 *     0x48, owner 0x4a, visited, localsplus 0x50 (_PyStackRefs);
		 *     owners THREAD 0, GENERATOR 1, FRAME_OBJECT 2, INTERPRETER
		 *     3 (the evaluator's entry frame), CSTACK 4;
		 *   - PyCodeObject: as 3.13 up to _co_monitoring, then
		 *     _co_unique_id, _co_firsttraceable 0xc0, co_extra,
		 *     co_code_adaptive 0xd0;
		 *   - PyTupleObject gained ob_hash: ob_item at 0x20;
		 *   - the thread state's c_profilefunc is not read: py: probes
		 *     go through sys.monitoring. */
		.version = 0x030e0000,
		.flags = PYOFF_LONG_TAG | PYOFF_STACKREF,
		.rt_interp_head = 0x328,
		.rt_initialized = 0x308,
		.ts_thread_id = 0x98,
		.ts_native_thread_id = 0xa0,
		PYOFF_SINCE_3_14,
	},
	{
		/* 3.15, from Debian's 3.15.2 headers (libpython3.15-dev:
		 * offsetof compiled with them) and checked against its
		 * _Py_DebugOffsets at run time as 3.14's: _Py_DebugOffsets
		 * is 111 words (0x378 bytes), then _initialized ..., so
		 * initialized 0x388, _finalizing 0x390, interpreters.head
		 * 0x3a8; PyThreadState gained base_frame,
		 * last_profiled_frame and its seq before thread_id (0xb0)
		 * and native_thread_id (0xb8); FRAME_OWNED_BY_CSTACK is gone
		 * (INTERPRETER, 3, is the last) */
		.version = 0x030f0000,
		.flags = PYOFF_LONG_TAG | PYOFF_STACKREF,
		.rt_interp_head = 0x3a8,
		.rt_initialized = 0x388,
		.ts_thread_id = 0xb0,
		.ts_native_thread_id = 0xb8,
		PYOFF_SINCE_3_14,
	},
};

/* glibc 2.36 (Debian 12), x86-64: struct pthread's specific_1stblock and
 * specific, from libc6-dbg's DWARF (`ptype /o struct pthread`). Other glibc
 * versions (a container's) are not checked: the thread list
 * (python_find_tstate) needs no glibc layout. */
static const struct python_glibc glibc = {
	.specific_1stblock = 0x310,
	.specific = 0x510,
	.stackblock = 0x690,	/* glibc 2.36, x86-64 (Debian 12) */
	.stackblock_size = 0x698,
	.guardsize = 0x6a0,
};

const struct python_offsets *python_offsets_for(uint32_t version)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if ((version & 0xffff0000u) == table[i].version)
			return &table[i];
	return NULL;
}

const struct python_glibc *python_glibc_offsets(void)
{
	return &glibc;
}

const struct python_glibc *python_glibc_for(const char *version)
{
	return version && !strcmp(version, "2.36") ? &glibc : NULL;
}

bool python_eval_sees_every_call(uint32_t v)
{
	/* (3.11 always has its Py_Version: the micro version is known) */
	return (v >> 16) != 0x030b || v >= 0x030b0400;
}

void python_version_str(uint32_t v, char *buf, unsigned len)
{
	unsigned level = (v >> 4) & 0xf, serial = v & 0xf;
	const char *tag = level == 0xa ? "a" : level == 0xb ? "b" : level == 0xc ? "rc" : "";

	if (!(v & 0xffff))	/* the minor version only (3.8 to 3.10: no Py_Version) */
		snprintf(buf, len, "%u.%u", v >> 24, (v >> 16) & 0xff);
	else if (level == 0xf || !*tag)
		snprintf(buf, len, "%u.%u.%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff);
	else
		snprintf(buf, len, "%u.%u.%u%s%u", v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff,
			 tag, serial);
}
