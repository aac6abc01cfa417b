/* Unwind tables (src/stack/unwtab.c, unwcache.c) and the walker
 * (src/stack/stack_walk.h): the rows compiled from a fixture of known CFI
 * (tests/unit/fixtures/unwtab), lookups at every address, walks of stacks
 * built by hand, and the disk cache's checks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "objfile/modules.h"
#include "fixture.h"
#include "stack/unwtab.h"

/* the walker's lookup, instantiated here to test it alone */
struct tenv {
	const struct stack_image *img;
};
#define TENV(env) ((const struct tenv *)(env))
#define STACK_STEP test_step
#define STACK_INLINE static inline __attribute__((unused))
#define STACK_READ(env, dst, addr) ((void)(env), (void)(dst), (void)(addr), 1)
#define STACK_NMAPS(env) TENV(env)->img->nmaps
#define STACK_MAP(env, i) ((i) < TENV(env)->img->nmaps ? &TENV(env)->img->maps[i] : NULL)
#define STACK_TAB(env, i) ((i) < TENV(env)->img->ntabs ? &TENV(env)->img->tabs[i] : NULL)
#define STACK_ROW(env, i) ((i) < TENV(env)->img->nrows ? &TENV(env)->img->rows[i] : NULL)
#define STACK_IDX(env, i) ((i) < TENV(env)->img->nidx ? &TENV(env)->img->idx[i] : NULL)
#include "stack/stack_walk.h"

static char fx_dir[PATH_MAX], fx_tmp[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	return fixture_build("unwtab", fx_dir, sizeof(fx_dir), fx_tmp, sizeof(fx_tmp));
}

static int teardown(void **state)
{
	(void)state;
	return fixture_remove(fx_tmp);
}

static void fx_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", fx_tmp, name);
}

static uint64_t fx_sym(const char *name)
{
	char path[PATH_MAX], n[128];
	unsigned long long a;
	uint64_t r = 0;
	FILE *f;

	fx_path(path, sizeof(path), "cfi.syms");
	f = fopen(path, "r");
	assert_non_null(f);
	while (fscanf(f, "%127s %llx", n, &a) == 2)
		if (!strcmp(n, name))
			r = a;
	fclose(f);
	assert_true(r != 0);
	return r;
}

/* ---- the table of cfi.so ---------------------------------------------------- */

#define R(pc, op, off, rbp, boff) {pc, off, (uint8_t)((op) | (rbp) << STACK_RBP_SHIFT), boff}
#define NOCFI(pc) R(pc, STACK_OP_NOCFI, 0, 0, 0)
#define SAME STACK_RBP_SAME
#define SAVED STACK_RBP_SAVED
#define LOST STACK_RBP_LOST

static const struct stack_row want_rows[] = {
	/* f_rsp: push, sub, add, pop */
	R(0x000, STACK_OP_RSP, 8, SAME, 0), R(0x001, STACK_OP_RSP, 16, SAME, 0),
	R(0x005, STACK_OP_RSP, 48, SAME, 0), R(0x00a, STACK_OP_RSP, 16, SAME, 0),
	R(0x00b, STACK_OP_RSP, 8, SAME, 0), NOCFI(0x00c),
	/* f_rbp: rbp saved at CFA - 16, then the CFA from rbp */
	R(0x040, STACK_OP_RSP, 8, SAME, 0), R(0x041, STACK_OP_RSP, 16, SAVED, -2),
	R(0x044, STACK_OP_RBP, 16, SAVED, -2), R(0x046, STACK_OP_RSP, 8, SAVED, -2),
	/* f_nocfi inside the gap */
	NOCFI(0x047),
	R(0x0c0, STACK_OP_EXPR, 0, 0, 0), NOCFI(0x0c2),
	R(0x100, STACK_OP_REG, 0, 0, 0), NOCFI(0x102),
	R(0x140, STACK_OP_RSP, 8, SAME, 0), R(0x141, STACK_OP_RSP | STACK_CFA_X8, 5000, SAME, 0),
	R(0x142, STACK_OP_RANGE, 0, 0, 0), NOCFI(0x144),
	R(0x180, STACK_OP_OUTERMOST, 0, 0, 0), NOCFI(0x182),
	R(0x1c0, STACK_OP_SIGOTHER, 0, 0, 0), NOCFI(0x1c2),
	R(0x200, STACK_OP_SIGNAL, 0, 0, 0), NOCFI(0x20a),
	R(0x240, STACK_OP_RSP, 8, SAME, 0), R(0x241, STACK_OP_RSP, 16, LOST, 0),
	R(0x242, STACK_OP_RSP, 8, LOST, 0), NOCFI(0x243),
	/* g_dbg, from .debug_frame */
	R(0x280, STACK_OP_RSP, 8, SAME, 0), R(0x282, STACK_OP_RSP, 16, SAME, 0),
	R(0x284, STACK_OP_RSP, 8, SAME, 0),
};
#define NWANT (sizeof(want_rows) / sizeof(want_rows[0]))

