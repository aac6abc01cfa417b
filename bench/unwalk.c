/* Benchmark of the stack walker (src/stack/stack_walk.h) and its tables
 * (src/stack/unwtab.c); make bench runs it (bench/unwtab.py).
 *
 *   unwalk walk [ITERS]   the walker's cost per stack of 10 frames from a
 *                         warm table, beside libdw's unwinding of the same
 *                         8 KiB copy (stack_unwind, today's $ustack path),
 *                         10 frames and 64
 *   unwalk build PATH...  each module's table: rows, bytes, the time to
 *                         build it from the CFI (CPU, and wall), to read it
 *                         from the disk cache, and to find it again in a
 *                         session's set
 *
 * The stack walked is this program's own: main, then ten functions called
 * one from another (built -O2 -fomit-frame-pointer, as Debian builds), the
 * innermost copying its registers and 8 KiB of its stack as an engine
 * copies them at a hit. The walker is built here as the agent will build
 * it: memory read directly (bounds-checked against the copy), the image's
 * arrays indexed in place. Both results are checked to be the same stack
 * before anything is timed. Prints "name value unit" lines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "stack/stack.h"
#include "stack/unwtab.h"

#define NOIPA __attribute__((noipa))
#define COPY 8192

static struct {
	uint64_t ip, sp, bp;
	uint32_t len;
	uint8_t stack[COPY];
} snap;
static uint64_t stack_top;	/* the end of the main thread's stack mapping */

static uint64_t find_stack_top(void)
{
	unsigned long long lo, hi;
	char line[512];
	uint64_t top = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%llx-%llx", &lo, &hi) == 2)
			top = hi;
	if (f)
		fclose(f);
	return top;
}

/* CPU time of this thread: the machine may be busy with other work */
static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double wall_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ---- the stack ------------------------------------------------------------ */

volatile long sink;

NOIPA long f0(long x)
{
	uint64_t ip, sp, bp;

	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	snap.ip = ip;
	snap.sp = sp;
	snap.bp = bp;
	/* as an engine copies: up to 8 KiB, no further than the mapping */
	snap.len = stack_top - sp < COPY ? (uint32_t)(stack_top - sp) : COPY;
	memcpy(snap.stack, (const void *)sp, snap.len);
	return x + 1;
}

#define LEVEL(n, m)                                                             \
	NOIPA long f##n(long x)                                                 \
	{                                                                       \
		long a = x * 3, b = x ^ 7;                                      \
		long r = f##m(x + 1);                                           \
		sink += a * b;                                                  \
		return r + a;                                                   \
	}
LEVEL(1, 0)
LEVEL(2, 1)
LEVEL(3, 2)
LEVEL(4, 3)
LEVEL(5, 4)
LEVEL(6, 5)
LEVEL(7, 6)
LEVEL(8, 7)
LEVEL(9, 8)

/* ---- the walker, as the agent builds it -------------------------------------- */

struct benv {
	const struct stack_image *img;
	uint64_t sp;
	const uint8_t *bytes;
};

static inline int bench_read(const struct benv *e, uint64_t *dst, uint64_t addr)
{
	if (addr < e->sp || addr - e->sp > snap.len || snap.len - (addr - e->sp) < 8)
		return 1;
	memcpy(dst, e->bytes + (addr - e->sp), 8);
	return 0;
}

/* a pc's row, remembered: direct-mapped by the lookup address */
#define CACHE_SLOTS 1024
static struct centry {
	uint64_t pc;
	struct stack_row row;
} rcache[CACHE_SLOTS];

static inline const struct stack_row *cache_get(uint64_t pc)
{
	const struct centry *e = &rcache[(pc * 0x9e3779b97f4a7c15ULL) >> 54];

	return e->pc == pc ? &e->row : NULL;
}

static inline void cache_put(uint64_t pc, const struct stack_row *r)
{
	struct centry *e = &rcache[(pc * 0x9e3779b97f4a7c15ULL) >> 54];

	e->pc = pc;
	e->row = *r;
}

#define BENV(env) ((const struct benv *)(env))
#define STACK_STEP bench_step
#define STACK_INLINE static inline __attribute__((always_inline))
#define STACK_READ(env, dst, addr) bench_read(BENV(env), dst, addr)
#define STACK_NMAPS(env) BENV(env)->img->nmaps
#define STACK_MAP(env, i) ((i) < BENV(env)->img->nmaps ? &BENV(env)->img->maps[i] : NULL)
#define STACK_TAB(env, i) ((i) < BENV(env)->img->ntabs ? &BENV(env)->img->tabs[i] : NULL)
#define STACK_ROW(env, i) ((i) < BENV(env)->img->nrows ? &BENV(env)->img->rows[i] : NULL)
#define STACK_IDX(env, i) ((i) < BENV(env)->img->nidx ? &BENV(env)->img->idx[i] : NULL)
#include "stack/stack_walk.h"

