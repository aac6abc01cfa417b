/* Where CPython keeps what uscope reads: one table of structure offsets per
 * supported minor version (offsets.c says where each value comes from).
 *
 * struct python_offsets is plain data, pointer-free and fixed-width: uscope
 * fills it from the table and may copy it as is into the inject agent and a
 * bpf map, where the frame walker (walk.h) reads it. Every offset is from
 * the start of its structure, in bytes. A field a version does not have is
 * PYOFF_NONE. */
#ifndef USC_PYTHON_OFFSETS_H
#define USC_PYTHON_OFFSETS_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 uint8_t;
typedef __u16 uint16_t;
typedef __s16 int16_t;
typedef __u32 uint32_t;
typedef __s32 int32_t;
typedef __u64 uint64_t;
#else
#include <stdint.h>
#endif

#define PYOFF_NONE 0xffff

/* How many bytes of an _PyInterpreterFrame the walker reads in one go: its
 * "specials" up to and including owner, in every supported version (3.14's
 * owner is at 0x4a, after stackpointer and return_offset). A PyFrameObject
 * (3.8 to 3.10) is read a field at a time. */
#define PYTHON_FRAME_HDR 80

/* python_offsets.flags */
enum python_off_flags {
	/* the thread state points to a _PyCFrame that holds current_frame
	 * (3.11, 3.12); without it the thread state holds current_frame
	 * itself (3.13) */
	PYOFF_CFRAME = 1 << 0,
	/* frames carry is_entry (3.11); without it the evaluator marks its
	 * entry with a shim frame owned by the C stack (3.12, 3.13) */
	PYOFF_IS_ENTRY = 1 << 1,
	/* an int's size and sign are in lv_tag, ndigits << 3 | sign (3.12,
	 * 3.13); without it ob_size is the signed count of digits (3.11) */
	PYOFF_LONG_TAG = 1 << 2,
	/* f_executable is a _PyStackRef, a pointer tagged in its low bits
	 * (3.14): the walker masks them */
	PYOFF_STACKREF = 1 << 3,
	/* 3.8 to 3.10: a frame is a PyFrameObject, linked by f_back: its
	 * f_lasti an int (fr_instr), no owner, and each frame run by a
	 * _PyEval_EvalFrameDefault call of its own (every one an entry);
	 * a code object has co_name (co_qualname is it), co_varnames
	 * (co_localsplusnames), co_nlocals (co_nlocalsplus), and its line
	 * table in the format lt_format says */
	PYOFF_FRAMEOBJ = 1 << 4,
	/* 3.10: f_lasti counts code units (2 bytes); before, bytes */
	PYOFF_LASTI_UNITS = 1 << 5,
	/* 3.8 to 3.10: PyDictKeysObject { dk_refcnt, dk_size (dk_log2_size
	 * is its offset), dk_lookup, dk_usable, dk_nentries, dk_indices }:
	 * the indices 1, 2, 4 or 8 bytes each by dk_size, the entries all
	 * (hash, key, value) */
	PYOFF_DICT_OLD = 1 << 6,
	/* 3.8: the frame evaluator is PyInterpreterState.eval_frame
	 * (is_eval_frame), called (frame, throwflag), without the thread
	 * state; no _PyEval_SetProfile (a thread state's profile function
	 * is its c_profilefunc and use_tracing) */
	PYOFF_EVAL_38 = 1 << 7,
};

struct python_offsets {
	uint32_t version;		/* major << 24 | minor << 16, as PY_VERSION_HEX */
	uint16_t flags;			/* enum python_off_flags */