static struct stack_utab *fx_table(void)
{
	char path[PATH_MAX];
	struct stack_utab *u = NULL;

	fx_path(path, sizeof(path), "cfi.so");
	assert_int_equal(stack_utab_build(path, &u), 0);
	return u;
}

static void test_compile_rows(void **state)
{
	struct stack_utab *u = fx_table();

	(void)state;
	assert_int_equal(u->tab.base, fx_sym("f_rsp"));
	assert_int_equal(fx_sym("g_dbg") - u->tab.base, 0x280);
	assert_int_equal(u->tab.span, 0x285);
	assert_int_equal(u->tab.nrows, NWANT);
	for (size_t i = 0; i < NWANT; i++) {
		const struct stack_row *g = &u->rows[i], *w = &want_rows[i];

		if (g->pc != w->pc || g->op != w->op || g->cfa_off != w->cfa_off ||
		    g->rbp_off != w->rbp_off)
			fail_msg("row %zu: pc %#x op %#x cfa %d rbp %d, want pc %#x op %#x cfa %d "
				 "rbp %d", i, g->pc, g->op, g->cfa_off, g->rbp_off, w->pc, w->op,
				 w->cfa_off, w->rbp_off);
	}
	assert_int_equal(u->fdes, 10);		/* 9 in .eh_frame, 1 in .debug_frame */
	assert_int_equal(u->debug_rows, 3);
	assert_int_equal(u->by_op[STACK_OP_NOCFI], 9);
	assert_int_equal(u->by_op[STACK_OP_SIGNAL], 1);
	assert_int_equal(u->build_id_len, 20);
	/* the block index: blocks of 32 bytes (20 bytes a row on average),
	 * each the last row at or before its start */
	assert_int_equal(u->tab.shift, 5);
	assert_int_equal(u->tab.nidx, 21);
	assert_int_equal(u->idx[0], 0);
	assert_int_equal(u->idx[1], 5);		/* the gap after f_rsp */
	assert_int_equal(u->idx[2], 6);		/* f_rbp, at 0x40 */
	assert_int_equal(u->idx[8], 13);	/* f_reg, at 0x100 */
	assert_int_equal(u->idx[16], 23);	/* f_linuxsig, at 0x200 */
	assert_int_equal(u->idx[20], 29);	/* g_dbg, at 0x280 */
	stack_utab_free(u);
}

/* The walker's lookup at every byte: the row a linear scan finds. */
static void test_lookup_every_address(void **state)
{
	struct stack_utab *u = fx_table();
	struct stack_image img = {0};
	struct tenv env = {&img};

	(void)state;
	/* a second table first, so the rows and index start past 0 */
	assert_int_equal(stack_image_tab(&img, u), 0);
	assert_int_equal(stack_image_tab(&img, u), 0);	/* once */
	{
		struct stack_utab *v = fx_table();

		assert_int_equal(stack_image_tab(&img, v), 1);
		for (uint32_t off = 0; off < u->tab.span; off++) {
			const struct stack_row *r = test_step_row(&img.tabs[1], off, &env);
			uint32_t k = 0;

			while (k + 1 < u->tab.nrows && u->rows[k + 1].pc <= off)
				k++;
			assert_non_null(r);
			assert_ptr_equal(r, &img.rows[img.tabs[1].rows + k]);
		}
		stack_image_free(&img);
		stack_utab_free(v);
	}
	stack_utab_free(u);
}

