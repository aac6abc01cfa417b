/* The ids of tasks in PID namespaces below ours (containers), as the
 * session learns them: a task's inner ids, and the host's of an inner id a
 * process's own code recorded (ns/ns.h reads them from /proc; this keeps
 * them, one /proc read per task; see cache.h). */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "core/grow.h"
#include "ns/ns.h"


struct ns_task {
	pid_t pid, tid;		/* the host's */
	pid_t ns_pid, ns_tid;	/* the inner ones, when nested */
	bool nested;
};

/* An index: key -> 1 + an index into tasks (0: empty), open addressing. */
struct ns_index {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, n;
};

struct ns_pids {
	struct ns_task *tasks;
	size_t n, cap;
	struct ns_index by_tid;		/* host tid */
	struct ns_index by_inner;	/* host pid << 32 | inner tid, nested only */
};

static void index_free(struct ns_index *x)
{
	free(x->keys);
	free(x->vals);
}

static void pids_free(void *p)
{
	struct ns_pids *t = p;

	if (!t)
		return;
	index_free(&t->by_tid);
	index_free(&t->by_inner);
	free(t->tasks);
	free(t);
}

static size_t slot_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 20) & (cap - 1);
}

/* 1 + the index kept for key, or 0. */
static uint32_t index_get(const struct ns_index *x, uint64_t key)
{
	if (!x->cap)
		return 0;
	for (size_t i = slot_of(key, x->cap);; i = (i + 1) & (x->cap - 1)) {
		if (!x->vals[i])
			return 0;
		if (x->keys[i] == key)
			return x->vals[i];
	}
}

static int index_put(struct ns_index *x, uint64_t key, uint32_t val);

static int index_grow(struct ns_index *x)
{
	struct ns_index old = *x, nx = {0};

	nx.cap = old.cap ? old.cap * 2 : 64;
	nx.keys = calloc(nx.cap, sizeof(*nx.keys));
	nx.vals = calloc(nx.cap, sizeof(*nx.vals));
	if (!nx.keys || !nx.vals) {
		index_free(&nx);
		return -ENOMEM;
	}
	for (size_t i = 0; i < old.cap; i++)
		if (old.vals[i])
			index_put(&nx, old.keys[i], old.vals[i]);
	index_free(&old);
	*x = nx;
	return 0;
}

/* key -> val, replacing what key had. */
static int index_put(struct ns_index *x, uint64_t key, uint32_t val)
{
	if ((x->n + 1) * 2 > x->cap && index_grow(x))
		return -ENOMEM;
	for (size_t i = slot_of(key, x->cap);; i = (i + 1) & (x->cap - 1)) {
		if (x->vals[i] && x->keys[i] != key)
			continue;
		if (!x->vals[i])
			x->n++;
		x->keys[i] = key;
		x->vals[i] = val;
		return 0;
	}
}

static struct ns_pids *pids_of(struct usc_cache *c)
{
	void **slot = cache_ext(c, CACHE_EXT_NS, pids_free);

	if (!*slot)
		*slot = calloc(1, sizeof(struct ns_pids));
	return *slot;
}

static uint64_t inner_key(pid_t pid, pid_t ns_tid)
{
	return (uint64_t)(uint32_t)pid << 32 | (uint32_t)ns_tid;
}

/* What was learnt of host tid, kept (it replaces what the tid had: a tid
 * used again). NULL: no memory. */
static const struct ns_task *pids_learn(struct ns_pids *t, const struct ns_task *k)
{
	uint32_t at = index_get(&t->by_tid, (uint64_t)(uint32_t)k->tid);

	if (!at) {
		if (core_reserve(t->tasks, t->cap, t->n + 1, 64))
			return NULL;
		at = (uint32_t)++t->n;
		if (index_put(&t->by_tid, (uint64_t)(uint32_t)k->tid, at)) {
			t->n--;
			return NULL;
		}
	}
	t->tasks[at - 1] = *k;
	if (k->nested && index_put(&t->by_inner, inner_key(k->pid, k->ns_tid), at))
		return NULL;
	return &t->tasks[at - 1];
}

/* Task tid of process pid, read now (one gone already is kept as in our
 * namespace: not asked again). NULL: no memory. */
static const struct ns_task *pids_read(struct ns_pids *t, pid_t pid, pid_t tid)
{
	struct ns_task k = {.pid = pid, .tid = tid};

	k.nested = ns_task_ids(tid, &k.ns_pid, &k.ns_tid) > 0;
	return pids_learn(t, &k);
}

/* The entry of host tid of process pid: kept, or read now. */
static const struct ns_task *pids_get(struct usc_cache *c, pid_t pid, pid_t tid)
{
	struct ns_pids *t = pids_of(c);
	uint32_t at;

	if (!t)
		return NULL;
	at = index_get(&t->by_tid, (uint64_t)(uint32_t)tid);
	if (at && t->tasks[at - 1].pid == pid)
		return &t->tasks[at - 1];
	return cache_frozen(c) ? NULL : pids_read(t, pid, tid);
}

bool cache_ns_ids(struct usc_cache *c, pid_t pid, pid_t tid, pid_t *ns_pid, pid_t *ns_tid)
{
	const struct ns_task *k;

	if (!c || pid <= 0 || tid <= 0 || !(k = pids_get(c, pid, tid)) || !k->nested)
		return false;
	*ns_pid = k->ns_pid;
	*ns_tid = k->ns_tid;
	return true;
}

/* Every task of process pid read again. */
static void pids_rescan(struct ns_pids *t, pid_t pid)
{
	char dir[64];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
			pids_read(t, pid, (pid_t)strtol(de->d_name, NULL, 10));
	closedir(d);
}

void cache_ns_host_ids(struct usc_cache *c, pid_t host_pid, int32_t *pid, int32_t *tid)
{
	const struct ns_task *proc = c ? pids_get(c, host_pid, host_pid) : NULL;
	struct ns_pids *t;
	uint32_t at;

	if (!proc || !proc->nested || *pid != proc->ns_pid || !(t = pids_of(c)))
		return;
	*pid = host_pid;
	at = index_get(&t->by_inner, inner_key(host_pid, *tid));
	if (!at && !cache_frozen(c)) {
		pids_rescan(t, host_pid);
		at = index_get(&t->by_inner, inner_key(host_pid, *tid));
	}
	/* still there under that id? (a tid is used again) */
	*tid = at && t->tasks[at - 1].pid == host_pid && t->tasks[at - 1].nested &&
			       t->tasks[at - 1].ns_tid == *tid ? t->tasks[at - 1].tid : 0;
}
