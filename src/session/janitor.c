/* The janitor: what uscope made that the kernel does not remove when uscope
 * dies (tracefs events and instances), removed when it dies anyway.
 *
 * The first time an engine adds something to undo (engine.h, struct
 * usc_undo), uscope starts a small process that holds one end of a socket
 * pair and a pidfd of uscope, nothing else: no terminal, no file of uscope's or of the
 * target's, no signal it would die of (it ignores the terminal's and
 * SIGTERM, and is in a session of its own). uscope tells it each thing
 * before it makes it, and each thing it removed itself. When its end
 * reads EOF, uscope is gone (exited, or killed: the kernel closes a dead
 * process's files): the janitor undoes what is left, newest first, tries
 * again what failed (a tracefs instance is busy until the dead process's
 * readers are closed) for a few seconds at most, and exits. A normal end
 * (uscope says goodbye) left nothing: it exits at once, and uscope waits
 * for that. After a death it also heals every kernel uprobe it was told
 * of (engine.h, USC_UNDO_UPROBE): the kernel leaves the breakpoints in
 * place when the process removing them is killed meanwhile. And after a
 * death, the processes an inject session patched (USC_UNDO_INJECT) are
 * handed to uscope's own executable, run again in a child as the janitor
 * (janitor_exec.c), which takes out what the agent there could not. Before
 * that, the processes the inject engine's gate stopped and uscope did not
 * let go (USC_UNDO_GATE: the gate's map, opened by its id when told) are
 * sent SIGCONT.
 *
 * It also bounds how long uscope may keep a process it holds by ptrace
 * waiting (the inject engine's COMMAND tree: under -p and system-wide it
 * holds none after the attach): a tracee stops for uscope at each signal
 * and fork, and a uscope that is itself stopped (SIGSTOP, a debugger) would
 * keep it stopped as long. When uscope has been stopped for JAN_HOLD_NS
 * while a thread of a process it patched waits in a ptrace stop, the
 * janitor kills uscope: the kernel lets the tracees go, and the rest is as
 * after any death (the agents let go, the janitor takes out what is left).
 * doc/engines.md says so (a killed uscope cannot).
 *
 * It is forked twice, so that init reaps it: uscope never has it as a child
 * (no zombie in a library's host, nothing for a waitpid(-1) to find). It
 * only makes system calls after the fork (uscope may have threads). A
 * socket pair rather than a pipe: whole messages, and no SIGPIPE when it
 * is gone. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "session/session.h"
#include "session/session_int.h"

#define JAN_MSG_MAX 4096
#define JAN_RETRY_NS (5ULL * 1000000000ULL)	/* how long it tries again */
#define JAN_STEP_NS 10000000ULL
#define JAN_WAIT_MS 2000			/* a normal end: how long uscope waits */
#define JAN_HOLD_NS 1000000000ULL		/* a stopped uscope may hold a tracee */
#define JAN_WATCH_MS 100			/* how often that is looked at */

enum { JAN_ADD = 1, JAN_DONE = 2, JAN_BYE = 3 };

struct jan_msg {
	uint16_t op;
	uint16_t kind;
	uint32_t id;
	/* JAN_ADD: path, NUL, text, NUL */
};

struct session_janitor {
	pid_t pid;		/* the janitor (not our child) */
	int fd;			/* our end */
	int pidfd;		/* to wait for its end */
	uint32_t next;		/* the last handle given */
	bool failed;		/* it could not start, or went: said once */
};

/* ---- the janitor's side: system calls only -------------------------------- */

/* What it was told, in one growing mapping: entries one after the other,
 * each found by its handle through a second one. */
struct jan_entry {
	uint32_t len;		/* of the whole entry, 8-aligned */
	uint16_t kind;
	uint8_t done;
	uint8_t pad;
	char data[];		/* path, NUL, text, NUL */
};

struct jan_mem {
	uint8_t *p;
	size_t len, cap;
	uint32_t *at;		/* [handle]: the entry's offset + 1, 0: none */
	size_t nat;		/* at's bytes */
	int gate;		/* the inject gate's map (USC_UNDO_GATE) + 1, 0: none */
	uint32_t gate_stopped, gate_go;	/* ... its values: stopped by it, let go */
};