static void test_compile_errors(void **state)
{
	char path[PATH_MAX];
	struct stack_utab *u = NULL;

	(void)state;
	assert_int_equal(stack_utab_build("/nonexistent/libnothing.so", &u), -ENOENT);
	assert_null(u);
	fx_path(path, sizeof(path), "nocfi.so");
	assert_int_equal(stack_utab_build(path, &u), -ENODATA);
	fx_path(path, sizeof(path), "cfi.syms");	/* not ELF */
	assert_int_equal(stack_utab_build(path, &u), -EINVAL);
	assert_null(u);
}

/* Debian's libc: glibc's signal trampoline is the one Linux signal frame. */
static void test_libc(void **state)
{
	char *libc = NULL;
	struct stack_utab *u = NULL;

	(void)state;
	assert_int_equal(module_find_system("libc.so.6", &libc), 0);
	assert_int_equal(stack_utab_build(libc, &u), 0);
	assert_int_equal(u->by_op[STACK_OP_SIGNAL], 1);
	assert_int_equal(u->by_op[STACK_OP_SIGOTHER], 0);
	assert_true(u->tab.nrows > 10000);
	stack_utab_free(u);
	free(libc);
}

/* ---- walks of stacks built by hand ------------------------------------------ */

#define LINK 0x1000ULL		/* the module's link-time base */
#define MSTART 0x400000ULL	/* where it is mapped */
#define M(off) (MSTART + (off))
#define MEMBASE 0x7f0000ULL	/* the stack's words */
#define NWORDS 128

static const struct stack_row hand_rows[] = {
	R(0x00, STACK_OP_RSP, 8, SAME, 0),
	R(0x10, STACK_OP_RSP, 16, SAVED, -2),
	R(0x20, STACK_OP_RBP, 16, SAVED, -2),
	R(0x30, STACK_OP_RSP, 8, SAME, 0),
	R(0x40, STACK_OP_OUTERMOST, 0, 0, 0),
	R(0x50, STACK_OP_NOCFI, 0, 0, 0),
	R(0x58, STACK_OP_SIGNAL, 0, 0, 0),
	R(0x5c, STACK_OP_EXPR, 0, 0, 0),
	R(0x60, STACK_OP_RSP, 16, LOST, 0),
	R(0x68, STACK_OP_RSP | STACK_CFA_X8, 2, SAME, 0),
	R(0x70, STACK_OP_NOCFI, 0, 0, 0),
};

struct hand {
	struct stack_utab u;
	struct stack_image img;
	uint64_t mem[NWORDS];
	uint64_t pcs[STACK_WALK_MAX];
	struct stack_walk w;
};

static int mem_read(void *ctx, uint64_t addr, uint64_t *val)
{
	const struct hand *h = ctx;

	if (addr < MEMBASE || addr + 8 > MEMBASE + sizeof(h->mem))
		return 1;
	memcpy(val, (const uint8_t *)h->mem + (addr - MEMBASE), 8);
	return 0;
}

static struct hand *hand_new(void)
{
	struct hand *h = calloc(1, sizeof(*h));

	assert_non_null(h);
	h->u.rows = malloc(sizeof(hand_rows));
	memcpy(h->u.rows, hand_rows, sizeof(hand_rows));
	h->u.tab.base = LINK;
	h->u.tab.span = 0x80;
	h->u.tab.nrows = sizeof(hand_rows) / sizeof(hand_rows[0]);
	h->u.tab.shift = 4;	/* 16-byte blocks: a lookup crosses several */
	assert_int_equal(stack_utab_index(&h->u), 0);
	assert_int_equal(stack_image_tab(&h->img, &h->u), 0);
	assert_int_equal(stack_image_map(&h->img, MSTART, MSTART + 0x1000, MSTART - LINK, 0), 0);
	return h;
}

static void hand_free(struct hand *h)
{
	stack_image_free(&h->img);
	free(h->u.rows);
	free(h->u.idx);
	free(h);
}

static void set(struct hand *h, uint64_t addr, uint64_t v)
{
	assert_true(addr >= MEMBASE && addr + 8 <= MEMBASE + sizeof(h->mem));
	memcpy((uint8_t *)h->mem + (addr - MEMBASE), &v, 8);
}

