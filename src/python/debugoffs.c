/* _Py_DebugOffsets (debugoffs.h): where its words are, for each minor
 * version whose layout uscope has read, and what they become.
 *
 * Layouts, from CPython's headers: 3.13's Include/internal/pycore_runtime.h
 * (checked word for word against the block of the 3.13.0 build here, 73
 * words), 3.14's Include/internal/pycore_debug_offsets.h at v3.14.0 (95
 * words: see the layout). Each structure's
 * section starts with its size; the reader checks every offset it takes
 * against that size, and PyObject's section (size 16, ob_type at 8) as an
 * anchor that the words are where it expects them. */
#include "python/debugoffs.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"

struct pd_spec {
	const char *name;
	uint8_t width;		/* bytes read at the offset; 0: a size, or an
				   array at the structure's end */
	size_t field;		/* offsetof(struct python_offsets, ...) */
};

#define F(n, w, f) {n, w, offsetof(struct python_offsets, f)}
static const struct pd_spec specs[PD_N] = {
	[PD_RT_INTERP_HEAD] = F("runtime_state.interpreters_head", 8, rt_interp_head),
	[PD_IS_NEXT] = F("interpreter_state.next", 8, is_next),
	[PD_IS_THREADS_HEAD] = F("interpreter_state.threads_head", 8, is_threads_head),
	[PD_TS_NEXT] = F("thread_state.next", 8, ts_next),
	[PD_TS_CURRENT_FRAME] = F("thread_state.current_frame", 8, ts_frame),
	[PD_TS_THREAD_ID] = F("thread_state.thread_id", 8, ts_thread_id),
	[PD_TS_NATIVE_THREAD_ID] = F("thread_state.native_thread_id", 8, ts_native_thread_id),
	[PD_FR_PREVIOUS] = F("interpreter_frame.previous", 8, fr_previous),
	[PD_FR_EXECUTABLE] = F("interpreter_frame.executable", 8, fr_code),
	[PD_FR_INSTR_PTR] = F("interpreter_frame.instr_ptr", 8, fr_instr),
	[PD_FR_LOCALSPLUS] = F("interpreter_frame.localsplus", 0, fr_localsplus),
	[PD_FR_OWNER] = F("interpreter_frame.owner", 1, fr_owner),
	[PD_CO_FILENAME] = F("code_object.filename", 8, co_filename),
	[PD_CO_NAME] = F("code_object.name", 8, co_name),
	[PD_CO_QUALNAME] = F("code_object.qualname", 8, co_qualname),
	[PD_CO_LINETABLE] = F("code_object.linetable", 8, co_linetable),
	[PD_CO_FIRSTLINENO] = F("code_object.firstlineno", 4, co_firstlineno),
	[PD_CO_ARGCOUNT] = F("code_object.argcount", 4, co_argcount),
	[PD_CO_LOCALSPLUSNAMES] = F("code_object.localsplusnames", 8, co_localsplusnames),
	[PD_CO_CODE_ADAPTIVE] = F("code_object.co_code_adaptive", 0, co_code_adaptive),
	[PD_OB_TYPE] = F("pyobject.ob_type", 8, ob_type),
	[PD_TP_NAME] = F("type_object.tp_name", 8, type_name),
	[PD_TUPLE_ITEM] = F("tuple_object.ob_item", 0, tuple_item),
	[PD_DICT_KEYS] = F("dict_object.ma_keys", 8, dict_keys),
	[PD_DICT_VALUES] = F("dict_object.ma_values", 8, dict_values),
	[PD_LONG_TAG] = F("long_object.lv_tag", 8, long_size),
	[PD_LONG_DIGIT] = F("long_object.ob_digit", 0, long_digit),
	[PD_BYTES_SIZE] = F("bytes_object.ob_size", 8, ob_size),
	[PD_BYTES_SVAL] = F("bytes_object.ob_sval", 0, bytes_sval),
	[PD_STR_STATE] = F("unicode_object.state", 4, str_state),
	[PD_STR_LENGTH] = F("unicode_object.length", 8, str_length),
	[PD_STR_ASCII_SIZE] = F("unicode_object.asciiobject_size", 0, str_ascii_size),
};

/* A field's word, and the word of its structure's size. */
struct pd_word {
	uint8_t word, size;
};

