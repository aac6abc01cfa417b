/* uscope e2e target for arguments by name from debug info. Built at -O0 and
 * -O2 (and a stripped copy whose DWARF sits in a separate file found through
 * .gnu_debuglink). `dwarfapp [N]` calls, for i = 1..N:
 *   handle(&r, i, i % 2, i % 3 ? GREEN : RED) with r = {id=10*i, tag="t<i>",
 *   path=PATHS[i % 3], size=1000*i, next=&head} and head.id = 77,
 * and bumps g_counter before each call, so g_counter == i in handle(i).
 * Then, for i = 1..N, run_job(&j, i % 2, MODES[i - 1], STATES[i - 1]) with
 * j = {name="job<i>", state=STATES[i - 1], urgent=i % 2, mode=MODES[i - 1],
 * span={i, 10*i}, prio={i, 2*i}} (N at most 3 there), job_done(&j) returns
 * whether j.state == DONE, and twice(10*i, 1) and twice(20*i, 0) run inlined
 * into keep_k and drop_k: at its second call of sink, -O2 keeps k in keep_k
 * only. req_size(&r) in the first loop reads r->size and hands it on to sink
 * (a tail call at -O2: r's register is reused by its second instruction),
 * then spare(i), whose local 'lost' -O2 keeps nowhere. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum color { RED, GREEN = 5 };

struct req {
	int id;
	char tag[8];
	const char *path;
	long size;
	struct req *next;
};

int g_counter;
static const char *const PATHS[3] = {"/zero", "/one", "/two"};

__attribute__((noinline)) long handle(struct req *r, int n, unsigned char flag, enum color c)
{
	long v = r->size + n + flag + (long)c + r->next->id;

	__asm__ volatile("" : "+r"(v)); /* LINE:v-computed */
	return v;
}

enum state { IDLE, RUNNING = 2, DONE = 7 };
enum mode { M_READ = 1, M_WRITE = 2, M_EXEC = 4 };

struct span {
	int lo, hi;
};

struct job {
	const char *name;
	enum state state;
	bool urgent;
	enum mode mode;
	struct span span;
	int prio[2];
};

/* i = 1, 2, 3: a name, a combination of flags, a bit no name has; RUNNING,
 * DONE, a value no enumerator has */
static const enum mode MODES[3] = {M_READ, M_READ | M_EXEC, M_READ | 8};
static const enum state STATES[3] = {RUNNING, DONE, 3};
static const char *const JOBS[3] = {"job1", "job2", "job3"};

__attribute__((noipa)) int run_job(struct job *j, bool verbose, enum mode m, enum state s)
{
	int r = j->span.hi - j->span.lo + (verbose ? 1 : 0) + (int)m + (int)s + j->prio[1];

	__asm__ volatile("" : "+r"(r));
	return r;
}

__attribute__((noipa)) bool job_done(const struct job *j)
{
	return j->state == DONE;
}

__attribute__((noipa)) int sink(int v)
{
	return v + 1;
}

static inline __attribute__((always_inline)) int twice(int k, int use)
{
	sink(use);
	sink(use); /* LINE:twice-call */
	return use ? k * 3 : 0;
}

__attribute__((noipa)) int keep_k(int a)
{
	return twice(a, 1);
}

__attribute__((noipa)) int drop_k(int a)
{
	return twice(a, 0);
}

__attribute__((noipa)) int req_size(struct req *r)
{
	return sink((int)r->size);
}

__attribute__((noipa)) int spare(int a)
{
	int lost = sink(a);

	(void)lost;
	return sink(0);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	struct req head = {.id = 77, .tag = "head", .path = "/head"};
	long total = 0;

	for (int i = 1; i <= n; i++) { /* LINE:first-loop */
		struct req r = {.id = 10 * i, .path = PATHS[i % 3], .size = 1000L * i, .next = &head};

		snprintf(r.tag, sizeof(r.tag), "t%d", i);
		g_counter++;
		total += handle(&r, i, (unsigned char)(i % 2), i % 3 ? GREEN : RED);  /* LINE:handle-call */
		total += req_size(&r) + spare(i);
	}
	for (int i = 1; i <= n && i <= 3; i++) {
		struct job j = {.name = JOBS[i - 1], .state = STATES[i - 1], .urgent = i % 2,
				.mode = MODES[i - 1], .span = {i, 10 * i}, .prio = {i, 2 * i}};

		total += run_job(&j, i % 2, MODES[i - 1], STATES[i - 1]) + job_done(&j);  /* LINE:run-job-call */
		total += keep_k(10 * i) + drop_k(20 * i);
	}
	printf("dwarfapp done %ld\n", total);
	return 0;
}