static void walk(struct hand *h, uint64_t pc, uint64_t sp, uint64_t bp, uint32_t max)
{
	stack_walk_image(&h->img, pc, sp, bp, max, mem_read, h, h->pcs, &h->w);
}

static void assert_pcs(const struct hand *h, const uint64_t *want, uint32_t n)
{
	assert_int_equal(h->w.n, n);
	for (uint32_t i = 0; i < n; i++)
		if (h->pcs[i] != want[i])
			fail_msg("frame %u: %#llx, want %#llx", i, (unsigned long long)h->pcs[i],
				 (unsigned long long)want[i]);
}

/* leaf (rsp) <- a frame that saved rbp <- a frame using rbp <- outermost */
static void chain(struct hand *h, uint64_t sp)
{
	uint64_t fp = sp + 0x100;

	set(h, sp, M(0x11));		/* frame 1 returns into the 0x10 row */
	/* frame 1: CFA = sp + 8 + 16; rbp saved at CFA - 16 */
	set(h, sp + 8, fp);
	set(h, sp + 16, M(0x21));	/* frame 2: the rbp-based row */
	/* frame 2: CFA = rbp + 16 = fp + 16: return address at fp + 8 */
	set(h, fp, 0x1234);
	set(h, fp + 8, M(0x41));	/* frame 3: outermost */
}

static void test_walk_chain(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x40;
	const uint64_t want[] = {M(0x00), M(0x11), M(0x21), M(0x41)};

	(void)state;
	chain(h, sp);
	walk(h, M(0x00), sp, 0xdead, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_int_equal(h->w.end_pc, 0);
	assert_pcs(h, want, 4);
	assert_int_equal(h->w.nsig, 0);
	/* the same as a struct usc_stack: frame 0 exact, the rest not */
	{
		union {
			struct usc_stack st;
			uint8_t b[sizeof(struct usc_stack) + 8 * 8];
		} o;

		assert_int_equal(stack_walk_usc(&h->w, h->pcs, false, &o.st), 0);
		assert_int_equal(o.st.n, 4);
		assert_int_equal(o.st.end, USC_STACK_END_OUTERMOST);
		assert_int_equal(o.st.exact[0], 1);
		assert_int_equal(o.st.sigframe[0], 0);
		assert_memory_equal(o.st.pc, want, sizeof(want));
	}
	/* the limit: the first frame left out is end_pc */
	walk(h, M(0x00), sp, 0xdead, 2);
	assert_int_equal(h->w.end, STACK_WALK_LIMIT);
	assert_int_equal(h->w.end_pc, M(0x21));
	assert_pcs(h, want, 2);
	walk(h, M(0x00), sp, 0xdead, 0);
	assert_int_equal(h->w.end, STACK_WALK_LIMIT);
	assert_int_equal(h->w.n, 0);
	hand_free(h);
}

static void test_walk_ends(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x40;

	(void)state;
	/* a zero return address: the outermost frame */
	set(h, sp, 0);
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_int_equal(h->w.n, 1);
	/* into code without CFI: that frame is there, then the end */
	set(h, sp, M(0x51));
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.end_pc, M(0x51));
	assert_int_equal(h->w.n, 2);
	/* beyond the table's span (a module's code past its last FDE) */
	set(h, sp, M(0x91));
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.end_pc, M(0x91));
	/* into no mapping */
	set(h, sp, 0x900000);
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOMODULE);
	assert_int_equal(h->w.end_pc, 0x900000);
	assert_int_equal(h->w.n, 2);
	walk(h, 0x900000, sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOMODULE);
	assert_int_equal(h->w.n, 1);
	/* a return address that cannot be read */
	walk(h, M(0x00), MEMBASE + sizeof(h->mem) - 4, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_UNREAD);
	assert_int_equal(h->w.end_pc, M(0x00));
	assert_int_equal(h->w.n, 1);
	/* a DWARF expression: a fallback, where */
	set(h, sp, M(0x5d));
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_FALLBACK);
	assert_int_equal(h->w.why, STACK_OP_EXPR);
	assert_int_equal(h->w.end_pc, M(0x5d));
	assert_int_equal(h->w.n, 2);
	{
		union {
			struct usc_stack st;
			uint8_t b[sizeof(struct usc_stack) + 8 * 8];
		} o;

		assert_int_equal(stack_walk_usc(&h->w, h->pcs, false, &o.st), -EAGAIN);
	}
	hand_free(h);
}