struct pd_layout {
	uint32_t minor;		/* major << 24 | minor << 16 */
	unsigned words;		/* the block's size, in words */
	uint8_t pyobject;	/* the word of pyobject.size */
	struct pd_word w[PD_N];
};

static const struct pd_layout layouts[] = {
	{
		.minor = 0x030d0000, .words = 73, .pyobject = 44,
		.w = {
			[PD_RT_INTERP_HEAD] = {5, 3},
			[PD_IS_NEXT] = {8, 6}, [PD_IS_THREADS_HEAD] = {9, 6},
			[PD_TS_NEXT] = {21, 19}, [PD_TS_CURRENT_FRAME] = {23, 19},
			[PD_TS_THREAD_ID] = {24, 19}, [PD_TS_NATIVE_THREAD_ID] = {25, 19},
			[PD_FR_PREVIOUS] = {29, 28}, [PD_FR_EXECUTABLE] = {30, 28},
			[PD_FR_INSTR_PTR] = {31, 28}, [PD_FR_LOCALSPLUS] = {32, 28},
			[PD_FR_OWNER] = {33, 28},
			[PD_CO_FILENAME] = {35, 34}, [PD_CO_NAME] = {36, 34},
			[PD_CO_QUALNAME] = {37, 34}, [PD_CO_LINETABLE] = {38, 34},
			[PD_CO_FIRSTLINENO] = {39, 34}, [PD_CO_ARGCOUNT] = {40, 34},
			[PD_CO_LOCALSPLUSNAMES] = {41, 34}, [PD_CO_CODE_ADAPTIVE] = {43, 34},
			[PD_OB_TYPE] = {45, 44}, [PD_TP_NAME] = {47, 46},
			[PD_TUPLE_ITEM] = {51, 50},
			[PD_DICT_KEYS] = {57, 56}, [PD_DICT_VALUES] = {58, 56},
			[PD_LONG_TAG] = {62, 61}, [PD_LONG_DIGIT] = {63, 61},
			[PD_BYTES_SIZE] = {65, 64}, [PD_BYTES_SVAL] = {66, 64},
			[PD_STR_STATE] = {68, 67}, [PD_STR_LENGTH] = {69, 67},
			[PD_STR_ASCII_SIZE] = {70, 67},
		},
	},
	{
		/* 3.14.0 (Include/internal/pycore_debug_offsets.h at v3.14.0,
		 * 95 words; _PyRuntime.interpreters.head at 0x328 right after
		 * them agrees): interpreter_state + threads_main,
		 * code_object_generation, tlbc_generation; interpreter_frame +
		 * stackpointer, tlbc_index; code_object + co_tlbc; set_object
		 * after list_object; gen_object, llist_node and
		 * debugger_support at the end */
		.minor = 0x030e0000, .words = 95, .pyobject = 50,
		.w = {
			[PD_RT_INTERP_HEAD] = {5, 3},
			[PD_IS_NEXT] = {8, 6}, [PD_IS_THREADS_HEAD] = {9, 6},
			[PD_TS_NEXT] = {24, 22}, [PD_TS_CURRENT_FRAME] = {26, 22},
			[PD_TS_THREAD_ID] = {27, 22}, [PD_TS_NATIVE_THREAD_ID] = {28, 22},
			[PD_FR_PREVIOUS] = {32, 31}, [PD_FR_EXECUTABLE] = {33, 31},
			[PD_FR_INSTR_PTR] = {34, 31}, [PD_FR_LOCALSPLUS] = {35, 31},
			[PD_FR_OWNER] = {36, 31},
			[PD_CO_FILENAME] = {40, 39}, [PD_CO_NAME] = {41, 39},
			[PD_CO_QUALNAME] = {42, 39}, [PD_CO_LINETABLE] = {43, 39},
			[PD_CO_FIRSTLINENO] = {44, 39}, [PD_CO_ARGCOUNT] = {45, 39},
			[PD_CO_LOCALSPLUSNAMES] = {46, 39}, [PD_CO_CODE_ADAPTIVE] = {48, 39},
			[PD_OB_TYPE] = {51, 50}, [PD_TP_NAME] = {53, 52},
			[PD_TUPLE_ITEM] = {57, 56},
			[PD_DICT_KEYS] = {67, 66}, [PD_DICT_VALUES] = {68, 66},
			[PD_LONG_TAG] = {72, 71}, [PD_LONG_DIGIT] = {73, 71},
			[PD_BYTES_SIZE] = {75, 74}, [PD_BYTES_SVAL] = {76, 74},
			[PD_STR_STATE] = {78, 77}, [PD_STR_LENGTH] = {79, 77},
			[PD_STR_ASCII_SIZE] = {80, 77},
		},
	},
	{
		/* 3.15 (Include/internal/pycore_debug_offsets.h of Debian's
		 * 3.15.2, libpython3.15-dev; its words counted by offsetof
		 * with that header, 111 words): 3.14's, with thread_state +
		 * base_frame, last_profiled_frame, last_profiled_frame_seq
		 * (before thread_id) and holds_gil, gil_requested,
		 * current_exception, exc_state; an err_stackitem section;
		 * type_object + tp_basicsize, tp_dictoffset; a
		 * heap_type_object section; unicode_object +
		 * compactunicodeobject_size; gc + frame, generation_stats */
		.minor = 0x030f0000, .words = 111, .pyobject = 58,
		.w = {
			[PD_RT_INTERP_HEAD] = {5, 3},
			[PD_IS_NEXT] = {8, 6}, [PD_IS_THREADS_HEAD] = {9, 6},
			[PD_TS_NEXT] = {24, 22}, [PD_TS_CURRENT_FRAME] = {26, 22},
			[PD_TS_THREAD_ID] = {30, 22}, [PD_TS_NATIVE_THREAD_ID] = {31, 22},
			[PD_FR_PREVIOUS] = {40, 39}, [PD_FR_EXECUTABLE] = {41, 39},
			[PD_FR_INSTR_PTR] = {42, 39}, [PD_FR_LOCALSPLUS] = {43, 39},
			[PD_FR_OWNER] = {44, 39},
			[PD_CO_FILENAME] = {48, 47}, [PD_CO_NAME] = {49, 47},
			[PD_CO_QUALNAME] = {50, 47}, [PD_CO_LINETABLE] = {51, 47},
			[PD_CO_FIRSTLINENO] = {52, 47}, [PD_CO_ARGCOUNT] = {53, 47},
			[PD_CO_LOCALSPLUSNAMES] = {54, 47}, [PD_CO_CODE_ADAPTIVE] = {56, 47},
			[PD_OB_TYPE] = {59, 58}, [PD_TP_NAME] = {61, 60},
			[PD_TUPLE_ITEM] = {69, 68},
			[PD_DICT_KEYS] = {79, 78}, [PD_DICT_VALUES] = {80, 78},
			[PD_LONG_TAG] = {84, 83}, [PD_LONG_DIGIT] = {85, 83},
			[PD_BYTES_SIZE] = {87, 86}, [PD_BYTES_SVAL] = {88, 86},
			[PD_STR_STATE] = {90, 89}, [PD_STR_LENGTH] = {91, 89},
			[PD_STR_ASCII_SIZE] = {92, 89},
		},
	},
};

