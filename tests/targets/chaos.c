/* uscope e2e target of the chaos test (tests/e2e/test_chaos.py): a fixed
 * amount of work that lasts a while and ends with a known result, whatever
 * happens to the tracer meanwhile.
 *
 *   chaos ROUNDS CALLS
 *	prints "ready", waits for a line on stdin, then runs ROUNDS rounds a
 *	millisecond apart; each makes an object (obj_new), calls work(i) on it
 *	CALLS times (i counting from 0 over the whole run), and frees it
 *	(obj_free). Prints "chaos done rounds=R calls=N sum=S" (S: the sum of
 *	work's results, 3i+1 each), then waits for stdin to close and exits 0.
 *
 *   chaos signals
 *	prints "ready pid=PID", then calls work(i) every millisecond until
 *	killed (or for a minute); SIGINT, SIGTERM and SIGHUP do not end it: it
 *	prints "got SIGNAME at i=I" for each and goes on
 *	(tests/e2e/test_signals.py).
 *
 *   chaos thread
 *	starts a thread, which prints "ready tid=TID" (its thread id), waits
 *	for a line on stdin, calls work(i) for i in 0..99 and ends; then prints
 *	"thread done sum=S" and exits 0 (tests/e2e/test_session.py: -p TID).
 *
 *   chaos storm THREADS ROUNDS [once]
 *	prints "ready pid=PID"; then for each line on stdin (once: one time,
 *	at once) a batch: THREADS threads (the main one and THREADS-1 started
 *	for it) each run ROUNDS rounds; a round calls work(i) 10 times, makes
 *	system calls (getppid, a 200 us nanosleep, a write to and a read from a
 *	pipe of its own) and, in the main thread every 4th round, forks a child
 *	that calls work 5 times and exits with their sum's low byte, reaped and
 *	checked. Each batch prints "storm done threads=T calls=N sum=S forks=F
 *	bad=B" (B: children that ended otherwise, failed pipe round trips).
 *	Exits 0 at the end of stdin (once: after its batch). Whatever happens
 *	to a tracer meanwhile, the line is the same (tests/e2e/test_chaos.py).
 *
 *   chaos forks N MS
 *	prints "ready pid=PID"; then for each line on stdin forks N children
 *	MS milliseconds apart, each calling work(i) for i in 0..9 and exiting
 *	with the low byte of their sum; reaps and checks each, and prints
 *	"forks done n=N bad=B ms=T" (T: its own time from the first fork to the
 *	last child reaped, in ms). Exits 0 at the end of stdin
 *	(tests/e2e/test_signals.py: a stopped tracer must not hold it).
 *
 *   chaos detour
 *	prints "ready hop=ADDR detour=ADDR" (runtime addresses), then for each
 *	line on stdin calls hop(i) for i in 0..999 and prints "hops sum=S".
 *	hop and hop_detour are in assembly: hop's first 5 bytes (push %rbp;
 *	mov %rsp,%rbp; nop) are whole instructions that hop_detour repeats
 *	before it jumps to hop+5. A jmp rel32 to hop_detour written over them
 *	is a patch that changes nothing (as an in-process tracer's jump to its
 *	trampoline), and a kernel uprobe placed over that jmp would run the
 *	file's push %rbp and go on inside the jmp: a crash. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

struct obj {
	long id;
	long uses;
};

volatile long g_sink;

__attribute__((noipa, used)) struct obj *obj_new(long id)
{
	struct obj *o = malloc(sizeof(*o));

	if (!o)
		abort();
	o->id = id;
	o->uses = 0;
	return o;
}

__attribute__((noipa, used)) void obj_free(struct obj *o)
{
	g_sink += o->uses;
	free(o);
}

__attribute__((noipa, used)) long work(struct obj *o, long i)
{
	o->uses++;
	g_sink = i;
	return 3 * i + 1;
}

long hop(long i);
long hop_detour(long i);

__asm__(
	".text\n"
	".p2align 4\n"
	".globl hop\n.type hop,@function\n"
	"hop:\n push %rbp\n mov %rsp,%rbp\n nop\n lea 1(%rdi,%rdi,2),%rax\n pop %rbp\n ret\n"
	".size hop,.-hop\n"
	".p2align 4\n"
	".globl hop_detour\n.type hop_detour,@function\n"
	"hop_detour:\n push %rbp\n mov %rsp,%rbp\n nop\n jmp hop+5\n"
	".size hop_detour,.-hop_detour\n");

static int detour(void)
{
	char line[256];

	printf("ready hop=%p detour=%p\n", (void *)hop, (void *)hop_detour);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		long sum = 0;

		for (long i = 0; i < 1000; i++)
			sum += hop(i);
		printf("hops sum=%ld\n", sum);
		fflush(stdout);
	}
	return 0;
}

static void *thread_main(void *arg)
{
	struct obj *o = obj_new(0);
	char line[256];
	long sum = 0;

	printf("ready tid=%d\n", (int)gettid());
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin))
		for (long i = 0; i < 100; i++)
			sum += work(o, i);
	obj_free(o);
	*(long *)arg = sum;
	return NULL;
}

static int thread(void)
{
	pthread_t t;
	long sum = -1;

	if (pthread_create(&t, NULL, thread_main, &sum) || pthread_join(t, NULL))
		return 1;
	printf("thread done sum=%ld\n", sum);
	fflush(stdout);
	return 0;
}

/* ---- storm ---- */

