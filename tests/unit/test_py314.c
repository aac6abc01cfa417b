/* CPython 3.14 from its own _Py_DebugOffsets, without a 3.14 build: a
 * synthetic _PyRuntime laid out as 3.14.0 lays it out (the debug offsets
 * block of 95 words at its start, written here field by field in the order
 * of 3.14.0's Include/internal/pycore_debug_offsets.h; one interpreter with
 * two thread states; frames whose f_executable is a tagged _PyStackRef,
 * 3.14's frame owners; code objects, strings and line tables). Through the
 * tracer's path (parse, check against the table's 3.14 entry, apply, the
 * thread state by TID in the thread list, walk, symbolize) the thread whose
 * TID matches gives its own frames' names, files and lines, an unknown TID
 * none; the same walker as the inject agent and the bpf program include it
 * (walk.h: word reads and a list reader of its own; one read a frame and
 * one list step a call) gives the same. Corrupt blocks are refused, never
 * read past (ASan, exact-size copies). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "python/debugoffs.h"
#include "python/frame.h"
#include "python/offsets.h"
#include "python/symbolize.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a synthetic memory ------------------------------------------------- */

#define BASE 0x7f0000400000ull
#define FAKE_BASE BASE

struct fake {
	uint8_t buf[1 << 17];
	size_t used;
	unsigned list_reads;	/* reads through the list reader */
};

#include "fakemem.h"

/* The tracer's walker: python_mem_read, a frame in one read. */
#define PYWALK_FN(name) tr_##name
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) \
	(python_mem_read((const struct python_mem *)(env), (addr), (dst), (len)) != 0)
#include "python/walk.h"

/* The agent's flavour: a frame's fields a word each, the thread lists
 * through a reader of their own. */
static int word_read(void *env, void *dst, uint64_t addr, uint32_t len)
{
	return fake_read(((const struct python_mem *)env)->ctx, addr, dst, len);
}

static int list_read(void *env, void *dst, uint64_t addr, uint32_t len)
{
	struct fake *f = ((const struct python_mem *)env)->ctx;

	f->list_reads++;
	return fake_read(f, addr, dst, len);
}

#define PYWALK_FN(name) ag_##name
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) word_read((env), (dst), (addr), (len))
#define PYWALK_LIST_READ(env, dst, addr, len) list_read((env), (dst), (addr), (len))
#define PYWALK_FIELDS
#include "python/walk.h"

/* ---- 3.14.0's _Py_DebugOffsets ------------------------------------------ */

/* Its fields in their order (after cookie, version, free_threaded): the
 * header's, transcribed here on their own, not from debugoffs.c. */
static const char *const fields_314[] = {
	"runtime_state.size", "runtime_state.finalizing", "runtime_state.interpreters_head",
	"interpreter_state.size", "interpreter_state.id", "interpreter_state.next",
	"interpreter_state.threads_head", "interpreter_state.threads_main",
	"interpreter_state.gc", "interpreter_state.imports_modules",
	"interpreter_state.sysdict", "interpreter_state.builtins", "interpreter_state.ceval_gil",
	"interpreter_state.gil_runtime_state", "interpreter_state.gil_runtime_state_enabled",
	"interpreter_state.gil_runtime_state_locked",
	"interpreter_state.gil_runtime_state_holder",
	"interpreter_state.code_object_generation", "interpreter_state.tlbc_generation",
	"thread_state.size", "thread_state.prev", "thread_state.next", "thread_state.interp",
	"thread_state.current_frame", "thread_state.thread_id", "thread_state.native_thread_id",
	"thread_state.datastack_chunk", "thread_state.status",
	"interpreter_frame.size", "interpreter_frame.previous", "interpreter_frame.executable",
	"interpreter_frame.instr_ptr", "interpreter_frame.localsplus", "interpreter_frame.owner",
	"interpreter_frame.stackpointer", "interpreter_frame.tlbc_index",
	"code_object.size", "code_object.filename", "code_object.name", "code_object.qualname",
	"code_object.linetable", "code_object.firstlineno", "code_object.argcount",
	"code_object.localsplusnames", "code_object.localspluskinds",
	"code_object.co_code_adaptive", "code_object.co_tlbc",
	"pyobject.size", "pyobject.ob_type",
	"type_object.size", "type_object.tp_name", "type_object.tp_repr", "type_object.tp_flags",
	"tuple_object.size", "tuple_object.ob_item", "tuple_object.ob_size",
	"list_object.size", "list_object.ob_item", "list_object.ob_size",
	"set_object.size", "set_object.used", "set_object.table", "set_object.mask",
	"dict_object.size", "dict_object.ma_keys", "dict_object.ma_values",
	"float_object.size", "float_object.ob_fval",
	"long_object.size", "long_object.lv_tag", "long_object.ob_digit",
	"bytes_object.size", "bytes_object.ob_size", "bytes_object.ob_sval",
	"unicode_object.size", "unicode_object.state", "unicode_object.length",
	"unicode_object.asciiobject_size",
	"gc.size", "gc.collecting",
	"gen_object.size", "gen_object.gi_name", "gen_object.gi_iframe",
	"gen_object.gi_frame_state",
	"llist_node.next", "llist_node.prev",
	"debugger_support.eval_breaker", "debugger_support.remote_debugger_support",
	"debugger_support.remote_debugging_enabled", "debugger_support.debugger_pending_call",
	"debugger_support.debugger_script_path", "debugger_support.debugger_script_path_size",
};