	/* _PyRuntime (exported data) */
	uint16_t rt_interp_head;	/* interpreters.head */
	uint16_t rt_tss_key;		/* the pthread_key_t of the thread-specific
					   PyThreadState: gilstate.autoTSSkey._key
					   (3.11), autoTSSkey._key (3.12, 3.13);
					   PYOFF_NONE (3.14, or the debug offsets
					   forced): a thread's state is found in
					   its interpreter's thread list */
	uint16_t rt_tss_init;		/* ... its Py_tss_t._is_initialized */
	uint16_t rt_tstate_current;	/* gilstate.tstate_current: the thread that
					   holds the GIL (3.11 only) */
	/* PyInterpreterState */
	uint16_t is_next;		/* next interpreter */
	uint16_t is_threads_head;	/* threads.head */
	/* PyThreadState */
	uint16_t ts_next;
	uint16_t ts_thread_id;		/* pthread_t of its thread */
	uint16_t ts_native_thread_id;	/* its TID */
	uint16_t ts_frame;		/* cframe (PYOFF_CFRAME), else current_frame */
	uint16_t cf_current_frame;	/* _PyCFrame.current_frame (PYOFF_CFRAME) */
	/* _PyInterpreterFrame */
	uint16_t fr_code;		/* f_code; f_executable (3.13) */
	uint16_t fr_previous;
	uint16_t fr_instr;		/* prev_instr; instr_ptr (3.13): the instruction
					   the frame is at, as its line is computed */
	uint16_t fr_is_entry;		/* is_entry, a byte (PYOFF_IS_ENTRY) */
	uint16_t fr_owner;		/* owner, a byte */
	uint8_t owner_generator;	/* FRAME_OWNED_BY_GENERATOR */
	uint8_t owner_cstack;		/* FRAME_OWNED_BY_CSTACK (3.14: _INTERPRETER,
					   its entry frame): the walker skips this
					   owner and the ones above it; 0xff: none */
	/* PyCodeObject */
	uint16_t co_firstlineno;	/* int */
	uint16_t co_filename;		/* str */
	uint16_t co_name;		/* str */
	uint16_t co_qualname;		/* str */
	uint16_t co_linetable;		/* bytes: the location table */
	uint16_t co_firsttraceable;	/* int _co_firsttraceable: code units before
					   the first traceable instruction */
	uint16_t co_code_adaptive;	/* the instructions, inline */
	/* PyObject, PyVarObject */
	uint16_t ob_type;
	uint16_t ob_size;
	/* PyBytesObject */
	uint16_t bytes_sval;		/* ob_sval */
	/* PyUnicodeObject: a compact string's characters follow its struct:
	 * PyASCIIObject when state.ascii, else PyCompactUnicodeObject */
	uint16_t str_length;		/* length, in code points */
	uint16_t str_state;		/* state: a 32-bit word of bit fields */
	uint16_t str_ascii_size;	/* sizeof(PyASCIIObject) */
	uint16_t str_compact_size;	/* sizeof(PyCompactUnicodeObject) */
	uint8_t str_kind_shift;		/* state.kind: 3 bits: 1, 2 or 4 bytes a char */
	uint8_t str_compact_bit;	/* state.compact */
	uint8_t str_ascii_bit;		/* state.ascii */
	uint8_t str_ready_bit;		/* state.ready (3.11), 0xff when none */

	/* What py: probes read besides (the inject agent's profile function,
	 * src/engine/inject/agent/python.c), and what they set */
	uint16_t rt_initialized;	/* _PyRuntimeState.initialized: int */
	uint16_t ts_c_profilefunc;	/* PyThreadState.c_profilefunc */
	uint16_t ts_c_profileobj;	/* ... c_profileobj */
	uint16_t pyframe_frame;		/* PyFrameObject.f_frame: its _PyInterpreterFrame */
	uint16_t fr_globals;		/* _PyInterpreterFrame.f_globals (a dict) */
	uint16_t fr_localsplus;		/* localsplus: the arguments first */
	uint16_t co_flags;		/* int: CO_VARARGS 4, CO_VARKEYWORDS 8 */
	uint16_t co_argcount;		/* int, positional-only ones included */
	uint16_t co_kwonlyargcount;	/* int */
	uint16_t co_nlocalsplus;	/* int */
	uint16_t co_localsplusnames;	/* tuple of str: the arguments' names first */
	uint16_t tuple_item;		/* PyTupleObject.ob_item */
	uint16_t type_name;		/* PyTypeObject.tp_name: const char * */
	uint16_t long_digit;		/* PyLongObject's digits (30 bits in a uint32_t) */
	uint16_t long_size;		/* ob_size, or lv_tag (PYOFF_LONG_TAG) */
	uint16_t dict_keys;		/* PyDictObject.ma_keys */
	uint16_t dict_values;		/* ma_values: not NULL for a split table */
	uint16_t dk_log2_size;		/* PyDictKeysObject: uint8_t */
	uint16_t dk_log2_index_bytes;	/* uint8_t */
	uint16_t dk_kind;		/* uint8_t: DICT_KEYS_GENERAL 0, else str keys */
	uint16_t dk_nentries;		/* Py_ssize_t */
	uint16_t dk_indices;		/* the indices, then the entries */
	uint8_t dk_entry;		/* sizeof(PyDictKeyEntry): hash, key, value */
	uint8_t dk_str_entry;		/* sizeof(PyDictUnicodeEntry): key, value */