static uint32_t jan_num(const char **text)
{
	uint32_t v = 0;

	while (**text == ' ')
		(*text)++;
	for (; **text >= '0' && **text <= '9'; (*text)++)
		v = v * 10 + (uint32_t)(**text - '0');
	return v;
}

/* The inject engine's gate (engine/inject/gate.c): its map, opened by its
 * id while uscope lives (the map then lives as long as we hold it); text:
 * the id, the value of a process it stopped, the value of one let go. */
static void jan_gate_open(struct jan_mem *m, const char *text)
{
	union bpf_attr a;
	uint32_t id = jan_num(&text);
	long fd;

	m->gate_stopped = jan_num(&text);
	m->gate_go = jan_num(&text);
	for (size_t i = 0; i < sizeof(a); i++)
		((volatile uint8_t *)&a)[i] = 0;
	a.map_id = id;
	fd = syscall(SYS_bpf, BPF_MAP_GET_FD_BY_ID, &a, sizeof(a));
	if (fd >= 0 && !m->gate)
		m->gate = (int)fd + 1;
	else if (fd >= 0)
		close((int)fd);
}

static char jan_state(const char *path);
static void jan_path(char *out, size_t cap, const char *pid, const char *rest);

/* Is process pid stopped ('T'), or in a ptrace stop ('t')? */
static bool jan_stopped(uint32_t pid)
{
	char digits[16], *d = digits + sizeof(digits), path[48], st;

	*--d = 0;
	do
		*--d = (char)('0' + pid % 10);
	while ((pid /= 10));
	jan_path(path, sizeof(path), d, "/stat");
	st = jan_state(path);
	return st == 'T' || st == 't';
}

#define JAN_GATE_SENT 256	/* the processes sent SIGCONT once, remembered */

/* After a death: every process the gate stopped that uscope did not let go
 * goes on (SIGCONT): at once, and again each round it is found stopped (a
 * SIGSTOP the dying uscope still held as a tracee is delivered when the
 * kernel lets it go, which may come after our first SIGCONT). final: the
 * last round, each marked let go. */
static void jan_gate_go(const struct jan_mem *m, bool final)
{
	static uint32_t sent[JAN_GATE_SENT];
	static size_t nsent;
	uint32_t key = 0, next, v, go = m->gate_go;
	bool first = true;
	union bpf_attr a;

	if (!m->gate)
		return;
	for (;;) {
		bool known = false;

		for (size_t i = 0; i < sizeof(a); i++)
			((volatile uint8_t *)&a)[i] = 0;
		a.map_fd = (uint32_t)(m->gate - 1);
		a.key = first ? 0 : (uint64_t)(uintptr_t)&key;
		a.next_key = (uint64_t)(uintptr_t)&next;
		if (syscall(SYS_bpf, BPF_MAP_GET_NEXT_KEY, &a, sizeof(a)) < 0)
			return;
		first = false;
		key = next;
		a.key = (uint64_t)(uintptr_t)&key;
		a.value = (uint64_t)(uintptr_t)&v;
		if (syscall(SYS_bpf, BPF_MAP_LOOKUP_ELEM, &a, sizeof(a)) < 0 || v != m->gate_stopped)
			continue;
		for (size_t i = 0; i < nsent && !known; i++)
			known = sent[i] == key;
		if (!known || jan_stopped(key)) {
			kill((pid_t)key, SIGCONT);
			if (!known && nsent < JAN_GATE_SENT)
				sent[nsent++] = key;
		}
		if (final) {
			a.value = (uint64_t)(uintptr_t)&go;
			a.flags = BPF_ANY;
			syscall(SYS_bpf, BPF_MAP_UPDATE_ELEM, &a, sizeof(a));
		}
	}
}

/* A mapping of *cap bytes made at least want long (zero-filled). */
static void *grow(void *p, size_t *cap, size_t want)
{
	size_t n = *cap ? *cap : 65536;
	void *q;

	while (n < want)
		n *= 2;
	if (n == *cap)
		return p;
	q = p ? mremap(p, *cap, n, MREMAP_MAYMOVE) :
		mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q == MAP_FAILED)
		return NULL;
	*cap = n;
	return q;
}