/* A GIL build of 3.14.0 on x86-64, as its headers lay it out (the
 * interpreter state's next and threads.head: values of this image). */
static const struct {
	const char *name;
	uint64_t v;
} values_314[] = {
	{"runtime_state.size", 0x46000}, {"runtime_state.finalizing", 0x310},
	{"runtime_state.interpreters_head", 0x328},
	{"interpreter_state.size", 0x3000}, {"interpreter_state.next", 0x1c68},
	{"interpreter_state.threads_head", 0x1cb8},
	{"thread_state.size", 0x1000}, {"thread_state.next", 0x8},
	{"thread_state.current_frame", 0x48}, {"thread_state.thread_id", 0x98},
	{"thread_state.native_thread_id", 0xa0},
	{"interpreter_frame.size", 0x58}, {"interpreter_frame.previous", 0x8},
	{"interpreter_frame.executable", 0x0}, {"interpreter_frame.instr_ptr", 0x38},
	{"interpreter_frame.localsplus", 0x50}, {"interpreter_frame.owner", 0x4a},
	{"interpreter_frame.stackpointer", 0x40},
	{"code_object.size", 0xd8}, {"code_object.filename", 0x70}, {"code_object.name", 0x78},
	{"code_object.qualname", 0x80}, {"code_object.linetable", 0x88},
	{"code_object.firstlineno", 0x44}, {"code_object.argcount", 0x34},
	{"code_object.localsplusnames", 0x60}, {"code_object.co_code_adaptive", 0xd0},
	{"pyobject.size", 16}, {"pyobject.ob_type", 8},
	{"type_object.size", 0x1a0}, {"type_object.tp_name", 0x18},
	{"tuple_object.size", 0x28}, {"tuple_object.ob_item", 0x20},
	{"tuple_object.ob_size", 0x10},
	{"dict_object.size", 0x30}, {"dict_object.ma_keys", 0x20},
	{"dict_object.ma_values", 0x28},
	{"long_object.size", 0x20}, {"long_object.lv_tag", 0x10},
	{"long_object.ob_digit", 0x18},
	{"bytes_object.size", 0x28}, {"bytes_object.ob_size", 0x10},
	{"bytes_object.ob_sval", 0x20},
	{"unicode_object.size", 0x40}, {"unicode_object.state", 0x20},
	{"unicode_object.length", 0x10}, {"unicode_object.asciiobject_size", 0x28},
};

#define WORDS_314 (3 + N(fields_314))

static unsigned word_of(const char *name)
{
	for (unsigned i = 0; i < N(fields_314); i++)
		if (!strcmp(fields_314[i], name))
			return 3 + i;
	fail_msg("no field %s", name);
	return 0;
}

static void set_word(uint8_t *b, unsigned i, uint64_t v)
{
	memcpy(b + 8 * (size_t)i, &v, 8);
}

static void block_314(uint8_t *b)
{
	memset(b, 0, 8 * WORDS_314);
	memcpy(b, "xdebugpy", 8);
	set_word(b, 1, 0x030e00f0);	/* 3.14.0 final */
	for (size_t i = 0; i < N(values_314); i++)
		set_word(b, word_of(values_314[i].name), values_314[i].v);
}

static uint64_t value_314(const char *name)
{
	for (size_t i = 0; i < N(values_314); i++)
		if (!strcmp(values_314[i].name, name))
			return values_314[i].v;
	fail_msg("no value %s", name);
	return 0;
}

/* ---- objects, as 3.14 lays them out -------------------------------------- */

