/* Python frames of live interpreters, against Python's own traceback.
 *
 * For each CPython here (Debian's stripped /usr/bin/python3.11, and each
 * pyenv 3.11, 3.12 and 3.13 build, whose runtime is in libpython), the test
 * runs tests/targets/pystack.py under ptrace with libpymark.so preloaded,
 * puts a breakpoint on pymark's first byte (a nop: the thread resumes without
 * stepping), and at every hit:
 *   - finds the thread's PyThreadState three ways, which must agree: the
 *     runtime's thread list by TID, CPython's thread-specific key through the
 *     thread's %fs base (walk.h's tss), and for a main-thread hit (GIL held,
 *     ctypes.PyDLL) on 3.11 _PyRuntime.gilstate.tstate_current;
 *   - walks its frames (walk.h) and symbolizes them (symbolize.h) from the
 *     stopped process's memory; a walk with room for 16 frames must give the
 *     same first 16.
 * The workload prints traceback.extract_stack() at each of those points; the
 * frames must be equal one by one (qualname, file, line), each hit on the
 * thread that printed it, and no hit more or fewer; on 3.11 one frame, still
 * in its prologue, is in the chain but not in traceback's stack. Entry flags: the
 * outermost frame of each stack, sorted()'s key function and a with's
 * __exit__ are entered from C; plain Python-to-Python calls are not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "fixture.h"
#include "core/log.h"
#include "python/detect.h"
#include "python/symbolize.h"

#define PYWALK_FN(name) tw_##name
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) \
	(python_mem_read((const struct python_mem *)(env), (addr), (dst), (len)) != 0)
#include "python/walk.h"

#define MAX_HITS 64

/* Python builds beside Debian's: pyenv's ($PYENV_ROOT, else ~/.pyenv), by a
 * glob under its versions/ directory. 0 with g filled, or non-zero (none). */
static int pyenv_glob(const char *pattern, glob_t *g)
{
	const char *root = getenv("PYENV_ROOT"), *home = getenv("HOME");
	char pat[PATH_MAX];

	if (root && *root)
		snprintf(pat, sizeof(pat), "%s/versions/%s", root, pattern);
	else
		snprintf(pat, sizeof(pat), "%s/.pyenv/versions/%s", home ? home : "/root", pattern);
	return glob(pat, 0, NULL, g);
}
#define CUT 16

static char tmpdir[256];
static char fxdir[PATH_MAX + 64];

struct hit {
	int tag;
	pid_t tid;
	int n;				/* frames traceback shows */
	char *frames[PYTHON_FRAMES_MAX];	/* "qualname\tfile\tline", innermost first */
	uint32_t flags[PYTHON_FRAMES_MAX];
};

struct run {
	const char *python;
	pid_t pid;
	struct python_runtime rt;
	struct python_procmem pm;
	struct python_mem mem;
	struct python_sym *sym;
	uint64_t pymark;
	struct hit hits[MAX_HITS];
	int nhits, gil_checked, hidden;
};