/* A message: 1 when it is uscope's goodbye (a normal end). */
static int jan_take(struct jan_mem *m, const uint8_t *buf, size_t n)
{
	struct jan_msg h;
	size_t body, need;
	struct jan_entry *e;
	uint32_t *at;
	uint8_t *p;

	if (n < sizeof(h))
		return 0;
	memcpy(&h, buf, sizeof(h));	/* (buf is bytes: no alignment) */
	if (h.op == JAN_BYE)
		return 1;
	if (!h.id)
		return 0;
	if (h.op == JAN_DONE) {
		if (h.id < m->nat / sizeof(*m->at) && m->at[h.id])
			((struct jan_entry *)(m->p + m->at[h.id] - 1))->done = 1;
		return 0;
	}
	body = n - sizeof(h);
	need = (sizeof(*e) + body + 1 + 7) & ~(size_t)7;
	if (h.op != JAN_ADD)
		return 0;
	p = grow(m->p, &m->cap, m->len + need);
	if (p)
		m->p = p;
	at = p ? grow(m->at, &m->nat, ((size_t)h.id + 1) * sizeof(*m->at)) : NULL;
	if (!at)
		return 0;
	m->at = at;
	e = (struct jan_entry *)(m->p + m->len);
	e->len = (uint32_t)need;
	e->kind = h.kind;
	e->done = 0;
	for (size_t i = 0; i < body; i++)
		e->data[i] = (char)buf[sizeof(h) + i];
	e->data[body] = 0;
	m->at[h.id] = (uint32_t)(m->len + 1);
	m->len += need;
	if (h.kind == USC_UNDO_GATE)
		jan_gate_open(m, e->data + 1);	/* (path "", then the id) */
	return 0;
}

/* 0: undone (or nothing was there); else errno. */
static int jan_undo(const struct jan_entry *e)
{
	const char *path = e->data, *text = path;
	size_t tlen;
	int fd, err = 0;

	while (*text)
		text++;
	text++;
	if (e->kind == USC_UNDO_RMDIR)
		return rmdir(path) && errno != ENOENT ? errno : 0;
	if (e->kind != USC_UNDO_WRITE)
		return 0;	/* USC_UNDO_UPROBE: jan_heal */
	/* appending: uprobe_events opened with O_TRUNC would remove every
	 * probe of everyone */
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno;
	for (tlen = 0; text[tlen]; tlen++)
		;
	if (write(fd, text, tlen) != (ssize_t)tlen)
		err = errno == ENOENT ? 0 : errno ? errno : EIO;
	close(fd);
	return err;
}

static uint64_t jan_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The uprobe PMU's perf type, or -1. */
static int jan_uprobe_type(void)
{
	char buf[16];
	int fd = open("/sys/bus/event_source/devices/uprobe/type", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	int type = 0;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		type = type * 10 + (buf[i] - '0');
	return type;
}

/* A uprobe at the entry's file and offset, on this process only, then
 * gone: its removal takes every breakpoint a killed uscope's left there
 * (engine.h, USC_UNDO_UPROBE), and none lands elsewhere meanwhile. */
static void jan_heal(const struct jan_entry *e, int type)
{
	const char *path = e->data, *text = path;
	struct perf_event_attr attr;
	uint64_t off = 0;
	long fd;

	while (*text)
		text++;
	for (text++; *text >= '0' && *text <= '9'; text++)
		off = off * 10 + (uint64_t)(*text - '0');
	for (size_t i = 0; i < sizeof(attr); i++)
		((volatile uint8_t *)&attr)[i] = 0;
	attr.size = sizeof(attr);
	attr.type = (uint32_t)type;
	attr.config1 = (uint64_t)(uintptr_t)path;	/* uprobe_path */
	attr.config2 = off;				/* probe_offset */
	attr.disabled = 1;
	fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0)
		close((int)fd);
}

/* The pid (decimal) of the next process an inject session patched and did
 * not restore, after handle *id (0: from the first), or NULL. */
static const char *jan_next_inject(const struct jan_mem *m, size_t *id)
{
	size_t n = m->nat / sizeof(*m->at);

	while (m->at && ++*id < n) {
		const struct jan_entry *e;
		const char *text;

		if (!m->at[*id])
			continue;
		e = (const void *)(m->p + m->at[*id] - 1);
		if (e->kind != USC_UNDO_INJECT || e->done)
			continue;
		for (text = e->data; *text; text++)
			;
		return text + 1;
	}
	return NULL;
}