#define STR_TYPE 0x5555000010ull
#define BYTES_TYPE 0x5555000020ull
#define CODE_TYPE 0x5555000030ull

static const struct python_types types = {CODE_TYPE, STR_TYPE, BYTES_TYPE};

/* A compact ASCII str: PyASCIIObject, then its characters. */
static uint64_t fake_ascii(struct fake *f, const char *s)
{
	size_t n = strlen(s);
	uint64_t a = fake_alloc(f, value_314("unicode_object.asciiobject_size") + n + 1);

	put64(f, a + value_314("pyobject.ob_type"), STR_TYPE);
	put64(f, a + value_314("unicode_object.length"), n);
	/* interned:2, kind 1 at bit 2, compact at 5, ascii at 6 */
	put32(f, a + value_314("unicode_object.state"), 1u | 1u << 2 | 1u << 5 | 1u << 6);
	put(f, a + value_314("unicode_object.asciiobject_size"), s, n);
	return a;
}

static uint64_t fake_bytes(struct fake *f, const uint8_t *b, size_t n)
{
	uint64_t a = fake_alloc(f, value_314("bytes_object.ob_sval") + n + 1);

	put64(f, a + value_314("pyobject.ob_type"), BYTES_TYPE);
	put64(f, a + value_314("bytes_object.ob_size"), n);
	put(f, a + value_314("bytes_object.ob_sval"), b, n);
	return a;
}

/* A location table (PEP 657, unchanged in 3.14): entries of code 13 (no
 * columns), 8 code units each, whose line deltas are given. */
struct code314 {
	const char *qualname, *file;
	int firstlineno, firsttraceable;
	int8_t deltas[4];	/* per 8 code units */
};

static uint64_t fake_code(struct fake *f, const struct code314 *c)
{
	uint8_t tab[8];
	unsigned n = 0;
	uint64_t a = fake_alloc(f, value_314("code_object.co_code_adaptive") + 4 * 16);

	for (int i = 0; i < 4; i++) {
		int d = c->deltas[i];

		tab[n++] = (uint8_t)(0x80 | 13 << 3 | 7);
		tab[n++] = (uint8_t)(d < 0 ? (-d << 1) | 1 : d << 1);	/* svarint */
	}
	put64(f, a + value_314("pyobject.ob_type"), CODE_TYPE);
	put64(f, a + value_314("code_object.qualname"), fake_ascii(f, c->qualname));
	put64(f, a + value_314("code_object.filename"), fake_ascii(f, c->file));
	put64(f, a + value_314("code_object.linetable"), fake_bytes(f, tab, n));
	put32(f, a + value_314("code_object.firstlineno"), (uint32_t)c->firstlineno);
	put32(f, a + 0xc0, (uint32_t)c->firsttraceable);	/* _co_firsttraceable */
	return a;
}

/* 3.14's owners: THREAD 0, GENERATOR 1, FRAME_OBJECT 2, INTERPRETER 3,
 * CSTACK 4. */
struct frame314 {
	uint64_t executable;	/* a _PyStackRef: tagged or not */
	uint64_t code;		/* for instr_ptr */
	int instr;		/* bytes into co_code_adaptive */
	uint8_t owner;
};

/* A thread state (TID tid, pthread_t self) whose chain is fr[0]
 * (innermost) ... fr[n-1]. */
static uint64_t fake_thread(struct fake *f, uint64_t tid, uint64_t self,
			    const struct frame314 *fr, size_t n)
{
	uint64_t ts = fake_alloc(f, value_314("thread_state.size")), prev = 0;

	for (size_t i = n; i-- > 0;) {
		uint64_t a = fake_alloc(f, value_314("interpreter_frame.size"));

		put64(f, a + value_314("interpreter_frame.executable"), fr[i].executable);
		put64(f, a + value_314("interpreter_frame.previous"), prev);
		if (fr[i].code)
			put64(f, a + value_314("interpreter_frame.instr_ptr"),
			      fr[i].code + value_314("code_object.co_code_adaptive") +
			      (uint64_t)fr[i].instr);
		put8(f, a + value_314("interpreter_frame.owner"), fr[i].owner);
		prev = a;
	}
	put64(f, ts + value_314("thread_state.current_frame"), prev);
	put64(f, ts + value_314("thread_state.native_thread_id"), tid);
	put64(f, ts + value_314("thread_state.thread_id"), self);
	return ts;
}

/* ---- the image ----------------------------------------------------------- */