#define STACK_STEP bench_step_cached
#define STACK_INLINE static inline __attribute__((always_inline))
#define STACK_READ(env, dst, addr) bench_read(BENV(env), dst, addr)
#define STACK_NMAPS(env) BENV(env)->img->nmaps
#define STACK_MAP(env, i) ((i) < BENV(env)->img->nmaps ? &BENV(env)->img->maps[i] : NULL)
#define STACK_TAB(env, i) ((i) < BENV(env)->img->ntabs ? &BENV(env)->img->tabs[i] : NULL)
#define STACK_ROW(env, i) ((i) < BENV(env)->img->nrows ? &BENV(env)->img->rows[i] : NULL)
#define STACK_IDX(env, i) ((i) < BENV(env)->img->nidx ? &BENV(env)->img->idx[i] : NULL)
#define STACK_CACHE_GET(env, pc) cache_get(pc)
#define STACK_CACHE_PUT(env, pc, r) cache_put(pc, r)
#include "stack/stack_walk.h"

static NOIPA void walk_cached(const struct stack_image *img, uint32_t max, uint64_t *pcs,
			      struct stack_walk *w)
{
	struct benv e = {img, snap.sp, snap.stack};

	stack_walk_init(w, snap.ip, snap.sp, snap.bp, max, pcs);
	while (!bench_step_cached(w, pcs, &e))
		;
}

static NOIPA void walk(const struct stack_image *img, uint32_t max, uint64_t *pcs,
		       struct stack_walk *w)
{
	struct benv e = {img, snap.sp, snap.stack};

	stack_walk_init(w, snap.ip, snap.sp, snap.bp, max, pcs);
	while (!bench_step(w, pcs, &e))
		;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of 15 rounds of iters calls: ns a call. */
#define ROUNDS 15

static int bench_walk(long iters)
{
	struct stack_tabset *set = stack_tabset_new(NULL);
	struct usc_cache *c = cache_new();
	struct stack_image img = {0};
	static uint64_t pcs[STACK_WALK_MAX];
	static union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * STACK_WALK_MAX];
	} dw, wk;
	static struct {
		struct fetch_stack_hdr h;
		uint8_t b[COPY];
	} copy;
	struct stack_walk w;
	double t[ROUNDS], res[6] = {0};
	uint32_t full = 0;

	stack_top = find_stack_top();
	sink += f9(1);
	if (!set || !c || stack_image_proc(&img, set, getpid())) {
		fprintf(stderr, "unwalk: no image of this process\n");
		return 1;
	}
	memset(&copy.h, 0, sizeof(copy.h));
	copy.h.regs[USC_REG_IP] = snap.ip;
	copy.h.regs[USC_REG_SP] = snap.sp;
	copy.h.regs[USC_REG_BP] = snap.bp;
	copy.h.len = snap.len;
	memcpy(copy.b, snap.stack, snap.len);
	/* the same stack both ways, the whole of it and 10 frames */
	for (int k = 0; k < 2; k++) {
		uint32_t max = k ? 10 : 64;

		copy.h.frames = (uint16_t)max;
		walk(&img, max, pcs, &w);
		if (stack_unwind(c, getpid(), getpid(), &copy, sizeof(copy.h) + snap.len, &dw.st, max) ||
		    stack_walk_usc(&w, pcs, true, &wk.st) || dw.st.n != wk.st.n ||
		    dw.st.end != wk.st.end || memcmp(dw.st.pc, wk.st.pc, 8 * dw.st.n)) {
			fprintf(stderr, "unwalk: the walker and libdw differ (%u and %u frames, "
					"ends %u and %u)\n", wk.st.n, dw.st.n, wk.st.end, dw.st.end);
			return 1;
		}
		if (!k)
			full = dw.st.n;
		if (!k && (dw.st.end != USC_STACK_END_OUTERMOST || dw.st.n < 13)) {
			fprintf(stderr, "unwalk: a stack of %u frames, end %u\n", dw.st.n,
				dw.st.end);
			return 1;
		}
		if (k && dw.st.n != 10)
			return 1;
	}
	/* the cached walk gives the same stack */
	{
		static uint64_t pcs2[STACK_WALK_MAX];
		struct stack_walk w2;

		for (int k = 0; k < 2; k++) {
			walk(&img, 64, pcs, &w);
			walk_cached(&img, 64, pcs2, &w2);
			if (w.n != w2.n || w.end != w2.end || memcmp(pcs, pcs2, 8 * w.n)) {
				fprintf(stderr, "unwalk: the cached walk differs\n");
				return 1;
			}
		}
	}
	/* 0, 1: the walker; 2, 3: with a row cache; 4, 5: libdw; even: 10
	 * frames, odd: the whole stack */
	for (int k = 0; k < 6; k++) {
		uint32_t max = (k & 1) ? 64 : 10;

		copy.h.frames = (uint16_t)max;
		for (int r = 0; r < ROUNDS; r++) {
			long n = k < 4 ? iters : iters / 200 + 1;
			double t0 = now_ns();

			for (long i = 0; i < n; i++) {
				if (k < 2)
					walk(&img, max, pcs, &w);
				else if (k < 4)
					walk_cached(&img, max, pcs, &w);
				else
					stack_unwind(c, getpid(), getpid(), &copy,
						     sizeof(copy.h) + snap.len, &dw.st, max);
			}
			t[r] = (now_ns() - t0) / (double)n;
		}
		qsort(t, ROUNDS, sizeof(t[0]), cmp_double);
		res[k] = t[ROUNDS / 2];
	}
	printf("walker_ns_per_stack_10_frames %.1f ns\n", res[0]);
	printf("walker_ns_per_stack_%u_frames %.1f ns\n", full, res[1]);
	printf("walker_cached_ns_per_stack_10_frames %.1f ns\n", res[2]);
	printf("walker_cached_ns_per_stack_%u_frames %.1f ns\n", full, res[3]);
	printf("libdw_ns_per_stack_10_frames %.1f ns\n", res[4]);
	printf("libdw_ns_per_stack_%u_frames %.1f ns\n", full, res[5]);
	printf("image_tables %u\nimage_rows %u\nimage_maps %u\n", img.ntabs, img.nrows,
	       img.nmaps);
	stack_image_free(&img);
	stack_tabset_free(set);
	cache_free(c);
	return 0;
}