/* A structure bigger than this is not one uscope reads (_PyRuntimeState is
 * the largest: 0x452b8 bytes in 3.13). */
#define PD_SIZE_MAX (1u << 24)

const char *python_debugoffs_name(enum python_dbg_field f)
{
	return f < PD_N ? specs[f].name : "?";
}

static uint64_t word(const uint8_t *b, unsigned i)
{
	uint64_t w;

	memcpy(&w, b + 8 * (size_t)i, 8);
	return w;
}

static void vstr(uint32_t v, char *buf, unsigned len)
{
	python_version_str(v, buf, len);
}

int python_debugoffs_parse(const void *buf, size_t len, struct python_debugoffs *d)
{
	const uint8_t *b = buf;
	const struct pd_layout *l = NULL;
	uint64_t ver;
	char v[32];

	memset(d, 0, sizeof(*d));
	if (!b || len < 24 || memcmp(b, "xdebugpy", 8))
		return -EINVAL;
	ver = word(b, 1);
	if (ver >> 32 || (ver >> 24) != 3) {
		log_error("python: _Py_DebugOffsets says version %#llx, not a CPython 3",
			  (unsigned long long)ver);
		return -EPROTO;
	}
	d->version = (uint32_t)ver;
	vstr(d->version, v, sizeof(v));
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if ((d->version & 0xffff0000u) == layouts[i].minor)
			l = &layouts[i];
	if (!l) {
		log_error("python: CPython %s: uscope does not know the layout of its "
			  "_Py_DebugOffsets (it reads those of 3.13, 3.14 and 3.15)", v);
		return -ENOTSUP;
	}
	if (len < (size_t)l->words * 8) {
		log_error("python: CPython %s: _Py_DebugOffsets is %zu bytes, fewer than the %u of "
			  "its layout", v, len, l->words * 8);
		return -EPROTO;
	}
	if (word(b, 2)) {
		log_error("python: CPython %s is a free-threaded build (no GIL): its objects have "
			  "another layout, which uscope does not read", v);
		return -EPROTO;
	}
	/* runtime_state { size, finalizing, interpreters_head } in both */
	d->rt_finalizing = word(b, 4);
	if (!word(b, 3) || word(b, 3) > PD_SIZE_MAX || d->rt_finalizing >= word(b, 3)) {
		log_error("python: CPython %s: _Py_DebugOffsets.runtime_state.finalizing is %#llx, "
			  "outside its structure: not a layout uscope reads", v,
			  (unsigned long long)d->rt_finalizing);
		return -EPROTO;
	}
	if (word(b, l->pyobject) != 16 || word(b, l->pyobject + 1) != 8) {
		log_error("python: CPython %s: _Py_DebugOffsets are not laid out as uscope reads "
			  "them (pyobject is not {16, 8})", v);
		return -EPROTO;
	}
	for (int f = 0; f < PD_N; f++) {
		uint64_t size = word(b, l->w[f].size), o = word(b, l->w[f].word);

		if (!size || size > PD_SIZE_MAX || o > size || size - o < specs[f].width ||
		    o >= PYOFF_NONE) {
			log_error("python: CPython %s: _Py_DebugOffsets.%s is %#llx, outside its "
				  "structure (%#llx bytes): not a layout uscope reads", v,
				  specs[f].name, (unsigned long long)o, (unsigned long long)size);
			return -EPROTO;
		}
		d->val[f] = o;
	}
	return 0;
}