struct image {
	struct fake *f;
	struct python_mem mem;
	uint64_t runtime, ts1, ts2;
	uint64_t handle, rows, main_;	/* ts2's code objects */
};

static const struct code314 handle_c = {"Server.handle", "/srv/app.py", 40, 1, {1, 2, 0, 3}};
static const struct code314 rows_c = {"rows", "/srv/db.py", 7, 3, {0, 1, 1, 1}};
static const struct code314 main_c = {"<module>", "/srv/app.py", 1, 0, {0, 5, 9, 1}};
static const struct code314 idle_c = {"Worker.idle", "/srv/pool.py", 90, 1, {2, 0, 0, 0}};

/* ts1 (TID 5001): Worker.idle. ts2 (TID 5002, the list's second):
 * Server.handle (f_executable tagged), the evaluator's entry frame
 * (INTERPRETER), rows (a generator's), a C-stack frame, <module>. */
static void image_make(struct image *im)
{
	uint8_t b[8 * WORDS_314];
	uint64_t interp, idle;
	struct frame314 fr[5];

	im->f = calloc(1, sizeof(*im->f));
	assert_non_null(im->f);
	im->mem = (struct python_mem){fake_read, im->f};
	im->runtime = fake_alloc(im->f, 0x400);
	block_314(b);
	put(im->f, im->runtime, b, sizeof(b));
	interp = fake_alloc(im->f, value_314("interpreter_state.size"));
	put64(im->f, im->runtime + value_314("runtime_state.interpreters_head"), interp);
	im->handle = fake_code(im->f, &handle_c);
	im->rows = fake_code(im->f, &rows_c);
	im->main_ = fake_code(im->f, &main_c);
	idle = fake_code(im->f, &idle_c);
	fr[0] = (struct frame314){idle | 1, idle, 2 * 9, 0};
	im->ts1 = fake_thread(im->f, 5001, 0x7f00aaaa1000, fr, 1);
	fr[0] = (struct frame314){im->handle | 1, im->handle, 2 * 10, 0};	/* deferred ref */
	fr[1] = (struct frame314){0, 0, 0, 3};
	fr[2] = (struct frame314){im->rows, im->rows, 2 * 2, 1};	/* before _co_firsttraceable:
									   a generator's is complete */
	fr[3] = (struct frame314){0, 0, 0, 4};
	fr[4] = (struct frame314){im->main_ | 1, im->main_, 2 * 17, 0};
	im->ts2 = fake_thread(im->f, 5002, 0x7f00aaaa2000, fr, 5);
	put64(im->f, interp + value_314("interpreter_state.threads_head"), im->ts1);
	put64(im->f, im->ts1 + value_314("thread_state.next"), im->ts2);
}

/* The offsets the tracer builds from the image's block: read at
 * _PyRuntime, parsed, checked against the table's 3.14 entry, applied. */
static void image_offsets(const struct image *im, struct python_offsets *off)
{
	uint8_t b[PYTHON_DEBUGOFFS_MAX];
	struct python_debugoffs d;
	const struct python_offsets *tab = python_offsets_for(0x030e00f0);

	assert_non_null(tab);
	assert_int_equal(python_mem_read(&im->mem, im->runtime, b, sizeof(b)), 0);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(d.version, 0x030e00f0);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), 0);
	assert_int_equal(python_debugoffs_apply(&d, tab, off), 0);
	assert_null(python_offsets_missing(off));
}

static void image_free(struct image *im)
{
	free(im->f);
}

/* The line of code unit u, as the table says: firstlineno plus the deltas
 * of the entries up to u's. */
static int line_of(const struct code314 *c, int instr)
{
	int line = c->firstlineno;

	for (int i = 0; i <= instr / 16; i++)
		line += c->deltas[i];
	return line;
}