static void fx(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static long peek(pid_t pid, uint64_t addr)
{
	long v;

	errno = 0;
	v = ptrace(PTRACE_PEEKDATA, pid, (void *)addr, NULL);
	assert_int_equal(errno, 0);
	return v;
}

static void poke_byte(pid_t pid, uint64_t addr, uint8_t b, uint8_t *old)
{
	long w = peek(pid, addr);

	if (old)
		*old = (uint8_t)w;
	w = (w & ~0xffL) | b;
	assert_int_equal(ptrace(PTRACE_POKEDATA, pid, (void *)addr, (void *)w), 0);
}

static uint64_t auxv_entry(pid_t pid)
{
	char path[64];
	uint64_t kv[2];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	f = fopen(path, "rb");
	assert_non_null(f);
	while (fread(kv, sizeof(kv), 1, f) == 1)
		if (kv[0] == 9) {	/* AT_ENTRY */
			fclose(f);
			return kv[1];
		}
	fclose(f);
	fail_msg("no AT_ENTRY");
	return 0;
}

/* pymark's run-time address in the process. */
static uint64_t find_pymark(pid_t pid, const char *lib)
{
	struct proc_map *maps;
	struct objfile *ef;
	const struct objfile_sym *sym;
	uint64_t off, addr = 0;
	ssize_t n;
	char real[PATH_MAX];

	assert_non_null(realpath(lib, real));
	assert_int_equal(objfile_open(real, &ef), 0);
	assert_int_equal(objfile_func_lookup(ef, "pymark", &sym, NULL, NULL), 0);
	assert_int_equal(objfile_vaddr_to_offset(ef, sym->vaddr, &off), 0);
	n = procmaps_read(pid, &maps);
	assert_true(n > 0);
	assert_int_equal(procmaps_file_offset_to_addr(maps, (size_t)n, real, off, &addr), 0);
	procmaps_free(maps, (size_t)n);
	objfile_close(ef);
	return addr;
}

/* Start the workload stopped at its entry point, every library mapped. */
static void start(struct run *r, const char *out)
{
	char lib[PATH_MAX], script[PATH_MAX];
	struct user_regs_struct regs;
	uint64_t entry;
	uint8_t orig;
	int st;

	fx(lib, sizeof(lib), "libpymark.so");
	fx(script, sizeof(script), "pystack.py");
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (!r->pid) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 1) < 0 || ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		setenv("LD_PRELOAD", lib, 1);
		unsetenv("PYTHONPATH");
		execl(r->python, r->python, script, lib, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(r->pid, &st, 0), r->pid);
	assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP);	/* the exec */
	assert_int_equal(ptrace(PTRACE_SETOPTIONS, r->pid, NULL,
				(void *)(PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL)), 0);
	entry = auxv_entry(r->pid);
	poke_byte(r->pid, entry, 0xcc, &orig);
	assert_int_equal(ptrace(PTRACE_CONT, r->pid, NULL, NULL), 0);
	assert_int_equal(waitpid(r->pid, &st, 0), r->pid);
	assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP);
	assert_int_equal(ptrace(PTRACE_GETREGS, r->pid, NULL, &regs), 0);
	assert_int_equal(regs.rip, entry + 1);
	poke_byte(r->pid, entry, orig, NULL);
	regs.rip = entry;
	assert_int_equal(ptrace(PTRACE_SETREGS, r->pid, NULL, &regs), 0);

	r->pymark = find_pymark(r->pid, lib);
	poke_byte(r->pid, r->pymark, 0xcc, &orig);
	assert_int_equal(orig, 0x90);
	assert_int_equal(python_detect_pid(r->pid, &r->rt), 0);
	python_procmem_init(&r->pm, r->pid, &r->mem);
	r->sym = python_sym_new(r->rt.off, &r->mem, &r->rt.types);
	assert_non_null(r->sym);
}

/* The thread state of the stopped thread tid, three ways. */
static uint64_t thread_state(struct run *r, pid_t tid, const struct user_regs_struct *regs,
			     int tag)
{
	const struct python_offsets *off = r->rt.off;
	uint64_t by_list, by_key, current;
	uint32_t key;

	/* (before 3.11 a thread state has no TID: its pthread_t, the thread
	 * pointer) */
	if (off->ts_native_thread_id != PYOFF_NONE)
		assert_int_equal(python_find_tstate(off, &r->mem, r->rt.runtime, tid, &by_list), 0);
	else
		assert_int_equal(python_find_tstate_by(off, &r->mem, r->rt.runtime, off->ts_thread_id,
						       regs->fs_base, &by_list), 0);
	assert_int_equal(python_tss_key(off, &r->mem, r->rt.runtime, &key), 0);
	assert_int_equal(tw_tss(python_glibc_offsets(), regs->fs_base, key, &by_key, &r->mem), 0);
	if (by_key != by_list)
		fail_msg("tag %d: thread %d: state %#llx by its key, %#llx in the list", tag, (int)tid,
			 (unsigned long long)by_key, (unsigned long long)by_list);
	if (tag < 100 && off->rt_tstate_current != PYOFF_NONE) {
		assert_int_equal(python_mem_read(&r->mem, r->rt.runtime + off->rt_tstate_current,
						 &current, 8), 0);
		assert_int_equal(current, by_list);
		r->gil_checked++;
	}
	return by_list;
}