static uint16_t get16(const struct python_offsets *off, size_t field)
{
	uint16_t v;

	memcpy(&v, (const uint8_t *)off + field, 2);
	return v;
}

/* What the entries of 3.13 and 3.14 have that the debug offsets do not
 * carry, next to what they carry, the same in both (debugoffs.h). */
static const struct pd_rel {
	const char *name;
	size_t field;		/* offsetof(struct python_offsets, ...) */
	int next_to;		/* enum python_dbg_field, or PD_N: finalizing */
	int delta;		/* the field's offset less next_to's */
} rels[] = {
	{"_PyRuntimeState.initialized", offsetof(struct python_offsets, rt_initialized), PD_N, -8},
	{"_PyInterpreterFrame.f_globals", offsetof(struct python_offsets, fr_globals),
	 PD_FR_PREVIOUS, 16},
	{"PyCodeObject.co_flags", offsetof(struct python_offsets, co_flags), PD_CO_ARGCOUNT, -4},
	{"PyCodeObject.co_kwonlyargcount", offsetof(struct python_offsets, co_kwonlyargcount),
	 PD_CO_ARGCOUNT, 8},
	{"PyCodeObject.co_nlocalsplus", offsetof(struct python_offsets, co_nlocalsplus),
	 PD_CO_FIRSTLINENO, 4},
	{"PyCodeObject._co_firsttraceable", offsetof(struct python_offsets, co_firsttraceable),
	 PD_CO_CODE_ADAPTIVE, -16},
};

