/* unwcheck: the stack walker (src/stack/stack_walk.h, its tables compiled
 * by src/stack/unwtab.c) against the libdw unwinder $ustack uses today
 * (src/stack/unwind.c), on the same stacks, frame by frame.
 *
 * It runs a program under ptrace and stops it: at breakpoints (-b), at
 * every instruction for a while after the first one (-S), or at random
 * moments (-s). At each stop it copies the registers and the top of the
 * stack as an engine's $ustack does (struct fetch_stack_hdr, 8 KiB), has
 * libdw unwind the copy, has the walker walk the same copy, and compares
 * the two struct usc_stack: frames, exact and signal-frame bits, the end
 * and where. A walk that stops on a row it cannot follow is a fallback,
 * counted by why.
 *
 *   unwcheck [-b PATH:FILEOFF]... [-S STEPS] [-s SAMPLES] [-i US] [-n STOPS]
 *            [-f FRAMES] [-q] -- PROGRAM ARGS...
 *
 * -b: a breakpoint at the file offset of the file mapped at exec; -S: after
 * its first hit, single-step that thread STEPS instructions; -s: SAMPLES
 * random stops (SIGSTOP to a thread at random, every US microseconds on
 * average), the program killed after the last; -n: at most STOPS stops;
 * -f: frames wanted (64); -q: no stack printed for a fallback.
 *
 * Prints a line for each difference (DIFF) and fallback (FALLBACK), and at
 * the end:
 *   SUMMARY stops=N same=N fallback=N differ=N frames=N sig=N sig_same=N
 * (sig: libdw's stacks through a signal frame; sig_same: the walker's
 * same stacks through one)
 *   FALLBACKS why=count ...
 *   ENDS end=count ...
 * Exits 0 when the program ran and was stopped at least once, 2 on usage
 * errors, 1 on failures. Used by tests/e2e/test_unwtab.py. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/log.h"
#include "objfile/modules.h"
#include "stack/stack.h"
#include "stack/unwtab.h"

#define MAX_BPS 16
#define COPY_BYTES USC_STACK_BYTES

struct bp {
	char *path;
	uint64_t off, addr;
	long orig;
	bool set;
};

static struct {
	struct bp bps[MAX_BPS];
	int nbps;
	long steps, samples, stops_max;
	long interval_us;
	uint32_t frames;
	bool quiet;
	/* state */
	pid_t pid;
	struct usc_cache *cache;
	struct stack_tabset *set;
	struct stack_image img;
	bool have_img;
	long stops, same, fallback, differ, frames_total;
	long sig, sig_same;	/* libdw's stacks through a signal frame; the same */
	long why[32], ends[16];
	long stepping;		/* steps left */
	bool sampling;		/* -s given */
	pid_t step_tid;
	pid_t pending[64];	/* threads sent a SIGSTOP by us */
	int npending;
} g = {.frames = USC_STACK_FRAMES, .interval_us = 2000};

static const char *const end_names[] = {
	[USC_STACK_END_OUTERMOST] = "outermost", [USC_STACK_END_LIMIT] = "limit",
	[USC_STACK_END_COPY] = "copy", [USC_STACK_END_NOCFI] = "nocfi",
	[USC_STACK_END_NOMODULE] = "nomodule", [USC_STACK_END_UNREAD] = "unread",
	[USC_STACK_END_ERROR] = "error",
};

static void on_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= USC_LOG_WARN)
		fprintf(stderr, "unwcheck: %s\n", msg);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* ---- the stack copy, as an engine makes it -------------------------------- */

struct copy {
	struct fetch_stack_hdr h;
	uint8_t bytes[COPY_BYTES];
};

static void regs_to_hdr(const struct user_regs_struct *r, struct fetch_stack_hdr *h)
{
	uint64_t *v = h->regs;

	v[USC_REG_AX] = r->rax;
	v[USC_REG_BX] = r->rbx;
	v[USC_REG_CX] = r->rcx;
	v[USC_REG_DX] = r->rdx;
	v[USC_REG_SI] = r->rsi;
	v[USC_REG_DI] = r->rdi;
	v[USC_REG_BP] = r->rbp;
	v[USC_REG_SP] = r->rsp;
	v[USC_REG_R8] = r->r8;
	v[USC_REG_R9] = r->r9;
	v[USC_REG_R10] = r->r10;
	v[USC_REG_R11] = r->r11;
	v[USC_REG_R12] = r->r12;
	v[USC_REG_R13] = r->r13;
	v[USC_REG_R14] = r->r14;
	v[USC_REG_R15] = r->r15;
	v[USC_REG_IP] = r->rip;
}