	/* 3.8 to 3.11 (PYOFF_FRAMEOBJ, 3.11's frame evaluator): where other
	 * versions have no such field, 0 (flags say whether it is read) */
	uint16_t ts_tracing;		/* PyThreadState.tracing: int, above 0 in a
					   trace or profile function (3.8 to 3.11) */
	uint16_t ts_use_tracing;	/* PyThreadState.use_tracing (PYOFF_EVAL_38) */
	uint16_t is_eval_frame;		/* PyInterpreterState.eval_frame (PYOFF_EVAL_38) */
	uint16_t co_code;		/* co_code: the instructions' bytes object */
	uint16_t co_cellvars;		/* tuple: cells, an argument's among them */
	uint16_t co_cell2arg;		/* Py_ssize_t *: the argument a cell is made of */
	uint8_t lt_format;		/* enum python_lt_format (linetable.h) */
	uint8_t pad_end[3];
};

/* glibc's struct pthread, for the thread-specific PyThreadState: the thread
 * pointer (%fs base) is the thread's struct pthread; a key below
 * PTHREAD_KEY_2NDLEVEL_SIZE (32) has its {seq, data} pair in
 * specific_1stblock, a larger one in the block specific[key / 32] points
 * to. */
struct python_glibc {
	uint16_t specific_1stblock;
	uint16_t specific;
	/* struct pthread's stackblock, stackblock_size, guardsize (0 for the
	 * main thread's): checked against the stack pointer where read */
	uint16_t stackblock, stackblock_size, guardsize;
};

#ifndef __bpf__
#include <stdbool.h>

/* The table's entry for a version (Py_Version, or any PY_VERSION_HEX of that
 * minor version), or NULL: uscope reads 3.11, 3.12, 3.13 and 3.14 (whose
 * entry is only walked with the process's own _Py_DebugOffsets over it:
 * detect.c). */
const struct python_offsets *python_offsets_for(uint32_t version);

/* glibc's layout (2.36, Debian 12; see offsets.c). */
const struct python_glibc *python_glibc_offsets(void);
/* The layout of the glibc whose release is version ("2.36"), or NULL: one
 * uscope has not read. */
const struct python_glibc *python_glibc_for(const char *version);

/* "3.11.2", "3.12.0rc1": PY_VERSION_HEX as Python prints it. */
void python_version_str(uint32_t version, char *buf, unsigned len);

/* Does a PEP 523 frame evaluator see every call of a Python function on
 * this version (3.8 to 3.11, the versions py: probes count through one)?
 * Not on 3.11.0 to 3.11.3: a subscript specialized for a class whose
 * __getitem__ is a Python function (BINARY_SUBSCR_GETITEM) pushes its
 * frame inline, without the evaluator (CPython gh-104405, fixed in
 * 3.11.4); Debian 12's python3.11 is 3.11.2. 3.8 to 3.10 push no frame
 * inline. */
bool python_eval_sees_every_call(uint32_t version);

/* 3.13 keeps a copy of its own offsets at the start of _PyRuntime
 * (_Py_DebugOffsets). Check the ones the table has against those bytes (len
 * of them, read from the file or the process): 0, or -EPROTO with the first
 * difference logged (a 3.13 build this table does not describe: a
 * free-threaded one, or a patch release that moved a field), or -EINVAL
 * when the bytes are not debug offsets (no "xdebugpy" cookie). */
int python_offsets_check_debug(const struct python_offsets *off, const void *rt, unsigned len);
#endif

#endif