/* After a death: the processes an inject session patched, to the session's
 * executable run again as the janitor (usc_janitor_main), in a child. Not
 * here: taking the patches out needs ptrace, /proc and the engine's code,
 * which take locks and memory, and this process is a fork of a uscope that
 * may have had threads (a lock another thread held stays held here). Why
 * exec rather than the same in system calls only: the code that runs is the
 * one a later uscope runs (engine/inject/undo.c), not a second copy. The
 * child, or 0 (nothing to hand, or no executable: the agents let go alone,
 * and what they leave, a later uscope takes out). */
static pid_t jan_inject(const struct jan_mem *m, const char *exe)
{
	size_t npid = 0, cap = 0, k = 0, id = 0;
	char **argv = NULL;
	const char *text;
	long pid;

	while (jan_next_inject(m, &id))
		npid++;
	if (!npid || !exe)
		return 0;
	argv = grow(NULL, &cap, (2 * npid + 3) * sizeof(*argv));
	if (!argv)
		return 0;
	argv[k++] = (char *)"uscope-janitor";
	argv[k++] = (char *)USC_JANITOR_ARG;
	for (id = 0; (text = jan_next_inject(m, &id));) {
		argv[k++] = (char *)"-p";
		argv[k++] = (char *)text;
	}
	argv[k] = NULL;
	pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid == 0) {
		syscall(SYS_execve, exe, argv, environ);
		_exit(127);
	}
	munmap(argv, cap);
	return pid > 0 ? (pid_t)pid : 0;
}

/* Everything still to do, newest first; again for what failed, until the
 * bound. If uscope died (no goodbye), then every uprobe healed. */
static void jan_finish(struct jan_mem *m, bool died)
{
	uint64_t until = jan_now() + JAN_RETRY_NS;
	size_t n = m->nat / sizeof(*m->at);

	for (;;) {
		bool left = false;

		for (size_t id = n; id-- > 1;) {
			struct jan_entry *e;

			if (!m->at || !m->at[id])
				continue;
			e = (struct jan_entry *)(m->p + m->at[id] - 1);
			if (e->done || e->kind == USC_UNDO_UPROBE || e->kind == USC_UNDO_INJECT ||
			    e->kind == USC_UNDO_GATE)
				continue;
			if (jan_undo(e))
				left = true;
			else
				e->done = 1;
		}
		if (!left || jan_now() >= until)
			break;
		struct timespec step = {0, (long)JAN_STEP_NS};

		nanosleep(&step, NULL);
	}
	if (!died)
		return;
	int type = jan_uprobe_type();

	for (size_t id = 1; id < n && type >= 0; id++) {
		const struct jan_entry *e;

		if (!m->at || !m->at[id])
			continue;
		e = (const struct jan_entry *)(m->p + m->at[id] - 1);
		if (e->kind == USC_UNDO_UPROBE)
			jan_heal(e, type);
	}
}


/* The state letter of /proc/PID/stat or /proc/PID/task/TID/stat (path), or 0. */
static char jan_state(const char *path)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	ssize_t close_paren = -1;

	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == ')')
			close_paren = i;
	return close_paren >= 0 && close_paren + 2 < n ? buf[close_paren + 2] : 0;
}

/* "/proc/" pid rest into out (no stdio here). */
static void jan_path(char *out, size_t cap, const char *pid, const char *rest)
{
	size_t k = 0;

	for (const char *p = "/proc/"; *p && k + 1 < cap; p++)
		out[k++] = *p;
	for (const char *p = pid; *p && k + 1 < cap; p++)
		out[k++] = *p;
	for (const char *p = rest; *p && k + 1 < cap; p++)
		out[k++] = *p;
	out[k] = 0;
}