/* Up to COPY_BYTES from sp, a page at a time up to where the stack's
 * mapping ends. */
static uint32_t copy_stack(pid_t pid, uint64_t sp, uint8_t *dst)
{
	uint32_t done = 0;

	while (done < COPY_BYTES) {
		uint64_t a = sp + done, room = 4096 - (a & 4095);
		size_t want = room < COPY_BYTES - done ? room : COPY_BYTES - done;
		struct iovec l = {dst + done, want}, r = {(void *)a, want};
		ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);

		if (n <= 0)
			break;
		done += (uint32_t)n;
		if ((size_t)n < want)
			break;
	}
	return done;
}

struct rd {
	uint64_t sp;
	const uint8_t *b;
	uint32_t len;
};

static int read_copy(void *ctx, uint64_t addr, uint64_t *val)
{
	const struct rd *r = ctx;

	if (addr < r->sp || addr - r->sp > r->len || r->len - (addr - r->sp) < 8)
		return 1;
	memcpy(val, r->b + (addr - r->sp), 8);
	return 0;
}

/* ---- comparing ------------------------------------------------------------ */

static void frame_name(pid_t pid, const struct usc_stack *st, uint32_t i, char *buf, size_t len)
{
	struct stack_sym s[8];
	size_t n = stack_syms(g.cache, pid, st, i, s, 8);
	const struct stack_sym *f = n ? &s[n - 1] : NULL;

	if (!f)
		snprintf(buf, len, "%#llx", (unsigned long long)st->pc[i]);
	else if (f->func)
		snprintf(buf, len, "%#llx %s+%#llx (%s)%s", (unsigned long long)st->pc[i], f->func,
			 (unsigned long long)f->off, f->module ? f->module : "?",
			 f->signal ? " [signal]" : "");
	else
		snprintf(buf, len, "%#llx (%s)", (unsigned long long)st->pc[i],
			 f->module ? f->module : "?");
}

static void print_stack(const char *who, pid_t pid, const struct usc_stack *st)
{
	char name[512];

	printf("  %s: %u frames, end %s at %#llx\n", who, st->n, end_names[st->end],
	       (unsigned long long)st->end_pc);
	for (uint32_t i = 0; i < st->n; i++) {
		frame_name(pid, st, i, name, sizeof(name));
		printf("    #%-2u %s%s%s\n", i, name, usc_stack_exact(st, i) ? " exact" : "",
		       usc_stack_sigframe(st, i) ? " sigframe" : "");
	}
}

/* FALLBACK why=W frame=I pc=PC path=PATH fileoff=OFF sym=NAME */
static void print_fallback(const struct stack_walk *w, const struct usc_stack *dw)
{
	struct proc_map *m = NULL;
	ssize_t n = procmaps_read(g.pid, &m);
	const char *path = "?", *sym = "?";
	uint64_t off = 0;
	struct stack_sym syms[8];
	size_t ns = 0;

	for (ssize_t i = 0; i < n; i++)
		if (w->end_pc >= m[i].start && w->end_pc < m[i].end && m[i].path) {
			path = m[i].path;
			off = w->end_pc - m[i].start + m[i].pgoff;
		}
	/* the frame as libdw has it: its name */
	for (uint32_t i = 0; i < dw->n; i++)
		if (dw->pc[i] == w->end_pc && i + 1 == w->n) {
			ns = stack_syms(g.cache, g.pid, dw, i, syms, 8);
			if (ns && syms[ns - 1].func)
				sym = syms[ns - 1].func;
		}
	printf("FALLBACK why=%s frame=%u pc=%#llx path=%s fileoff=%#llx sym=%s\n",
	       stack_why_name(w->why), w->n - 1, (unsigned long long)w->end_pc, path,
	       (unsigned long long)off, sym);
	if (n > 0)
		procmaps_free(m, (size_t)n);
}

/* pc in the process's vDSO? */
static bool in_vdso(pid_t pid, uint64_t pc)
{
	struct proc_map *m = NULL;
	ssize_t n = procmaps_read(pid, &m);
	bool in = false;

	for (ssize_t i = 0; i < n && !in; i++)
		in = m[i].path && !strcmp(m[i].path, "[vdso]") && pc >= m[i].start &&
		     pc < m[i].end;
	if (n > 0)
		procmaps_free(m, (size_t)n);
	return in;
}