/* A return address at the start of a row: looked up at pc - 1, the row of
 * the call; frame 0 and a frame a signal interrupted, at pc itself. */
static void test_walk_lookup_pc(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x40;

	(void)state;
	set(h, sp, M(0x10));		/* looked up at 0x0f: CFA = rsp + 8 */
	set(h, sp + 8, 0);
	set(h, sp + 16, M(0x51));	/* where the 0x10 row would find its caller */
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_int_equal(h->w.n, 2);
	/* a CFA offset in words: rsp + 2 * 8 */
	set(h, sp - 8, M(0x51));
	set(h, sp, M(0x51));
	set(h, sp + 8, 0);
	walk(h, M(0x68), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_int_equal(h->w.n, 1);
	set(h, sp + 8, M(0x51));
	walk(h, M(0x68), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.n, 2);
	/* frame 0 at 0x40 is exact: the outermost row, not the 0x30 one */
	walk(h, M(0x40), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_int_equal(h->w.n, 1);
	hand_free(h);
}

static void test_walk_rbp(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x40;

	(void)state;
	/* rbp lost (a rule a row cannot hold), then a CFA from rbp: fallback */
	set(h, sp, M(0x61));		/* frame 1: rsp + 16, rbp lost */
	set(h, sp + 16, M(0x21));	/* frame 2: CFA from rbp */
	walk(h, M(0x00), sp, 0x1234, 64);
	assert_int_equal(h->w.end, STACK_WALK_FALLBACK);
	assert_int_equal(h->w.why, STACK_WHY_RBP);
	assert_int_equal(h->w.end_pc, M(0x21));
	assert_int_equal(h->w.n, 3);
	/* frame 0 saved rbp just below the readable stack (an epilogue's popped
	 * slot, out of a copy): the rbp-based caller is where it ends, unread */
	set(h, MEMBASE, M(0x21));	/* frame 0 at 0x10: CFA = sp + 16 = MEMBASE + 8 */
	walk(h, M(0x10), MEMBASE - 8, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_UNREAD);
	assert_int_equal(h->w.end_pc, M(0x21));
	assert_int_equal(h->w.n, 2);
	hand_free(h);
}

/* The signal trampoline: the interrupted rip, rsp and rbp from the
 * ucontext at its rsp; the trampoline and the interrupted frame exact. */
static void test_walk_signal(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x10, uc = sp + 8, isp = MEMBASE + 0x300;
	const uint64_t want[] = {M(0x00), M(0x59), M(0x40)};

	(void)state;
	set(h, sp, M(0x59));		/* the handler returns to the trampoline */
	set(h, uc + STACK_UC_RIP, M(0x40));
	set(h, uc + STACK_UC_RSP, isp);
	set(h, uc + STACK_UC_RBP, 0x5555);
	walk(h, M(0x00), sp, 0, 64);
	/* 0x40 exact is the outermost row (at 0x3f it would be 0x30's) */
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_pcs(h, want, 3);
	assert_int_equal(h->w.nsig, 1);
	assert_int_equal(h->w.sig[0], 1);
	{
		union {
			struct usc_stack st;
			uint8_t b[sizeof(struct usc_stack) + 8 * 8];
		} o;

		assert_int_equal(stack_walk_usc(&h->w, h->pcs, false, &o.st), 0);
		assert_int_equal(o.st.exact[0], 0x7);		/* 0, the trampoline, after it */
		assert_int_equal(o.st.sigframe[0], 0x2);
	}
	/* the ucontext unreadable */
	set(h, MEMBASE + sizeof(h->mem) - 0x40, M(0x59));
	walk(h, M(0x00), MEMBASE + sizeof(h->mem) - 0x40, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_UNREAD);
	hand_free(h);
}

static void test_walk_tables(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x40;

	(void)state;
	set(h, sp, 0);
	/* a table index out of the image, one that failed: a fallback */
	h->img.maps[0].tab = 7;
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_FALLBACK);
	assert_int_equal(h->w.why, STACK_WHY_TABLE);
	h->img.maps[0].tab = STACK_TAB_FAIL;
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.why, STACK_WHY_TABLE);
	/* a module without CFI: the stack ends */
	h->img.maps[0].tab = STACK_TAB_NONE;
	walk(h, M(0x00), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	h->img.maps[0].tab = 0;
	/* a block index pointing past the rows: a bad table, not a bad read */
	h->img.idx[1] = 1000;
	walk(h, M(0x10), sp, 0, 64);
	assert_int_equal(h->w.end, STACK_WALK_FALLBACK);
	assert_int_equal(h->w.why, STACK_WHY_TABLE);
	hand_free(h);
}

/* Code without CFI stepped by frame pointer: JIT code in an anonymous
 * mapping, a module's range without CFI; back into the table after. */
#define ANON 0x600000ULL	/* anonymous executable memory */

static void test_walk_frame_pointer(void **state)
{
	struct hand *h = hand_new();
	uint64_t sp = MEMBASE + 0x40, fp1 = MEMBASE + 0x80, fp2 = MEMBASE + 0xc0;
	const uint64_t want[] = {M(0x00), ANON + 0x20, M(0x51), M(0x31)};

	(void)state;
	assert_int_equal(stack_image_map(&h->img, ANON, ANON + 0x1000, 0, STACK_TAB_ANON), 0);
	/* frame 0 (rsp + 8, rbp unchanged) returns into JIT code whose rbp
	 * chain goes to the module's range without CFI, then to 0x30's row
	 * (rsp + 8): its return address 0 ends the stack */
	set(h, sp, ANON + 0x20);
	set(h, fp1, fp2);
	set(h, fp1 + 8, M(0x51));
	set(h, fp2, 0x1234);
	set(h, fp2 + 8, M(0x31));
	set(h, fp2 + 16, 0);
	walk(h, M(0x00), sp, fp1, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_pcs(h, want, 4);
	assert_int_equal(h->w.sp, fp2 + 16);
	assert_int_equal(h->w.bp, 0x1234);
	/* the limit, on a frame-pointer step: the first left out is end_pc */
	walk(h, M(0x00), sp, fp1, 2);
	assert_int_equal(h->w.end, STACK_WALK_LIMIT);
	assert_int_equal(h->w.end_pc, M(0x51));
	/* a frame pointer below the stack pointer (the chain goes back): the
	 * stack ends where the frame pointer fails, as without CFI */
	set(h, fp1, sp - 16);
	walk(h, M(0x00), sp, fp1, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.end_pc, M(0x51));
	assert_int_equal(h->w.n, 3);
	set(h, fp1, fp2);
	/* misaligned, unreadable, too far above the stack pointer */
	walk(h, M(0x00), sp, fp1 + 4, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.n, 2);
	walk(h, M(0x00), sp, MEMBASE + sizeof(h->mem), 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.n, 2);
	walk(h, M(0x00), sp, sp + STACK_FP_SPAN, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.end_pc, ANON + 0x20);
	/* rbp lost on the way (frame 1's row): no step */
	set(h, sp, M(0x61));
	set(h, sp + 16, ANON + 0x20);
	walk(h, M(0x00), sp, fp1, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.end_pc, ANON + 0x20);
	assert_int_equal(h->w.n, 3);
	/* frame 0 in JIT code is stepped (a sampled stack); in a module's code
	 * without CFI it is not (a probe at a function's entry: rbp is still
	 * the caller's) */
	walk(h, ANON + 0x10, sp, fp1, 64);
	assert_int_equal(h->w.end, STACK_WALK_OUTERMOST);
	assert_int_equal(h->w.n, 3);
	assert_int_equal(h->pcs[1], M(0x51));
	walk(h, M(0x50), sp, fp1, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOCFI);
	assert_int_equal(h->w.n, 1);
	/* JIT code in no mapping known: still a fallback (its mappings are
	 * read again) */
	walk(h, 0x900000, sp, fp1, 64);
	assert_int_equal(h->w.end, STACK_WALK_NOMODULE);
	assert_int_equal(stack_walk_fallback(&h->w), STACK_FB_NOMODULE);
	hand_free(h);
}

/* Many mappings: each address finds its own, between them none. */
static void test_walk_maps(void **state)
{
	struct stack_image img = {0};
	struct tenv env = {&img};
	struct stack_walk w = {0};

	(void)state;
	/* added out of order: kept sorted */
	for (int i = 99; i >= 0; i--)
		assert_int_equal(stack_image_map(&img, 0x10000 * (uint64_t)(i + 1),
						 0x10000 * (uint64_t)(i + 1) + 0x8000, 0,
						 STACK_TAB_NONE), 0);
	assert_int_equal(stack_image_map(&img, 0x17000, 0x19000, 0, 0), -EINVAL);	/* overlaps */
	assert_int_equal(stack_image_map(&img, 0x18000, 0x20001, 0, 0), -EINVAL);
	assert_int_equal(stack_image_map(&img, 0x10000 * 200, 0x10000 * 200 + 1, 0, 0), 0);
	assert_int_equal(img.nmaps, 101);
	for (uint32_t i = 0; i < 100; i++) {
		uint64_t a = 0x10000 * (uint64_t)(i + 1);

		assert_ptr_equal(test_step_map(&w, a, &env), &img.maps[i]);
		assert_int_equal(w.map, i);
		assert_ptr_equal(test_step_map(&w, a + 0x7fff, &env), &img.maps[i]);
		assert_null(test_step_map(&w, a + 0x8000, &env));
		assert_null(test_step_map(&w, a - 1, &env));
	}
	assert_null(test_step_map(&w, 0, &env));
	assert_null(test_step_map(&w, ~0ULL, &env));
	stack_image_free(&img);
}

/* ---- the disk cache --------------------------------------------------------- */

static void test_file_checked(void **state)
{
	struct stack_utab *u = fx_table(), *v = NULL;
	uint8_t other[20];
	void *buf = NULL;
	uint8_t *b;
	size_t len = 0;

	(void)state;
	assert_int_equal(stack_utab_encode(u, &buf, &len), 0);
	b = buf;
	assert_int_equal(stack_utab_decode(buf, len, u->build_id, u->build_id_len, &v), 0);
	assert_int_equal(v->tab.nrows, u->tab.nrows);
	assert_int_equal(v->tab.span, u->tab.span);
	assert_int_equal(v->tab.base, u->tab.base);
	assert_memory_equal(v->rows, u->rows, u->tab.nrows * sizeof(*u->rows));
	assert_memory_equal(v->idx, u->idx, u->tab.nidx * sizeof(*u->idx));
	assert_memory_equal(v->by_op, u->by_op, sizeof(u->by_op));
	assert_true(v->from_disk);
	stack_utab_free(v);
	/* every byte matters: a flipped one is refused */
	for (size_t i = 0; i < len; i++) {
		b[i] ^= 0x40;
		assert_int_equal(stack_utab_decode(buf, len, u->build_id, u->build_id_len, &v),
				 -EBADMSG);
		assert_null(v);
		b[i] ^= 0x40;
	}
	/* short, long, another build-id */
	assert_int_equal(stack_utab_decode(buf, len - 1, u->build_id, u->build_id_len, &v),
			 -EBADMSG);
	assert_int_equal(stack_utab_decode(buf, 10, u->build_id, u->build_id_len, &v), -EBADMSG);
	memcpy(other, u->build_id, sizeof(other));
	other[3] ^= 1;
	assert_int_equal(stack_utab_decode(buf, len, other, sizeof(other), &v), -EBADMSG);
	{
		uint8_t *longer = calloc(1, len + 8);

		memcpy(longer, buf, len);
		assert_int_equal(stack_utab_decode(longer, len + 8, u->build_id, u->build_id_len,
						   &v), -EBADMSG);
		free(longer);
	}
	free(buf);
	/* a span whose block index would dwarf the rows: refused, not allocated */
	u->tab.span = 0xffffffffu;
	assert_int_equal(stack_utab_encode(u, &buf, &len), 0);
	assert_int_equal(stack_utab_decode(buf, len, u->build_id, u->build_id_len, &v), -EBADMSG);
	free(buf);
	stack_utab_free(u);
}

static bool file_exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

static void test_tabset_disk(void **state)
{
	char dir[PATH_MAX + 32], so[PATH_MAX], so2[PATH_MAX], file[PATH_MAX + 192], cmd[4 * PATH_MAX];
	struct stack_tabset *s;
	const struct stack_utab *u, *u2;
	FILE *f;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/cache/uscope/unwind", fx_tmp);
	fx_path(so, sizeof(so), "cfi.so");
	fx_path(so2, sizeof(so2), "cfi-copy.so");
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", so, so2);
	assert_int_equal(system(cmd), 0);
	/* built, and written */
	s = stack_tabset_new(dir);
	assert_int_equal(stack_tabset_get(s, so, &u), 0);
	assert_false(u->from_disk);
	assert_int_equal(stack_tabset_get(s, so, &u2), 0);
	assert_ptr_equal(u, u2);
	/* another file of the same build: the same table */
	assert_int_equal(stack_tabset_get(s, so2, &u2), 0);
	assert_ptr_equal(u, u2);
	{
		char *p = file + snprintf(file, sizeof(file), "%s/", dir);

		for (uint32_t i = 0; i < u->build_id_len; i++)
			p += sprintf(p, "%02x", u->build_id[i]);
		sprintf(p, ".v%d.unw", STACK_TABFILE_VERSION);
	}
	assert_true(file_exists(file));
	/* no temporary file left */
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
	assert_int_equal(system(cmd), 0);
	/* failures are remembered */
	assert_int_equal(stack_tabset_get(s, "/nonexistent/x.so", &u2), -ENOENT);
	stack_tabset_free(s);
	/* a second session reads it */
	s = stack_tabset_new(dir);
	assert_int_equal(stack_tabset_get(s, so, &u), 0);
	assert_true(u->from_disk);
	assert_int_equal(u->tab.nrows, NWANT);
	stack_tabset_free(s);
	/* a damaged file is rebuilt, and replaced */
	f = fopen(file, "r+");
	assert_non_null(f);
	fseek(f, 100, SEEK_SET);
	fputc(0x5a, f);
	fclose(f);
	s = stack_tabset_new(dir);
	assert_int_equal(stack_tabset_get(s, so, &u), 0);
	assert_false(u->from_disk);
	assert_int_equal(u->tab.nrows, NWANT);
	stack_tabset_free(s);
	s = stack_tabset_new(dir);
	assert_int_equal(stack_tabset_get(s, so, &u), 0);
	assert_true(u->from_disk);
	stack_tabset_free(s);
	/* a module without CFI: -ENODATA, nothing written */
	s = stack_tabset_new(dir);
	fx_path(so, sizeof(so), "nocfi.so");
	assert_int_equal(stack_tabset_get(s, so, &u), -ENODATA);
	assert_null(u);
	stack_tabset_free(s);
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_cache_dir(void **state)
{
	char *d;

	(void)state;
	setenv("XDG_CACHE_HOME", "/x/cache", 1);
	d = stack_cache_dir();
	assert_string_equal(d, "/x/cache/uscope/unwind");
	free(d);
	setenv("XDG_CACHE_HOME", "relative", 1);	/* ignored, as the spec says */
	setenv("HOME", "/home/u", 1);
	d = stack_cache_dir();
	assert_string_equal(d, "/home/u/.cache/uscope/unwind");
	free(d);
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	assert_null(stack_cache_dir());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compile_rows),
		cmocka_unit_test(test_lookup_every_address),
		cmocka_unit_test(test_compile_errors),
		cmocka_unit_test(test_libc),
		cmocka_unit_test(test_walk_chain),
		cmocka_unit_test(test_walk_ends),
		cmocka_unit_test(test_walk_lookup_pc),
		cmocka_unit_test(test_walk_rbp),
		cmocka_unit_test(test_walk_signal),
		cmocka_unit_test(test_walk_tables),
		cmocka_unit_test(test_walk_frame_pointer),
		cmocka_unit_test(test_walk_maps),
		cmocka_unit_test(test_file_checked),
		cmocka_unit_test(test_tabset_disk),
		cmocka_unit_test(test_cache_dir),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