/* ---- tables ----------------------------------------------------------------- */

static double median3(double a, double b, double c)
{
	return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

static int bench_build(int n, char **paths)
{
	char dir[] = "/tmp/uscope-unwalk-XXXXXX";
	double total = 0;

	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < n; i++) {
		const char *p = paths[i];
		const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
		struct stack_utab *u = NULL;
		const struct stack_utab *cu;
		struct stack_tabset *s;
		double b[3], wb[3], t0, w0;
		int err = 0;

		for (int k = 0; k < 3 && !err; k++) {
			t0 = now_ns();
			w0 = wall_ns();
			err = stack_utab_build(p, &u);
			b[k] = (now_ns() - t0) / 1e6;
			wb[k] = (wall_ns() - w0) / 1e6;
			if (!err && k < 2)
				stack_utab_free(u);
		}
		if (err) {
			printf("%s error %d\n", base, err);
			continue;
		}
		total += median3(b[0], b[1], b[2]);
		printf("%s rows %u\n%s bytes %zu\n%s build_ms %.2f ms (wall %.2f ms)\n", base,
		       u->tab.nrows, base, stack_utab_bytes(u), base, median3(b[0], b[1], b[2]),
		       median3(wb[0], wb[1], wb[2]));
		printf("%s fallback_rows", base);
		for (int k = STACK_OP_EXPR; k < STACK_OP_NR; k++)
			printf(" %s=%u", stack_op_name((unsigned)k), u->by_op[k]);
		printf("\n");
		stack_utab_free(u);
		/* the disk: written by a first session, read by the next */
		s = stack_tabset_new(dir);
		stack_tabset_get(s, p, &cu);
		stack_tabset_free(s);
		s = stack_tabset_new(dir);
		t0 = now_ns();
		err = stack_tabset_get(s, p, &cu);
		printf("%s disk_ms %.3f ms%s\n", base, (now_ns() - t0) / 1e6,
		       !err && cu->from_disk ? "" : " (not from disk!)");
		t0 = now_ns();
		for (int k = 0; k < 1000; k++)
			stack_tabset_get(s, p, &cu);
		printf("%s session_us %.3f us\n", base, (now_ns() - t0) / 1e3 / 1000);
		stack_tabset_free(s);
	}
	printf("total build_ms %.2f ms\n", total);
	{
		char cmd[64];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "walk"))
		return bench_walk(argc > 2 ? atol(argv[2]) : 200000);
	if (argc >= 3 && !strcmp(argv[1], "build"))
		return bench_build(argc - 2, argv + 2);
	fprintf(stderr, "usage: unwalk walk [ITERS] | unwalk build PATH...\n");
	return 2;
}