/* Both ends mean "no caller known here": in the vDSO (no file: the walker
 * ends as no module; libdwfl, which at times has a module over it from the
 * maps it groups, as no CFI). A probe never fires in the vDSO, only a
 * sampled stop is there: the same stack. */
static bool same_end(const struct usc_stack *a, const struct usc_stack *b)
{
	bool ends = (a->end == USC_STACK_END_NOCFI || a->end == USC_STACK_END_NOMODULE) &&
		    (b->end == USC_STACK_END_NOCFI || b->end == USC_STACK_END_NOMODULE);

	return a->end == b->end || (ends && a->end_pc == b->end_pc && in_vdso(g.pid, a->end_pc));
}

static bool same_stack(const struct usc_stack *a, const struct usc_stack *b)
{
	if (a->n != b->n || a->end_pc != b->end_pc || !same_end(a, b))
		return false;
	for (uint32_t i = 0; i < a->n; i++)
		if (a->pc[i] != b->pc[i] || usc_stack_exact(a, i) != usc_stack_exact(b, i) ||
		    usc_stack_sigframe(a, i) != usc_stack_sigframe(b, i))
			return false;
	return true;
}

static void walk_copy(const struct copy *c, uint32_t len, uint64_t *pcs, struct stack_walk *w)
{
	struct rd rd = {c->h.regs[USC_REG_SP], c->bytes, len};

	stack_walk_image(&g.img, c->h.regs[USC_REG_IP], c->h.regs[USC_REG_SP],
			 c->h.regs[USC_REG_BP], g.frames, read_copy, &rd, pcs, w);
}

static int image_refresh(pid_t pid)
{
	if (g.have_img)
		stack_image_free(&g.img);
	g.have_img = stack_image_proc(&g.img, g.set, pid) == 0;
	return g.have_img ? 0 : -1;
}

static void check(pid_t tid, const struct user_regs_struct *regs)
{
	static struct copy c;
	static union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * STACK_WALK_MAX];
	} dw, wk;
	uint64_t pcs[STACK_WALK_MAX];
	struct stack_walk w;
	uint32_t len;

	memset(&c.h, 0, sizeof(c.h));
	regs_to_hdr(regs, &c.h);
	len = copy_stack(tid, regs->rsp, c.bytes);
	c.h.len = len;
	c.h.frames = (uint16_t)g.frames;
	c.h.end = len == COPY_BYTES ? FETCH_STACK_FULL : len ? FETCH_STACK_MAPEND :
		  FETCH_STACK_UNREAD;
	if (stack_unwind(g.cache, g.pid, tid, &c, sizeof(c.h) + len, &dw.st, g.frames))
		return;
	if (dw.st.end == USC_STACK_END_NOMODULE) {
		/* libdw's maps are read again once a second at most: a module
		 * loaded since, with maps read now */
		struct usc_cache *fresh = cache_new();

		if (fresh) {
			cache_free(g.cache);
			g.cache = fresh;
			if (stack_unwind(g.cache, g.pid, tid, &c, sizeof(c.h) + len, &dw.st,
					 g.frames))
				return;
		}
	}
	if (!g.have_img && image_refresh(g.pid))
		return;
	walk_copy(&c, len, pcs, &w);
	if (w.end == STACK_WALK_NOMODULE && image_refresh(g.pid) == 0)
		walk_copy(&c, len, pcs, &w);	/* a module loaded since */
	g.stops++;
	g.frames_total += dw.st.n;
	g.ends[dw.st.end < 16 ? dw.st.end : 15]++;
	for (uint32_t i = 0; i < dw.st.n; i++)
		if (usc_stack_sigframe(&dw.st, i)) {
			g.sig++;
			break;
		}
	if (w.end == STACK_WALK_FALLBACK) {
		g.fallback++;
		g.why[w.why < 32 ? w.why : 31]++;
		print_fallback(&w, &dw.st);
		if (!g.quiet)
			print_stack("libdw", g.pid, &dw.st);
		return;
	}
	stack_walk_usc(&w, pcs, true, &wk.st);
	if (same_stack(&dw.st, &wk.st)) {
		g.same++;
		g.sig_same += w.nsig > 0;
		return;
	}
	g.differ++;
	printf("DIFF tid %d pc %#llx sp %#llx", (int)tid, (unsigned long long)regs->rip,
	       (unsigned long long)regs->rsp);
	{
		struct proc_map *m = NULL;
		ssize_t n = procmaps_read(g.pid, &m);

		for (ssize_t i = 0; i < n; i++)
			if (regs->rip >= m[i].start && regs->rip < m[i].end)
				printf(" in %llx-%llx %s %s", (unsigned long long)m[i].start,
				       (unsigned long long)m[i].end, m[i].perms,
				       m[i].path ? m[i].path : "");
		if (n > 0)
			procmaps_free(m, (size_t)n);
	}
	printf("\n");
	print_stack("libdw", g.pid, &dw.st);
	print_stack("walker", g.pid, &wk.st);
}

