/* bpfwalk: the stack walker run in the kernel (tests/tools/walk.bpf.c, the
 * tables in BPF array maps as the bpf engine will hold them) against the
 * same walker in user space, on this program's own stacks.
 *
 *   bpfwalk OBJECT [CALLS]
 *
 * Loads OBJECT (walk.bpf.o) with the image of this process (its mappings,
 * its modules' tables), attaches it to probe_here() and calls that
 * function from several stacks: a chain of calls, qsort's comparator
 * (frames in libc), a signal handler (the walk crosses the signal
 * trampoline) and a recursion deeper than the frames wanted. For each,
 * probe_here() walks its own stack in user space too: the callers (every
 * frame but the first, which is probe_here at its entry for the one and
 * inside it for the other) and the end must be the same. Then CALLS calls
 * time the program. Prints:
 *   CASE name same frames=N end=E          or  CASE name DIFF ... (exit 1)
 *   bpf_verified_insns N
 *   bpf_ns_per_walk X frames=N             (the walk alone, in the kernel)
 * Used by tests/e2e/test_unwtab.py. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "objfile/modules.h"
#include "stack/unwtab.h"

#define NOIPA __attribute__((noipa))
#define FRAMES 64

/* walk.bpf.c's */
struct result {
	struct stack_walk w;
	uint64_t pcs[STACK_WALK_MAX];
	uint64_t hits;
	uint64_t ns;
	uint64_t reads;
	uint64_t wbase;
	uint8_t win[512];
};

struct cfg {
	uint32_t nmaps;
	uint32_t max_frames;
	uint32_t use_cache;
};

static struct stack_image img;
static struct {
	struct stack_walk w;
	uint64_t pcs[STACK_WALK_MAX];
} user;
volatile long sink;
static bool walk_here = true;	/* probe_here walks its stack too (not when timing) */

static int read_self(void *ctx, uint64_t addr, uint64_t *val)
{
	struct iovec l = {val, 8}, r = {(void *)addr, 8};

	(void)ctx;
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) != 8;
}

/* Where the uprobe is; it also walks its own stack here, in user space. */
NOIPA long probe_here(long x)
{
	uint64_t ip, sp, bp;

	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	if (walk_here)
		stack_walk_image(&img, ip, sp, bp, FRAMES, read_self, NULL, user.pcs, &user.w);
	return x + 1;
}

#define LEVEL(n, m)                                                             \
	NOIPA long chain##n(long x)                                             \
	{                                                                       \
		long a = x * 3, r = chain##m(x + 1);                            \
		sink += a;                                                      \
		return r + a;                                                   \
	}
#define chain0 probe_here
LEVEL(1, 0)
LEVEL(2, 1)
LEVEL(3, 2)
LEVEL(4, 3)
LEVEL(5, 4)
LEVEL(6, 5)
LEVEL(7, 6)
LEVEL(8, 7)
LEVEL(9, 8)

static int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	sink += probe_here(x);
	return (x > y) - (x < y);
}

static void on_usr1(int sig)
{
	sink += chain3(sig);
}

NOIPA long deep(long n)
{
	long r = n ? deep(n - 1) : chain9(0);

	sink += n;
	return r + 1;
}

static void run_case(const char *name)
{
	if (!strcmp(name, "chain")) {
		sink += chain9(1);
	} else if (!strcmp(name, "qsort")) {
		int v[2] = {2, 1};

		qsort(v, 2, sizeof(v[0]), cmp);
	} else if (!strcmp(name, "signal")) {
		signal(SIGUSR1, on_usr1);
		raise(SIGUSR1);
	} else {
		sink += deep(100);
	}
}

static int fill(struct bpf_object *obj)
{
	struct {
		const char *name;
		const void *v;
		uint32_t n, size;
	} arr[] = {
		{"tabs", img.tabs, img.ntabs, sizeof(*img.tabs)},
		{"rows", img.rows, img.nrows, sizeof(*img.rows)},
		{"idx", img.idx, img.nidx, sizeof(*img.idx)},
		{"maps", img.maps, img.nmaps, sizeof(*img.maps)},
	};
	struct cfg c = {img.nmaps, FRAMES, 0};
	uint32_t zero = 0;

	for (size_t k = 0; k < sizeof(arr) / sizeof(arr[0]); k++) {
		int fd = bpf_object__find_map_fd_by_name(obj, arr[k].name);

		for (uint32_t i = 0; i < arr[k].n; i++)
			if (bpf_map_update_elem(fd, &i, (const char *)arr[k].v + (size_t)i * arr[k].size,
						BPF_ANY))
				return -errno;
	}
	return bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "config"), &zero, &c,
				   BPF_ANY) ? -errno : 0;
}