struct storm {
	pthread_t th;
	long id, rounds;
	long calls, sum, forks, bad;
};

static void *storm_thread(void *arg)
{
	struct storm *w = arg;
	struct timespec nap = {0, 200000};
	struct obj *o = obj_new(w->id);
	int pfd[2];
	char b = 0;

	if (pipe(pfd))
		abort();
	for (long r = 0; r < w->rounds; r++) {
		for (int k = 0; k < 10; k++) {
			w->sum += work(o, w->calls);
			w->calls++;
		}
		w->sum += getppid() > 0;
		nanosleep(&nap, NULL);
		if (write(pfd[1], &b, 1) != 1 || read(pfd[0], &b, 1) != 1)
			w->bad++;
		if (w->id == 0 && r % 4 == 0) {
			pid_t p = fork();
			int st;

			if (p == 0) {
				long s = 0;

				for (long i = 0; i < 5; i++)
					s += work(o, i);
				_exit((int)(s & 0xff));
			}
			if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
			    WEXITSTATUS(st) != (1 + 4 + 7 + 10 + 13))
				w->bad++;
			w->forks++;
		}
	}
	obj_free(o);
	close(pfd[0]);
	close(pfd[1]);
	return NULL;
}

static int storm_batch(long nthreads, long rounds)
{
	struct storm w[16] = {{0}};
	long calls = 0, sum = 0, forks = 0, bad = 0;

	for (long t = 0; t < nthreads; t++) {
		w[t].id = t;
		w[t].rounds = rounds;
		if (t && pthread_create(&w[t].th, NULL, storm_thread, &w[t]))
			return 1;
	}
	storm_thread(&w[0]);
	for (long t = 1; t < nthreads; t++)
		pthread_join(w[t].th, NULL);
	for (long t = 0; t < nthreads; t++) {
		calls += w[t].calls;
		sum += w[t].sum;
		forks += w[t].forks;
		bad += w[t].bad;
	}
	printf("storm done threads=%ld calls=%ld sum=%ld forks=%ld bad=%ld\n", nthreads, calls, sum,
	       forks, bad);
	fflush(stdout);
	return 0;
}

static int storm(long nthreads, long rounds, int once)
{
	char line[256];

	if (nthreads < 1 || nthreads > 16)
		return 2;
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	if (once)
		return storm_batch(nthreads, rounds);
	while (fgets(line, sizeof(line), stdin))
		if (storm_batch(nthreads, rounds))
			return 1;
	return 0;
}

/* ---- forks ---- */

static int forks(long n, long ms)
{
	struct timespec gap = {ms / 1000, (ms % 1000) * 1000000}, t0, t1;
	struct obj *o = obj_new(0);
	char line[256];
	long bad = 0;

	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
	bad = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long k = 0; k < n; k++) {
		pid_t p = fork();
		int st;

		if (p == 0) {
			long s = 0;

			for (long i = 0; i < 10; i++)
				s += work(o, i);
			_exit((int)(s & 0xff));
		}
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 145)
			bad++;
		if (k + 1 < n)
			nanosleep(&gap, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("forks done n=%ld bad=%ld ms=%ld\n", n, bad,
	       (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	fflush(stdout);
	}
	obj_free(o);
	return 0;
}

static volatile sig_atomic_t got[NSIG];

static void on_signal(int sig)
{
	got[sig]++;
}

static int signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct timespec ms = {0, 1000000};
	struct sigaction sa = {.sa_handler = on_signal};
	struct obj *o = obj_new(0);
	int seen[NSIG] = {0};

	for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
		sigaction(sigs[k], &sa, NULL);
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	for (long i = 0; i < 60000; i++) {
		work(o, i);
		for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
			for (; seen[sigs[k]] < got[sigs[k]]; seen[sigs[k]]++) {
				printf("got SIG%s at i=%ld\n", sigabbrev_np(sigs[k]), i);
				fflush(stdout);
			}
		nanosleep(&ms, NULL);
	}
	obj_free(o);
	return 0;
}

int main(int argc, char **argv)
{
	struct timespec ms = {0, 1000000};
	long rounds, calls, sum = 0, i = 0;
	char line[256];

	if (argc == 2 && !strcmp(argv[1], "detour"))
		return detour();
	if (argc == 2 && !strcmp(argv[1], "signals"))
		return signals();
	if (argc == 2 && !strcmp(argv[1], "thread"))
		return thread();
	if (argc == 4 && !strcmp(argv[1], "forks"))
		return forks(atol(argv[2]), atol(argv[3]));
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "once"))) && !strcmp(argv[1], "storm"))
		return storm(atol(argv[2]), atol(argv[3]), argc == 5);
	if (argc != 3) {
		fprintf(stderr, "usage: chaos ROUNDS CALLS | chaos signals | chaos thread | chaos detour | "
				"chaos storm THREADS ROUNDS [once] | chaos forks N MS\n");
		return 2;
	}
	rounds = atol(argv[1]);
	calls = atol(argv[2]);
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 3;
	for (long r = 0; r < rounds; r++) {
		struct obj *o = obj_new(r);

		for (long k = 0; k < calls; k++)
			sum += work(o, i++);
		obj_free(o);
		nanosleep(&ms, NULL);
	}
	printf("chaos done rounds=%ld calls=%ld sum=%ld\n", rounds, i, sum);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