/* ---- ptrace ---------------------------------------------------------------- */

static int bp_insert(pid_t pid, struct bp *b)
{
	long w;

	errno = 0;
	w = ptrace(PTRACE_PEEKTEXT, pid, (void *)b->addr, NULL);
	if (errno)
		return -errno;
	b->orig = w;
	if (ptrace(PTRACE_POKETEXT, pid, (void *)b->addr, (void *)((w & ~0xffL) | 0xcc)))
		return -errno;
	b->set = true;
	return 0;
}

static void bp_remove(pid_t pid, struct bp *b)
{
	if (b->set)
		ptrace(PTRACE_POKETEXT, pid, (void *)b->addr, (void *)b->orig);
	b->set = false;
}

static int bps_place(pid_t pid)
{
	struct proc_map *m = NULL;
	ssize_t n = procmaps_read(pid, &m);

	if (n < 0)
		return (int)n;
	for (int i = 0; i < g.nbps; i++) {
		if (procmaps_file_offset_to_addr(m, (size_t)n, g.bps[i].path, g.bps[i].off,
						 &g.bps[i].addr) ||
		    bp_insert(pid, &g.bps[i])) {
			fprintf(stderr, "unwcheck: cannot place a breakpoint at %s:%#llx\n",
				g.bps[i].path, (unsigned long long)g.bps[i].off);
			procmaps_free(m, (size_t)n);
			return -1;
		}
	}
	procmaps_free(m, (size_t)n);
	return 0;
}

static struct bp *bp_at(uint64_t addr)
{
	for (int i = 0; i < g.nbps; i++)
		if (g.bps[i].addr == addr)
			return &g.bps[i];
	return NULL;
}

static bool take_pending(pid_t tid)
{
	for (int i = 0; i < g.npending; i++)
		if (g.pending[i] == tid) {
			g.pending[i] = g.pending[--g.npending];
			return true;
		}
	return false;
}

/* Step tid over breakpoint b (its original byte back for one instruction). */
static int step_over(pid_t tid, struct bp *b)
{
	int st;

	/* memory goes through the stopped thread (the others may run) */
	bp_remove(tid, b);
	if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL))
		return -1;
	while (waitpid(tid, &st, __WALL) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) || WIFSIGNALED(st))
		return -1;
	return bp_insert(tid, b);
}

static pid_t launch(char **argv)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) {
		fprintf(stderr, "unwcheck: %s did not start\n", argv[0]);
		return -1;
	}
	ptrace(PTRACE_SETOPTIONS, pid, NULL,
	       (void *)(long)(PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL));
	return pid;
}

static void maybe_sample(double *next)
{
	char path[64];
	pid_t tids[256];
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (g.samples <= 0 || now_us() < *next || g.npending)
		return;
	*next = now_us() + (double)g.interval_us * (0.5 + (double)(rand() % 1000) / 1000.0);
	/* a thread at random */
	snprintf(path, sizeof(path), "/proc/%d/task", (int)g.pid);
	d = opendir(path);
	while (d && n < 256 && (de = readdir(d)))
		if (de->d_name[0] != '.')
			tids[n++] = atoi(de->d_name);
	if (d)
		closedir(d);
	if (!n)
		return;
	n = tids[rand() % n];
	if (syscall(SYS_tgkill, g.pid, n, SIGSTOP) == 0) {
		g.pending[g.npending++] = n;
		g.samples--;
	}
}

/* Enough stops: the run ends (the program is killed). */
static bool enough(void)
{
	if (g.stops_max > 0 && g.stops >= g.stops_max)
		return true;
	return g.sampling && g.samples <= 0 && !g.npending;
}