/* The tracer's path: the thread state by TID, its frames, their names. */
static void test_tracer_path(void **state)
{
	struct image im;
	struct python_offsets off;
	struct python_frame out[8];
	struct python_walk w;
	struct python_sym *sym;
	struct python_frame_info info;
	uint64_t ts;

	(void)state;
	image_make(&im);
	image_offsets(&im, &off);
	/* the debug offsets gave what the table's entry leaves to them */
	assert_int_equal(off.is_next, 0x1c68);
	assert_int_equal(off.is_threads_head, 0x1cb8);
	assert_int_equal(off.rt_tss_key, PYOFF_NONE);
	assert_true(off.flags & PYOFF_STACKREF);

	assert_int_equal(python_find_tstate(&off, &im.mem, im.runtime, 5002, &ts), 0);
	assert_int_equal(ts, im.ts2);
	assert_int_equal(tr_walk(&off, ts, &w, out, 8, &im.mem), PYWALK_END);
	assert_int_equal(w.n, 3);
	assert_true(out[0].code == im.handle && out[0].instr == 20 && out[0].flags == PYFRAME_ENTRY);
	assert_true(out[1].code == im.rows && out[1].instr == 4 &&
		    out[1].flags == (PYFRAME_GEN | PYFRAME_ENTRY));
	assert_true(out[2].code == im.main_ && out[2].instr == 34 && out[2].flags == 0);

	sym = python_sym_new(&off, &im.mem, &types);
	assert_non_null(sym);
	assert_int_equal(python_sym_frame(sym, &out[0], true, &info), 0);
	assert_false(info.hidden);
	assert_string_equal(info.qualname, "Server.handle");
	assert_string_equal(info.filename, "/srv/app.py");
	assert_int_equal(info.line, line_of(&handle_c, 20));
	assert_int_equal(python_sym_frame(sym, &out[1], true, &info), 0);
	assert_false(info.hidden);	/* a generator's frame is never incomplete */
	assert_string_equal(info.qualname, "rows");
	assert_string_equal(info.filename, "/srv/db.py");
	assert_int_equal(info.line, line_of(&rows_c, 4));
	assert_int_equal(python_sym_frame(sym, &out[2], true, &info), 0);
	assert_string_equal(info.qualname, "<module>");
	assert_int_equal(info.line, line_of(&main_c, 34));
	python_sym_free(sym);

	/* the other thread: its own frame */
	assert_int_equal(python_find_tstate(&off, &im.mem, im.runtime, 5001, &ts), 0);
	assert_int_equal(ts, im.ts1);
	assert_int_equal(tr_walk(&off, ts, &w, out, 8, &im.mem), PYWALK_END);
	assert_int_equal(w.n, 1);
	/* a TID no thread state has: none, and why */
	assert_int_equal(python_find_tstate(&off, &im.mem, im.runtime, 5003, &ts), -ESRCH);
	assert_int_equal(ts, 0);
	/* a list that loops, or leads out of memory */
	put64(im.f, im.ts2 + off.ts_next, im.ts1);
	assert_int_equal(python_find_tstate(&off, &im.mem, im.runtime, 5003, &ts), -ESRCH);
	put64(im.f, im.ts2 + off.ts_next, 0x40);
	assert_int_equal(python_find_tstate(&off, &im.mem, im.runtime, 5003, &ts), -EFAULT);
	image_free(&im);
}

/* The walker as the agent includes it (a frame's fields a word each, the
 * lists through a reader that cannot fault, by thread_id: the thread
 * pointer) and as the bpf program steps it (one list step a bpf_loop call,
 * by TID): the same thread states and frames as the tracer's. */
static void test_engine_flavours(void **state)
{
	struct image im;
	struct python_offsets off;
	struct python_frame a[8], t[8];
	struct python_walk wa, wt;
	struct python_tfind f;
	unsigned steps = 0;

	(void)state;
	image_make(&im);
	image_offsets(&im, &off);
	/* the agent: by pthread_t */
	assert_int_equal(ag_tfind(&off, im.runtime, off.ts_thread_id, 0x7f00aaaa2000, &im.mem),
			 im.ts2);
	assert_true(im.f->list_reads > 0);
	assert_int_equal(ag_tfind(&off, im.runtime, off.ts_thread_id, 0x7f00aaaa3000, &im.mem), 0);
	assert_int_equal(ag_walk(&off, im.ts2, &wa, a, 8, &im.mem), PYWALK_END);
	assert_int_equal(tr_walk(&off, im.ts2, &wt, t, 8, &im.mem), PYWALK_END);
	assert_int_equal(wa.n, wt.n);
	assert_memory_equal(a, t, wt.n * sizeof(t[0]));
	/* the bpf program: start, then a step a callback */
	tr_tfind_start(&off, im.runtime, &f, &im.mem);
	while (steps < PYTHON_TSTATE_STEPS && !tr_tfind_step(&off, &f, off.ts_native_thread_id, 5002,
							     &im.mem))
		steps++;
	assert_int_equal(f.status, PYWALK_END);
	assert_int_equal(f.found, im.ts2);
	assert_int_equal(steps, 2);	/* the interpreter, then ts1; ts2's step ends it */
	/* an unknown TID: the lists end, nothing found */
	tr_tfind_start(&off, im.runtime, &f, &im.mem);
	while (!tr_tfind_step(&off, &f, off.ts_native_thread_id, 5003, &im.mem))
		;
	assert_int_equal(f.status, PYWALK_END);
	assert_int_equal(f.found, 0);
	/* no runtime, an unreadable one */
	tr_tfind_start(&off, 0, &f, &im.mem);
	assert_int_equal(f.status, PYWALK_FAULT);
	assert_int_equal(tr_tfind(&off, 0x40, off.ts_native_thread_id, 5002, &im.mem), 0);
	image_free(&im);
}