/* A thread of process pid (decimal) is in a ptrace stop ('t'). */
static bool jan_task_traced(const char *pid)
{
	char dir[64], path[128], buf[4096];
	bool traced = false;
	long n;
	int fd;

	jan_path(dir, sizeof(dir), pid, "/task");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while (!traced && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
		for (long off = 0; off < n && !traced;) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
			uint16_t reclen;
			const char *name = buf + off + 19;

			memcpy(&reclen, buf + off + 16, 2);
			if (!reclen)
				break;
			off += reclen;
			if (*name < '0' || *name > '9')
				continue;
			{
				char rest[48] = "/task/";
				size_t k = 6;

				for (const char *p = name; *p && k + 6 < sizeof(rest); p++)
					rest[k++] = *p;
				for (const char *p = "/stat"; *p; p++)
					rest[k++] = *p;
				rest[k] = 0;
				jan_path(path, sizeof(path), pid, rest);
			}
			traced = jan_state(path) == 't';
		}
	close(fd);
	return traced;
}

/* uscope (owner) is stopped and a process it patched waits in a ptrace stop. */
static bool jan_held(const struct jan_mem *m, const char *owner_stat)
{
	const char *pid;
	size_t id = 0;

	if (jan_state(owner_stat) != 'T')
		return false;
	while ((pid = jan_next_inject(m, &id)))
		if (jan_task_traced(pid))
			return true;
	return false;
}

static __attribute__((noreturn)) void jan_main(int sock, const char *exe, pid_t owner)
{
	static const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP,
				      SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD};
	struct sigaction sa = {.sa_handler = SIG_IGN};
	struct jan_mem m = {0};
	uint8_t buf[JAN_MSG_MAX + 1];
	sigset_t none;
	bool bye = false;
	char owner_stat[48];
	uint64_t held_since = 0;
	int nul, owner_fd;

	/* nothing of uscope's but the socket: fd 3 */
	if (sock != 3 && dup2(sock, 3) != 3)
		_exit(1);
	syscall(SYS_close_range, 4U, ~0U, 0U);
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int fd = 0; fd < 3 && nul >= 0; fd++)
		dup2(nul, fd);
	if (nul > 3)
		close(nul);
	setsid();
	if (chdir("/"))
		_exit(1);
	prctl(PR_SET_NAME, "uscope-janitor", 0, 0, 0);
	/* uscope's end itself (its files closed: the gate's links with them),
	 * which may come well after its socket's on a loaded machine */
	owner_fd = (int)syscall(SYS_pidfd_open, owner, 0);
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigaction(ignored[i], &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	{
		pid_t me = getpid();

		/* hello: our pid, so uscope can wait for our end */
		if (send(3, &me, sizeof(me), MSG_NOSIGNAL) != (ssize_t)sizeof(me))
			_exit(1);
	}
	{
		char digits[16], *d = digits + sizeof(digits);

		*--d = 0;
		for (unsigned v = (unsigned)owner; d == digits + sizeof(digits) - 1 || v; v /= 10)
			*--d = (char)('0' + v % 10);
		jan_path(owner_stat, sizeof(owner_stat), d, "/stat");
	}
	for (;;) {
		struct pollfd pfd = {.fd = 3, .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, JAN_WATCH_MS) == 0) {
			/* nothing said: is uscope stopped, holding a tracee? */
			if (!jan_held(&m, owner_stat))
				held_since = 0;
			else if (!held_since)
				held_since = jan_now();
			else if (jan_now() - held_since >= JAN_HOLD_NS)
				kill(owner, SIGKILL);	/* its EOF follows */
			continue;
		}
		n = recv(3, buf, JAN_MSG_MAX, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;	/* EOF: uscope has gone */
		bye |= jan_take(&m, buf, (size_t)n);
	}
	if (!bye) {
		/* the gate's stopped processes go on first (the patched ones
		 * are then taken care of as the others); again until uscope has
		 * ended (its links close after its socket does: a process the
		 * gate stops meanwhile must be seen), within a bound, and a
		 * while after */
		struct pollfd end = {.fd = owner_fd, .events = POLLIN};
		uint64_t until = jan_now() + JAN_RETRY_NS;

		while (owner_fd >= 0 && jan_now() < until && poll(&end, 1, 10) == 0)
			jan_gate_go(&m, false);
		for (int i = 0; i < 30; i++) {
			struct timespec step = {0, (long)JAN_STEP_NS};

			jan_gate_go(&m, i == 29);
			nanosleep(&step, NULL);
		}
	}
	{
		pid_t inject = bye ? 0 : jan_inject(&m, exe);
		int st;

		jan_finish(&m, !bye);
		while (inject > 0 && syscall(SYS_wait4, inject, &st, 0, NULL) < 0 && errno == EINTR)
			;
	}
	_exit(0);
}