int python_debugoffs_check(const struct python_debugoffs *d, const struct python_offsets *off,
			   int loud)
{
	if ((d->version & 0xffff0000u) != off->version) {
		log_error("python: _Py_DebugOffsets says version %#x, not the %u.%u of the table",
			  d->version, off->version >> 24, (off->version >> 16) & 0xff);
		return -EPROTO;
	}
	for (int f = 0; f < PD_N; f++) {
		uint16_t mine = get16(off, specs[f].field);

		/* (PYOFF_NONE: an entry that takes this one from them) */
		if (mine != PYOFF_NONE && d->val[f] != mine) {
			if (loud)
				log_error("python: _Py_DebugOffsets.%s is %#llx, uscope's table "
					  "has %#x", specs[f].name, (unsigned long long)d->val[f],
					  mine);
			else
				log_debug("python: _Py_DebugOffsets.%s is %#llx, uscope's table "
					  "has %#x", specs[f].name, (unsigned long long)d->val[f],
					  mine);
			return -EPROTO;
		}
	}
	for (size_t i = 0; off->version >= 0x030d0000 && i < sizeof(rels) / sizeof(rels[0]); i++) {
		const struct pd_rel *r = &rels[i];
		uint16_t mine = get16(off, r->field);
		uint64_t at = r->next_to == PD_N ? d->rt_finalizing : d->val[r->next_to];
		const char *by = r->next_to == PD_N ? "runtime_state.finalizing" :
				 specs[r->next_to].name;

		if (mine != PYOFF_NONE && at + (uint64_t)(int64_t)r->delta != mine) {
			if (loud)
				log_error("python: _Py_DebugOffsets.%s is %#llx, which puts %s at "
					  "%#llx; uscope's table has %#x", by,
					  (unsigned long long)at, r->name,
					  (unsigned long long)(at + (uint64_t)(int64_t)r->delta), mine);
			else
				log_debug("python: _Py_DebugOffsets.%s is %#llx, which puts %s at "
					  "%#llx; uscope's table has %#x", by,
					  (unsigned long long)at, r->name,
					  (unsigned long long)(at + (uint64_t)(int64_t)r->delta), mine);
			return -EPROTO;
		}
	}
	return 0;
}

int python_debugoffs_apply(const struct python_debugoffs *d, const struct python_offsets *base,
			   struct python_offsets *out)
{
	char v[32];

	if (!base || (base->version & 0xffff0000u) != (d->version & 0xffff0000u)) {
		vstr(d->version, v, sizeof(v));
		log_error("python: CPython %s: uscope's frame walker does not know how to walk "
			  "this version", v);
		return -ENOTSUP;
	}
	/* the walker reads a frame's first PYTHON_FRAME_HDR bytes at once */
	for (int f = PD_FR_PREVIOUS; f <= PD_FR_OWNER; f++)
		if (f != PD_FR_LOCALSPLUS && d->val[f] + specs[f].width > PYTHON_FRAME_HDR) {
			vstr(d->version, v, sizeof(v));
			log_error("python: CPython %s: _Py_DebugOffsets.%s is %#llx, beyond the "
				  "%u bytes of a frame uscope's walker reads", v, specs[f].name,
				  (unsigned long long)d->val[f], PYTHON_FRAME_HDR);
			return -ENOTSUP;
		}
	*out = *base;
	for (int f = 0; f < PD_N; f++) {
		uint16_t w = (uint16_t)d->val[f];

		memcpy((uint8_t *)out + specs[f].field, &w, 2);
	}
	/* PyCompactUnicodeObject: PyASCIIObject, then utf8_length and utf8
	 * (3.12 on) */
	if (out->str_compact_size == PYOFF_NONE)
		out->str_compact_size = (uint16_t)(out->str_ascii_size + 16);
	return 0;
}

const char *python_offsets_missing(const struct python_offsets *off)
{
	static const struct {
		const char *name;
		size_t field;
	} need[] = {
		{"_PyRuntime.initialized", offsetof(struct python_offsets, rt_initialized)},
		{"PyCodeObject._co_firsttraceable",
		 offsetof(struct python_offsets, co_firsttraceable)},
		{"_PyInterpreterFrame.f_globals", offsetof(struct python_offsets, fr_globals)},
		{"PyCodeObject.co_flags", offsetof(struct python_offsets, co_flags)},
	};

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (get16(off, need[i].field) == PYOFF_NONE)
			return need[i].name;
	return NULL;
}

/* The table's check, for callers with the bytes only (offsets.h). */
int python_offsets_check_debug(const struct python_offsets *off, const void *rt, unsigned len)
{
	struct python_debugoffs d;
	int err = python_debugoffs_parse(rt, len, &d);

	if (err == -EINVAL)
		log_debug("python: no _Py_DebugOffsets cookie at the start of _PyRuntime");
	if (err)
		return err == -ENOTSUP ? -EPROTO : err;
	return python_debugoffs_check(&d, off, 1);
}