static void on_hit(struct run *r, pid_t tid, const struct user_regs_struct *regs)
{
	struct python_frame full[PYTHON_FRAMES_MAX], cut[CUT];
	struct python_walk w, wc;
	struct hit *h;
	uint64_t ts;

	assert_true(r->nhits < MAX_HITS);
	h = &r->hits[r->nhits++];
	h->tag = (int)regs->rdi;
	h->tid = tid;
	ts = thread_state(r, tid, regs, h->tag);
	assert_int_equal(tw_walk(r->rt.off, ts, &w, full, PYTHON_FRAMES_MAX, &r->mem), PYWALK_END);
	assert_int_equal(tw_walk(r->rt.off, ts, &wc, cut, CUT, &r->mem),
			 w.n > CUT ? PYWALK_FULL : PYWALK_END);
	assert_int_equal(wc.n, w.n > CUT ? CUT : w.n);
	assert_memory_equal(cut, full, wc.n * sizeof(cut[0]));
	if (r->nhits == 1) {
		/* the same walk through /proc/PID/mem, the reader's other way */
		struct python_procmem pm;
		struct python_mem mem;
		struct python_frame again[PYTHON_FRAMES_MAX];
		char path[64];

		python_procmem_init(&pm, r->pid, &mem);
		snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
		pm.fd = open(path, O_RDONLY);
		assert_true(pm.fd >= 0);
		assert_int_equal(tw_walk(r->rt.off, ts, &wc, again, PYTHON_FRAMES_MAX, &mem),
				 PYWALK_END);
		assert_int_equal(wc.n, w.n);
		assert_memory_equal(again, full, w.n * sizeof(full[0]));
		assert_int_equal(python_mem_read(&mem, 8, again, 8), -EFAULT);
		assert_int_equal(python_mem_read(&r->mem, 8, again, 8), -EFAULT);
		python_procmem_close(&pm);
	}
	for (uint32_t i = 0; i < w.n; i++) {
		struct python_frame_info fi;
		int err = python_sym_frame(r->sym, &full[i], true, &fi);

		if (err)
			fail_msg("tag %d frame %u (code %#llx): %s", h->tag, i,
				 (unsigned long long)full[i].code, strerror(-err));
		if (fi.hidden) {	/* incomplete: the gc callback's stack on 3.11 */
			assert_int_equal(h->tag, 16);
			assert_string_equal(fi.qualname, "cell_maker");
			r->hidden++;
			continue;
		}
		assert_int_not_equal(asprintf(&h->frames[h->n], "%s\t%s\t%d", fi.qualname,
					      fi.filename, fi.line), -1);
		h->flags[h->n++] = full[i].flags;
	}
}

/* Run the workload to its end, stopping at every pymark. */
static void trace(struct run *r)
{
	assert_int_equal(ptrace(PTRACE_CONT, r->pid, NULL, NULL), 0);
	for (;;) {
		struct user_regs_struct regs;
		int st, sig;
		pid_t tid = waitpid(-1, &st, __WALL);

		assert_true(tid > 0);
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			if (tid != r->pid)
				continue;
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				fail_msg("%s: the workload ended with status %#x", r->python, st);
			return;
		}
		sig = WSTOPSIG(st);
		if (sig == SIGTRAP && (st >> 16) == PTRACE_EVENT_CLONE)
			sig = 0;
		else if (sig == SIGSTOP)	/* a new thread's first stop */
			sig = 0;
		else if (sig == SIGTRAP && !ptrace(PTRACE_GETREGS, tid, NULL, &regs) &&
			 regs.rip == r->pymark + 1) {
			on_hit(r, tid, &regs);	/* the int3 stood for a nop */
			sig = 0;
		}
		ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
	}
}