static char logged[512];

static void capture_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= USC_LOG_WARN)
		snprintf(logged, sizeof(logged), "%s", msg);
}

/* Corrupt and disagreeing blocks: refused in one line, never read past. */
static void test_corrupt_314(void **state)
{
	uint8_t good[8 * WORDS_314], b[8 * WORDS_314];
	const struct python_offsets *tab = python_offsets_for(0x030e0000);
	struct python_debugoffs d;

	(void)state;
	usc_set_log(capture_log, NULL);
	block_314(good);
	assert_true(sizeof(good) <= PYTHON_DEBUGOFFS_MAX);
	/* every prefix */
	for (size_t n = 0; n < sizeof(good); n++) {
		uint8_t *p = malloc(n ? n : 1);

		assert_non_null(p);
		memcpy(p, good, n);
		assert_int_equal(python_debugoffs_parse(p, n, &d), n < 24 ? -EINVAL : -EPROTO);
		free(p);
	}
	assert_non_null(strstr(logged, "fewer than the 760 of its layout"));
#define FRESH() memcpy(b, good, sizeof(b))
	FRESH();
	b[0] = 'y';
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EINVAL);
	FRESH();
	set_word(b, 1, 0x0e030000);	/* byte-swapped */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	FRESH();
	set_word(b, 2, 1);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "free-threaded"));
	FRESH();
	set_word(b, word_of("thread_state.native_thread_id"), 0x1000);	/* = its size */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "thread_state.native_thread_id is 0x1000, outside"));
	FRESH();
	set_word(b, word_of("code_object.size"), 0);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	/* 3.14.0's layout read as 3.13's: the anchor is elsewhere */
	FRESH();
	set_word(b, 1, 0x030d00f0);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "pyobject is not {16, 8}"));
	/* a 3.14.x whose frame moved: the table's entry disagrees, named */
	FRESH();
	set_word(b, 1, 0x030e03f0);
	set_word(b, word_of("interpreter_frame.instr_ptr"), 0x30);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), -EPROTO);
	assert_non_null(strstr(logged, "_Py_DebugOffsets.interpreter_frame.instr_ptr is 0x30, "
				"uscope's table has 0x38"));
	/* what the block does not carry, where its neighbours put it: the
	 * runtime's initialized flag 8 bytes before _finalizing */
	FRESH();
	set_word(b, word_of("runtime_state.finalizing"), 0x318);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_check(&d, tab, 1), -EPROTO);
	assert_non_null(strstr(logged, "_Py_DebugOffsets.runtime_state.finalizing is 0x318, which "
				"puts _PyRuntimeState.initialized at 0x310; uscope's table has 0x308"));
	set_word(b, word_of("runtime_state.finalizing"), 0x46000);	/* = its size */
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), -EPROTO);
	assert_non_null(strstr(logged, "runtime_state.finalizing is 0x46000, outside"));
	/* the owner beyond what the walker reads of a frame */
	FRESH();
	set_word(b, word_of("interpreter_frame.size"), 0x100);
	set_word(b, word_of("interpreter_frame.owner"), 0x60);
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_apply(&d, tab, &(struct python_offsets){0}), -ENOTSUP);
	assert_non_null(strstr(logged, "interpreter_frame.owner is 0x60, beyond the 80 bytes"));
	/* no entry for the version: not walked */
	FRESH();
	assert_int_equal(python_debugoffs_parse(b, sizeof(b), &d), 0);
	assert_int_equal(python_debugoffs_apply(&d, NULL, &(struct python_offsets){0}), -ENOTSUP);
	assert_int_equal(python_debugoffs_apply(&d, python_offsets_for(0x030d0000),
						&(struct python_offsets){0}), -ENOTSUP);
#undef FRESH
	usc_set_log(NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tracer_path),
		cmocka_unit_test(test_engine_flavours),
		cmocka_unit_test(test_corrupt_314),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