static int run(void)
{
	double next = now_us() + (double)g.interval_us;
	bool started = false;

	ptrace(PTRACE_CONT, g.pid, NULL, NULL);
	for (;;) {
		struct user_regs_struct r;
		int st, sig;
		pid_t tid = waitpid(-1, &st, __WALL | (g.samples > 0 ? WNOHANG : 0));

		if (tid == 0) {
			maybe_sample(&next);
			usleep(100);
			continue;
		}
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			return started ? 0 : -1;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (tid == g.pid)
				return 0;
			continue;
		}
		sig = WSTOPSIG(st);
		started = true;
		if (sig == SIGTRAP && (st >> 16) == PTRACE_EVENT_CLONE) {
			ptrace(PTRACE_CONT, tid, NULL, NULL);
			continue;
		}
		if (sig == SIGSTOP && !take_pending(tid)) {
			ptrace(PTRACE_CONT, tid, NULL, NULL);	/* a new thread's first stop */
			continue;
		}
		if (sig != SIGTRAP && sig != SIGSTOP) {
			ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
			continue;
		}
		ptrace(PTRACE_GETREGS, tid, NULL, &r);
		if (sig == SIGSTOP) {
			check(tid, &r);
		} else if (g.stepping && tid == g.step_tid) {
			struct bp *b = bp_at(r.rip);

			if (b)
				bp_remove(tid, b);	/* stepping sees every instruction */
			check(tid, &r);
			if (--g.stepping > 0 && (g.stops_max <= 0 || g.stops < g.stops_max)) {
				ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL);
				continue;
			}
			g.stepping = 0;
		} else {
			struct bp *b = bp_at(r.rip - 1);

			if (!b) {	/* a trap of the program's own */
				ptrace(PTRACE_CONT, tid, NULL, (void *)(long)SIGTRAP);
				continue;
			}
			r.rip--;
			ptrace(PTRACE_SETREGS, tid, NULL, &r);
			check(tid, &r);
			if (g.steps > 0) {
				g.stepping = g.steps;
				g.steps = 0;
				g.step_tid = tid;
				bp_remove(tid, b);
				ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL);
				continue;
			}
			if (step_over(tid, b)) {
				fprintf(stderr, "unwcheck: cannot step %d over the breakpoint: %s\n",
					(int)tid, strerror(errno));
				return -1;
			}
		}
		if (enough())
			return 0;
		ptrace(PTRACE_CONT, tid, NULL, NULL);	/* our stop: no signal */
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: unwcheck [-b PATH:FILEOFF]... [-S STEPS] [-s SAMPLES] [-i US] "
			"[-n STOPS] [-f FRAMES] [-q] -- PROGRAM ARGS...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int o, rc;

	while ((o = getopt(argc, argv, "b:S:s:i:n:f:q")) != -1) {
		char *colon;

		switch (o) {
		case 'b':
			colon = strrchr(optarg, ':');
			if (!colon || g.nbps == MAX_BPS)
				usage();
			*colon = 0;
			g.bps[g.nbps].path = optarg;
			g.bps[g.nbps++].off = strtoull(colon + 1, NULL, 0);
			break;
		case 'S': g.steps = atol(optarg); break;
		case 's':
			g.samples = atol(optarg);
			g.sampling = g.samples > 0;
			break;
		case 'i': g.interval_us = atol(optarg); break;
		case 'n': g.stops_max = atol(optarg); break;
		case 'f': g.frames = (uint32_t)atol(optarg); break;
		case 'q': g.quiet = true; break;
		default: usage();
		}
	}
	if (optind >= argc || !g.frames || g.frames > STACK_WALK_MAX)
		usage();
	usc_set_log(on_log, NULL);
	/* whole lines: the program checked writes to the same stdout */
	setvbuf(stdout, NULL, _IOLBF, 0);
	srand((unsigned)getpid());
	g.cache = cache_new();
	g.set = stack_tabset_new(NULL);
	g.pid = launch(argv + optind);
	if (!g.cache || !g.set || g.pid < 0)
		return 1;
	if (bps_place(g.pid)) {
		kill(g.pid, SIGKILL);
		return 1;
	}
	rc = run();
	kill(g.pid, SIGKILL);
	while (waitpid(-1, NULL, __WALL) > 0)
		;
	printf("SUMMARY stops=%ld same=%ld fallback=%ld differ=%ld frames=%ld sig=%ld sig_same=%ld\n",
	       g.stops, g.same, g.fallback, g.differ, g.frames_total, g.sig, g.sig_same);
	printf("FALLBACKS");
	for (int i = 0; i < 32; i++)
		if (g.why[i])
			printf(" %s=%ld", stack_why_name((unsigned)i), g.why[i]);
	printf("\nENDS");
	for (int i = 0; i < 16; i++)
		if (g.ends[i])
			printf(" %s=%ld", i <= USC_STACK_END_ERROR ? end_names[i] : "?", g.ends[i]);
	printf("\n");
	if (g.have_img)
		stack_image_free(&g.img);
	stack_tabset_free(g.set);
	cache_free(g.cache);
	return rc || !g.stops;
}