static bool is_frame(const struct hit *h, int i, const char *qualname)
{
	size_t n = strlen(qualname);

	return !strncmp(h->frames[i], qualname, n) && h->frames[i][n] == '\t';
}

/* The workload's stacks, one by one, against the hits. */
static void compare(struct run *r, const char *out)
{
	FILE *f = fopen(out, "r");
	char line[4096];
	int nstacks = 0, entries = 0;
	bool old = r->rt.off->flags & PYOFF_FRAMEOBJ;	/* 3.8 to 3.10 */

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		int tag, tid, n;
		struct hit *h = NULL;

		if (sscanf(line, "stack %d %d %d", &tag, &tid, &n) != 3)
			fail_msg("%s: unexpected line: %s", r->python, line);
		nstacks++;
		for (int i = 0; i < r->nhits; i++)
			if (r->hits[i].tag == tag)
				h = &r->hits[i];
		if (!h)
			fail_msg("%s: no hit for stack %d", r->python, tag);
		assert_int_equal(h->tid, tid);
		if (h->n != n)
			fail_msg("%s: stack %d: %d frames walked, traceback has %d", r->python, tag, h->n,
				 n);
		for (int i = n - 1; i >= 0; i--) {
			assert_non_null(fgets(line, sizeof(line), f));
			line[strcspn(line, "\n")] = 0;
			if (strncmp(line, "frame ", 6) || strcmp(line + 6, h->frames[i]))
				fail_msg("%s: stack %d, frame %d: walked \"%s\", traceback \"%s\"",
					 r->python, tag, n - 1 - i, h->frames[i], line);
		}
		/* where C entered the evaluator: before 3.11, every frame */
		assert_true(h->flags[n - 1] & PYFRAME_ENTRY);
		for (int i = 0; old && i < n; i++)
			assert_true(h->flags[i] & PYFRAME_ENTRY);
		for (int i = 0; !old && i < n; i++) {
			if (is_frame(h, i, "keyfunc") || is_frame(h, i, "Guard.__exit__")) {
				assert_true(h->flags[i] & PYFRAME_ENTRY);
				entries++;
			}
			if (is_frame(h, i, "recurse") || is_frame(h, i, "thread_recurse") ||
			    is_frame(h, i, "checkpoint") || is_frame(h, i, "main"))
				assert_false(h->flags[i] & PYFRAME_ENTRY);
		}
	}
	fclose(f);
	assert_int_equal(nstacks, r->nhits);
	assert_int_equal(nstacks, 20);	/* pystack.py's checkpoints */
	/* 3.11 collects inside cell_maker's prologue, the others after it
	 * (3.8 to 3.10: before its frame runs) */
	assert_int_equal(r->hidden, r->rt.version >> 16 == 0x030b ? 1 : 0);
	assert_int_equal(entries, old ? 0 : 2);
}

static void run_one(const char *python)
{
	struct run *r = calloc(1, sizeof(*r));
	char out[PATH_MAX], ver[32];

	assert_non_null(r);
	r->python = python;
	snprintf(out, sizeof(out), "%s/out-%d.txt", tmpdir, (int)getpid());
	start(r, out);
	trace(r);
	compare(r, out);
	python_version_str(r->rt.version, ver, sizeof(ver));
	print_message("%s (%s, runtime in %s): %d stacks equal, %d hidden frame%s%s\n", python,
		      ver, r->rt.path, r->nhits, r->hidden, r->hidden == 1 ? "" : "s",
		      r->gil_checked ? ", GIL holder checked" : "");
	for (int i = 0; i < r->nhits; i++)
		for (int k = 0; k < r->hits[i].n; k++)
			free(r->hits[i].frames[k]);
	python_sym_free(r->sym);
	python_procmem_close(&r->pm);
	python_runtime_free(&r->rt);
	free(r);
}