static int compare(const char *name, const struct result *r)
{
	/* frame 0: probe_here's entry (bpf), inside it (user space) */
	bool same = r->w.n == user.w.n && r->w.end == user.w.end && r->w.end_pc == user.w.end_pc &&
		    r->w.nsig == user.w.nsig && r->pcs[0] == (uint64_t)probe_here &&
		    !memcmp(r->pcs + 1, user.pcs + 1, 8 * (r->w.n ? r->w.n - 1 : 0));

	if (same) {
		printf("CASE %s same frames=%u end=%u sig=%u\n", name, r->w.n, r->w.end, r->w.nsig);
		return 0;
	}
	printf("CASE %s DIFF bpf: %u frames end %u at %#llx why %u; user: %u frames end %u at "
	       "%#llx why %u\n", name, r->w.n, r->w.end, (unsigned long long)r->w.end_pc, r->w.why,
	       user.w.n, user.w.end, (unsigned long long)user.w.end_pc, user.w.why);
	for (uint32_t i = 0; i < r->w.n || i < user.w.n; i++)
		printf("  #%u %#llx %#llx\n", i, (unsigned long long)(i < r->w.n ? r->pcs[i] : 0),
		       (unsigned long long)(i < user.w.n ? user.pcs[i] : 0));
	return 1;
}

int main(int argc, char **argv)
{
	const char *cases[] = {"chain", "qsort", "signal", "deep"};
	struct stack_tabset *set = stack_tabset_new(NULL);
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_link *link;
	struct bpf_prog_info info = {0};
	uint32_t ilen = sizeof(info), zero = 0;
	static struct result r;
	struct proc_map *m = NULL;
	ssize_t nm;
	uint64_t off = 0;
	long calls = argc > 2 ? atol(argv[2]) : 20000;
	int outfd, bad = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: bpfwalk OBJECT [CALLS]\n");
		return 2;
	}
	if (!set || stack_image_proc(&img, set, getpid())) {
		fprintf(stderr, "bpfwalk: no image of this process\n");
		return 1;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "bpfwalk: cannot open %s\n", argv[1]);
		return 1;
	}
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "tabs"), img.ntabs);
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "rows"), img.nrows);
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "idx"), img.nidx);
	if (bpf_object__load(obj) || fill(obj)) {
		fprintf(stderr, "bpfwalk: cannot load %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "walk");
	bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &ilen);
	/* probe_here's file offset in this executable */
	nm = procmaps_read(getpid(), &m);
	for (ssize_t i = 0; i < nm; i++)
		if ((uint64_t)probe_here >= m[i].start && (uint64_t)probe_here < m[i].end)
			off = (uint64_t)probe_here - m[i].start + m[i].pgoff;
	link = bpf_program__attach_uprobe(prog, false, getpid(), "/proc/self/exe", off);
	if (!link) {
		fprintf(stderr, "bpfwalk: cannot attach: %s\n", strerror(errno));
		return 1;
	}
	outfd = bpf_object__find_map_fd_by_name(obj, "out");
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		run_case(cases[k]);
		bpf_map_lookup_elem(outfd, &zero, &r);
		bad |= compare(cases[k], &r);
	}
	printf("bpf_verified_insns %u\n", info.verified_insns);
	/* the walk's own time: the chain of ten frames and main's callers */
	/* the walk's own time, the chain of ten frames and main's callers:
	 * without the row cache, then with it (the same stack: hits) */
	walk_here = false;
	for (uint32_t cached = 0; cached < 2; cached++) {
		struct cfg c = {img.nmaps, argc > 3 ? (uint32_t)atoi(argv[3]) : FRAMES, cached};
		uint64_t hits, ns, reads;

		bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "config"), &zero, &c,
				    BPF_ANY);
		bpf_map_lookup_elem(outfd, &zero, &r);
		hits = r.hits;
		ns = r.ns;
		reads = r.reads;
		for (long i = 0; i < calls; i++)
			sink += chain9(i);
		bpf_map_lookup_elem(outfd, &zero, &r);
		printf("bpf_%sns_per_walk %.1f frames=%u reads=%.1f\n", cached ? "cached_" : "",
		       r.hits > hits ? (double)(r.ns - ns) / (double)(r.hits - hits) : 0.0, r.w.n,
		       r.hits > hits ? (double)(r.reads - reads) / (double)(r.hits - hits) : 0.0);
	}
	bpf_link__destroy(link);
	bpf_object__close(obj);
	procmaps_free(m, (size_t)nm);
	stack_image_free(&img);
	stack_tabset_free(set);
	return bad;
}