/* ---- uscope's side -------------------------------------------------------------- */

static int janitor_start(struct session_janitor *j, const char *exe)
{
	int sv[2], st;
	pid_t mid, pid = 0, owner = getpid();
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	mid = fork();
	if (mid < 0) {
		int err = errno;

		close(sv[0]);
		close(sv[1]);
		return -err;
	}
	if (mid == 0) {
		/* the middle: fork the janitor and go, so that init reaps it */
		pid_t k = fork();

		if (k == 0)
			jan_main(sv[1], exe, owner);
		_exit(k < 0);
	}
	close(sv[1]);
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	do
		n = recv(sv[0], &pid, sizeof(pid), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(pid) || pid <= 0) {
		close(sv[0]);
		return -ECHILD;
	}
	j->pid = pid;
	j->fd = sv[0];
	j->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	log_debug("the janitor (process %d) undoes what is left if uscope dies", (int)pid);
	return 0;
}

static int janitor_send(struct session_janitor *j, const void *msg, size_t len)
{
	ssize_t n;

	do
		n = send(j->fd, msg, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)len)
		return 0;
	if (!j->failed)
		log_warn("the janitor has gone (%s): if uscope is killed, the next uscope "
			 "removes its tracefs probes", n < 0 ? strerror(errno) : "short write");
	j->failed = true;
	return -EPIPE;
}

static int undo_add(const struct usc_undo *u, enum usc_undo_kind kind, const char *path,
		    const char *text)
{
	struct usc_session *s = u->ctx;
	struct session_janitor *j = s->janitor;
	uint8_t buf[JAN_MSG_MAX];
	struct jan_msg h = {JAN_ADD, (uint16_t)kind, 0};
	size_t plen = strlen(path), tlen = text ? strlen(text) : 0;
	int ret;

	if (sizeof(h) + plen + 1 + tlen > sizeof(buf))
		return -ENAMETOOLONG;
	if (!j) {
		j = calloc(1, sizeof(*j));
		if (!j)
			return -ENOMEM;
		j->fd = j->pidfd = -1;
		s->janitor = j;
		ret = janitor_start(j, s->opts.janitor_exe);
		if (ret) {
			j->failed = true;
			log_warn("cannot start the janitor (%s): if uscope is killed, the next "
				 "uscope removes its tracefs probes", strerror(-ret));
		}
	}
	if (j->failed)
		return -ECHILD;
	h.id = ++j->next;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), path, plen + 1);
	if (tlen)
		memcpy(buf + sizeof(h) + plen + 1, text, tlen);
	ret = janitor_send(j, buf, sizeof(h) + plen + 1 + tlen);
	return ret ? ret : (int)h.id;
}

static void undo_done(const struct usc_undo *u, int id)
{
	struct usc_session *s = u->ctx;
	struct jan_msg h = {JAN_DONE, 0, (uint32_t)id};

	if (s->janitor && !s->janitor->failed && id > 0)
		janitor_send(s->janitor, &h, sizeof(h));
}

void session_undo_init(struct usc_session *s)
{
	s->undo = (struct usc_undo){.ctx = s, .add = undo_add, .done = undo_done};
	s->ectx.undo = &s->undo;
}

void session_janitor_end(struct usc_session *s)
{
	struct session_janitor *j = s->janitor;

	if (!j)
		return;
	if (j->fd >= 0) {
		struct jan_msg bye = {JAN_BYE, 0, 0};

		/* a normal end: nothing to heal; what is left, it undoes now */
		if (!j->failed)
			janitor_send(j, &bye, sizeof(bye));
		close(j->fd);
	}
	if (j->pidfd >= 0) {
		struct pollfd p = {.fd = j->pidfd, .events = POLLIN};

		while (poll(&p, 1, JAN_WAIT_MS) < 0 && errno == EINTR)
			;
		close(j->pidfd);
	}
	free(j);
	s->janitor = NULL;
}