static void test_debian_python311(void **state)
{
	(void)state;
	run_one("/usr/bin/python3.11");
}

/* Every pyenv build of a supported version; none installed is a skip. */
static void test_pyenv(void **state)
{
	glob_t g;
	int ran = 0;

	(void)state;
	if (pyenv_glob("3.*/bin/python3.*[0-9]", &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++) {
			int minor = 0;
			const char *b = strrchr(g.gl_pathv[i], '/');

			if (sscanf(b, "/python3.%d", &minor) != 1 || minor < 8 || minor > 13)
				continue;	/* (refused, or a python3.X-config) */
			run_one(g.gl_pathv[i]);
			ran++;
		}
		globfree(&g);
	}
	if (!ran)
		skip();
}

static char logged[1024];

static void capture_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= USC_LOG_WARN)
		snprintf(logged, sizeof(logged), "%s", msg);
}

/* A process that has printed a line and waits on its stdin. Its stdout
 * stays open until end_waiting: a line written in two parts (CPython's
 * print may) must not meet a closed pipe, which would end the process
 * (BrokenPipeError) while it is looked at. */
static int waiting_out = -1;

static pid_t spawn_waiting(char *const argv[], int *in)
{
	int to[2], from[2];
	char buf[16];
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	while (got < sizeof(buf) && (n = read(from[0], buf + got, sizeof(buf) - got)) > 0 &&
	       !memchr(buf, '\n', got += (size_t)n))
		;
	assert_non_null(memchr(buf, '\n', got));	/* the whole line */
	waiting_out = from[0];
	*in = to[1];
	return pid;
}

static void end_waiting(pid_t pid, int in)
{
	int st;

	close(in);
	close(waiting_out);
	waiting_out = -1;
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* Processes: an older CPython is refused with its version, a program that
 * is not Python has no runtime, a process that has gone is -ESRCH. */
static void test_detect_processes(void **state)
{
	char *cat[] = {"/bin/sh", "-c", "echo ready; exec cat", NULL};
	char *py37[] = {NULL, "-c", "import sys; print('ready', flush=True); sys.stdin.read()",
			NULL};
	struct python_runtime rt;
	glob_t g;
	pid_t pid;
	int in;

	(void)state;
	usc_set_log(capture_log, NULL);
	pid = spawn_waiting(cat, &in);
	logged[0] = 0;
	assert_int_equal(python_detect_pid(pid, &rt), -ENOENT);
	assert_non_null(strstr(logged, "runs no CPython"));
	end_waiting(pid, in);
	assert_int_equal(python_detect_pid(pid, &rt), -ESRCH);
	if (!pyenv_glob("3.7.*/bin/python3.7", &g)) {
		py37[0] = g.gl_pathv[0];
		pid = spawn_waiting(py37, &in);
		logged[0] = 0;
		{
			int r = python_detect_pid(pid, &rt);

			if (r != -ENOTSUP)
				print_message("python_detect_pid: %d, said: %s\n", r, logged);
			assert_int_equal(r, -ENOTSUP);
		}
		assert_non_null(strstr(logged, "libpython3.7m.so.1.0 is CPython 3.7; uscope reads "
					       "the frames of CPython 3.8 to 3.15 only"));
		end_waiting(pid, in);
		globfree(&g);
	}
	usc_set_log(NULL, NULL);
}

static int setup(void **state)
{
	(void)state;
	return fixture_build("python", fxdir, sizeof(fxdir), tmpdir, sizeof(tmpdir));
}

static int teardown(void **state)
{
	(void)state;
	return fixture_remove(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_debian_python311),
		cmocka_unit_test(test_pyenv),
		cmocka_unit_test(test_detect_processes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
