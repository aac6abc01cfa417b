/* The inject engine's records: each image's per-thread rings drained, merged
 * by time and delivered as events; the slots of threads that have exited
 * given back; the counts. The rings are the process's memory: nothing read
 * from them is trusted. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine/inject/inject_int.h"
#include "core/grow.h"
#include "engine/raw.h"
#include "cache/cache.h"
#include "ns/ns.h"

uint64_t inj_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void inj_calibrate(struct inj *j)
{
	tsc_sample(j->clock, 0);
}

void inj_comm_retire(struct inj *j, pid_t tid, const struct inj_image *img)
{
	for (size_t i = 0; i < j->ncomms; i++) {
		if (j->comms[i].tid != tid || j->comms[i].img)
			continue;
		if (img)
			j->comms[i].img = img;
		else
			j->comms[i--] = j->comms[--j->ncomms];
	}
}

/* The entry of tid: for img's records, the name it had there if it has
 * exec'd since, else its name now. */
static const struct inj_comm *comm_find(const struct inj *j, const struct inj_image *img,
					pid_t tid)
{
	const struct inj_comm *now = NULL;

	for (size_t i = 0; i < j->ncomms; i++) {
		if (j->comms[i].tid != tid)
			continue;
		if (img && j->comms[i].img == img)
			return &j->comms[i];
		if (!j->comms[i].img)
			now = &j->comms[i];
	}
	return now;
}

const char *inj_comm(struct inj *j, const struct inj_image *img, pid_t pid, pid_t tid)
{
	char path[64];
	const struct inj_comm *found = comm_find(j, img, tid);
	struct inj_comm *c;
	FILE *f;

	if (found)
		return found->comm;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	if (access(path, F_OK) && tid != pid) {
		/* gone before we asked: its process's name, as a thread has */
		found = comm_find(j, img, pid);
		if (found)
			return found->comm;
	}
	c = realloc(j->comms, (j->ncomms + 1) * sizeof(*c));
	if (!c)
		return "";
	j->comms = c;
	c = &c[j->ncomms++];
	c->tid = tid;
	c->img = NULL;
	c->comm[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		f = fopen(path, "re");
	}
	if (f) {
		if (fgets(c->comm, sizeof(c->comm), f))
			c->comm[strcspn(c->comm, "\n")] = 0;
		fclose(f);
	}
	if (!c->comm[0] && img && tid == pid) {
		/* a forked child gone before it was taken up: its name as it
		 * told it (forks.c) */
		const char *told = inj_forks_comm(j, img, pid);

		if (told)
			snprintf(c->comm, sizeof(c->comm), "%.16s", told);
	}
	return c->comm;
}

static uint64_t *counts_of(const struct inj_shm *m)
{
	return (uint64_t *)((char *)m->map + m->ctl->counts_off);
}

static struct inj_slot *slots_of(const struct inj_shm *m)
{
	return (struct inj_slot *)((char *)m->map + m->ctl->slots_off);
}

struct pending {
	uint64_t tsc;
	const struct inj_rec *rec;
	const struct inj_image *img;
	uint32_t slot;
	uint32_t idx;			/* in collect's order: ring order in a slot */
	uint32_t len;			/* its bytes, checked (inject_raw_peek) */
	uint64_t end;			/* the ring position after it */
	size_t im;			/* img's index in the engine's images */
};

/* A slot's records in collect's order, [first, first + n): delivered up
 * to next, so its tail can move past them while the rest are delivered. */
struct slot_prog {
	uint32_t first, n, next;
};

static int cmp_pending(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->tsc != y->tsc)
		return x->tsc < y->tsc ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int deliver(struct inj *j, const struct pending *pd, usc_event_fn fn, void *ctx)
{
	const struct inj_shm *m = &pd->img->shm;
	const struct inj_rec *r = pd->rec;
	const struct inj_slot *sl = &slots_of(m)[pd->slot];
	const struct inj_site *is;
	struct usc_event ev;
	int32_t pid, tid;

	if (r->site >= j->base.nsites)
		return 0;
	is = (const struct inj_site *)((const char *)m->map + m->ctl->sites_off) + r->site;
	pid = sl->tgid ? (int32_t)sl->tgid : pd->img->pid;
	tid = (int32_t)(sl->tid ? sl->tid : (uint32_t)sl->key);
	inj_host_ids(j, pd->img, &pid, &tid);	/* a container's */
	if (inject_raw_event(r, pd->len, j->base.sites[r->site], is->ip, tsc_ns(j->clock, pd->tsc),
			     pid, tid, inj_comm(j, pd->img, pid, tid), j->vals, &ev))
		return 0;
	if (j->stk.on)
		inj_stk_event(j, j->images[pd->im], &ev);
	j->stats[r->site].events++;
	return fn(&ev, ctx);
}

/* Give the slots of threads that have exited back, so a process that
 * starts threads all the time does not run out of them: their counts are
 * kept here. Only where a slot's key is the tid (a new thread of the same
 * fs base would find a slot keyed by it at once). */
static void reclaim(struct inj *j, struct inj_image *img)
{
	struct inj_shm *m = &img->shm;
	struct inj_slot *slots = slots_of(m);
	uint64_t *c = counts_of(m);
	size_t nsites = j->base.nsites;
	char path[64];

	if (m->ctl->key_mode != INJ_KEY_TID_AT_FS)
		return;
	for (uint32_t k = 0; k < INJ_NSLOTS; k++) {
		struct inj_slot *sl = &slots[k];
		uint64_t key = sl->key;

		if (!key || key == INJ_KEY_TOMB || sl->head != sl->tail)
			continue;
		int32_t pid = sl->tgid ? (int32_t)sl->tgid : img->pid, tid = (int32_t)key;

		inj_host_ids(j, img, &pid, &tid);	/* 0: gone */
		snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, (int)tid);
		if (access(path, F_OK) == 0 || errno != ENOENT)
			continue;
		/* take it out of the table first (a new thread of the same tid would
		 * claim another slot), then check nothing is inside it */
		if (!__atomic_compare_exchange_n(&sl->key, &key, INJ_KEY_TOMB, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue;
		if (sl->nest || sl->head != sl->tail) {
			__atomic_store_n(&sl->key, key, __ATOMIC_RELEASE);
			continue;
		}
		for (size_t i = 0; i < nsites; i++) {
			uint64_t *cc = &c[INJ_NCOUNTS * ((uint64_t)k * nsites + i)];

			for (int q = 0; q < INJ_NCOUNTS; q++) {
				m->folded[INJ_NCOUNTS * i + q] += cc[q];
				cc[q] = 0;
			}
		}
		inj_agg_reclaim(m, k);
		/* tail calls it waited on never return: a thread that ended */
		m->dropped += sl->dropped + sl->npend;
		sl->dropped = 0;
		sl->npend = 0;
		sl->head = sl->tail = sl->tail_seen = 0;
		sl->tid = 0;
		sl->tgid = 0;
		sl->nest = 0;
		__atomic_store_n(&sl->key, 0, __ATOMIC_RELEASE);
	}
}

/* Every record of the image's rings into pd; their heads in heads, where
 * each slot's records are in prog. */
static int collect(const struct inj *j, size_t im, struct pending **pd, size_t *npd,
		   size_t *cap, uint64_t *heads, struct slot_prog *prog)
{
	const struct inj_image *img = j->images[im];
	const struct inj_shm *m = &img->shm;
	struct inj_slot *slots = slots_of(m);

	for (uint32_t sidx = 0; sidx < INJ_NSLOTS; sidx++) {
		struct inj_slot *sl = &slots[sidx];
		const char *ring = (const char *)m->map + m->ctl->rings_off +
				   (uint64_t)sidx * INJ_RING_SIZE;
		uint64_t pos, head;

		heads[sidx] = 0;
		prog[sidx] = (struct slot_prog){(uint32_t)*npd, 0, (uint32_t)*npd};
		if (!sl->key)
			continue;
		head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
		heads[sidx] = head;
		for (pos = sl->tail; pos != head;) {
			uint64_t at = pos & (INJ_RING_SIZE - 1), left = head - pos;
			const struct inj_rec *r = (const void *)(ring + at);
			uint64_t room = left < INJ_RING_SIZE - at ? left : INJ_RING_SIZE - at;
			uint32_t len, site;
			uint64_t tsc;
			int kind = inject_raw_peek(r, room, &site, &tsc, &len);

			if (kind < 0 || (kind == 1 && at + len != INJ_RING_SIZE))
				break;	/* not what the agent writes */
			if (kind == 1) {
				pos += len;
				continue;
			}
			if (core_reserve(*pd, *cap, *npd + 1, 1024))
				return -ENOMEM;
			pos += len;
			(*pd)[*npd] = (struct pending){tsc, r, img, sidx, (uint32_t)*npd, len, pos, im};
			++*npd;
			prog[sidx].n++;
		}
	}
	return 0;
}

/* Room made in a ring: wake its producer if it waits for it. The full
 * barrier orders our store of the tail before our read of its flag, as
 * the producer orders its flag before its read of the tail. */
static void wake(struct inj_slot *sl)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&sl->waiting, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&sl->wake, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &sl->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
}

/* pd was delivered: its slot's tail moves past every record of the slot
 * delivered up to it (done: by collect's order), and a waiting producer
 * wakes. A slow consumer (stacks unwound) frees room record by record. The
 * flag is read without a barrier here (one a record would cost the
 * consumer dearly): a producer whose flag is not seen yet waits for the
 * slot's next record (its ring was full: more are coming), or for the end
 * of the drain, which wakes with one. */
static void delivered(const struct pending *pd, struct slot_prog *prog, uint8_t *done,
		      const uint64_t *ends)
{
	struct inj_slot *sl = &slots_of(&pd->img->shm)[pd->slot];
	struct inj_ctl *ctl = pd->img->shm.ctl;
	struct slot_prog *p = &prog[pd->slot];
	uint32_t before = p->next;

	done[pd->idx] = 1;
	while (p->next < p->first + p->n && done[p->next])
		p->next++;
	if (p->next == before)
		return;
	__atomic_store_n(&sl->tail, ends[p->next - 1], __ATOMIC_RELEASE);
	if (__atomic_load_n(&sl->waiting, __ATOMIC_RELAXED))
		wake(sl);
	/* a wait ran out: the threads wait again once we make room */
	if (__atomic_load_n(&ctl->stall, __ATOMIC_RELAXED))
		__atomic_add_fetch(&ctl->progress, 1, __ATOMIC_RELEASE);
}

int inj_poll_images(struct inj *j, usc_event_fn fn, void *ctx)
{
	struct pending *pd = NULL;
	size_t npd = 0, cap = 0;
	uint64_t (*heads)[INJ_NSLOTS], *ends = NULL;
	struct slot_prog (*prog)[INJ_NSLOTS];
	uint8_t *done = NULL;
	int delivered_n = 0, stop = 0, ret = -ENOMEM;

	if (!j->nimages)
		return 0;
	if (j->stk.on)
		inj_stk_sync(j);	/* maps changed since: before the walks they made */
	inj_bell_begin(j);
	heads = calloc(j->nimages, sizeof(*heads));
	prog = calloc(j->nimages, sizeof(*prog));
	if (!heads || !prog)
		goto out;
	/* a sample after the records were made (all of them, once this
	 * drain's heads are read below): none is past the last sample */
	tsc_sample(j->clock, 1);
	for (size_t i = 0; i < j->nimages; i++)
		if (j->images[i]->shm.map && collect(j, i, &pd, &npd, &cap, heads[i], prog[i]))
			goto out;
	/* the names the agent copied, after the heads were read: a record
	 * collected was committed after its code objects were described */
	for (size_t i = 0; i < j->nimages; i++)
		inj_py_sync(j, j->images[i]);
	ends = malloc((npd + 1) * sizeof(*ends));
	done = calloc(npd + 1, 1);
	if (!ends || !done)
		goto out;
	for (size_t i = 0; i < npd; i++)
		ends[i] = pd[i].end;
	if (npd)
		qsort(pd, npd, sizeof(*pd), cmp_pending);
	for (size_t i = 0; i < npd && !stop; i++) {
		stop = deliver(j, &pd[i], fn, ctx);
		delivered_n++;
		delivered(&pd[i], prog[pd[i].im], done, ends);
	}
	ret = 0;
	for (size_t i = 0; i < j->nimages; i++) {
		struct inj_image *img = j->images[i];
		struct inj_slot *slots;

		if (!img->shm.map)
			continue;
		slots = slots_of(&img->shm);
		for (uint32_t s = 0; s < INJ_NSLOTS; s++)
			if (slots[s].key && heads[i][s]) {
				__atomic_store_n(&slots[s].tail, heads[i][s], __ATOMIC_RELEASE);
				wake(&slots[s]);
			}
		__atomic_add_fetch(&img->shm.ctl->progress, 1, __ATOMIC_RELEASE);
		/* room made: the sites that dropped on a full ring read the
		 * clock first again (agent_fast_rec) */
		for (size_t k = 0; k < j->base.nsites; k++) {
			struct inj_site *is = (struct inj_site *)((char *)img->shm.map +
								  img->shm.ctl->sites_off) + k;

			if (is->fast.full)
				is->fast.full = 0;
		}
		if (j->live && inj_mono_ns() >= img->next_reclaim) {
			reclaim(j, img);
			img->next_reclaim = inj_mono_ns() + 200000000ULL;
		}
	}
out:
	free(pd);
	free(ends);
	free(done);
	free(heads);
	free(prog);
	inj_bell_end(j);
	return ret ? ret : delivered_n;
}

/* ---- recording ---------------------------------------------------------- */

void inj_wake_all(struct inj *j)
{
	for (size_t i = 0; i < j->nimages; i++) {
		struct inj_shm *m = &j->images[i]->shm;

		if (!m->map)
			continue;
		m->ctl->lossless = 0;
		for (uint32_t k = 0; k < INJ_NSLOTS; k++)
			if (slots_of(m)[k].key)
				wake(&slots_of(m)[k]);
	}
}

/* The records of [tail, head) as each site's events (their headers read
 * only: the summary's counts), up to the first record end at or past
 * tail + max bytes: that end, or head. A record that is not what the agent
 * writes ends the count there, and the rest is head's (written as it is,
 * for the reader to judge). */
static uint64_t count_records(struct inj *j, const char *ring, uint64_t tail, uint64_t head,
			      uint64_t max)
{
	uint64_t from = tail;

	while (tail != head && tail - from < max) {
		uint64_t at = tail & (INJ_RING_SIZE - 1);
		uint64_t room = head - tail < INJ_RING_SIZE - at ? head - tail : INJ_RING_SIZE - at;
		uint32_t site, len = 0;
		uint64_t tsc;
		int kind = 0;

		/* most are short: their first word says all (read once: the
		 * ring is the process's memory), and the call a record is the
		 * third of what a recording costs the tracer */
		if (room >= sizeof(struct inj_rec_short))
			len = inj_short_len(*(const volatile uint32_t *)(ring + at), room);
		if (len)
			site = ((const struct inj_rec_short *)(ring + at))->site;
		else
			kind = inject_raw_peek(ring + at, room, &site, &tsc, &len);
		if (kind < 0)
			return head;
		if (kind == 0 && site < j->base.nsites)
			j->stats[site].events++;
		tail += len;
	}
	return tail;
}

/* An image the recording has not described: its process, and each site's
 * runtime address in it (what a record's site means there). */
static int record_image(struct inj *j, size_t idx, const struct usc_raw_out *out)
{
	struct inj_image *img = j->images[idx];
	const struct inj_site *is = (const struct inj_site *)((const char *)img->shm.map +
							       img->shm.ctl->sites_off);
	uint64_t *ips = calloc(j->base.nsites + 1, sizeof(*ips));
	int ret;

	if (!ips)
		return -ENOMEM;
	for (size_t i = 0; i < j->base.nsites; i++)
		ips[i] = is[i].ip;
	ret = out->image(out, (uint32_t)idx, img->pid, ips, j->base.nsites);
	free(ips);
	if (!ret)
		ret = out->process(out, img->pid);
	img->recorded = !ret;
	return ret;
}

/* Slot k's records of image idx from stream position from to head, ring's
 * bytes (at the same offsets as the slot's ring) written to out, their
 * thread first if out does not know it yet. 0 or out's error. */
static int write_ring(struct inj *j, size_t idx, uint32_t k, const char *ring, uint64_t from,
		      uint64_t head, const struct usc_raw_out *out)
{
	struct inj_image *img = j->images[idx];
	const struct inj_slot *sl = &slots_of(&img->shm)[k];
	uint64_t n = head - from, at = from & (INJ_RING_SIZE - 1);
	uint64_t first = n < INJ_RING_SIZE - at ? n : INJ_RING_SIZE - at;
	struct usc_raw_inject h = {(uint32_t)idx, k, sl->tgid ? (int32_t)sl->tgid : img->pid,
				   (int32_t)(sl->tid ? sl->tid : (uint32_t)sl->key), (uint32_t)n};
	int ret;

	inj_host_ids(j, img, &h.pid, &h.tid);
	if (!out->knows_thread(out, h.tid) &&
	    (ret = out->thread(out, h.pid, h.tid, inj_comm(j, img, h.pid, h.tid))))
		return ret;
	count_records(j, ring, from, head, UINT64_MAX);
	return out->inject(out, &h, ring + at, first, ring, n - first);
}

/* Slot k's records of image idx, [tail, head) of its live ring, written to
 * out in pieces of about RECORD_PIECE bytes, each ending at a record's end,
 * and the slot's tail moved past each piece once it is written: a thread
 * that waits for room goes on while the rest is written (the whole ring at
 * once kept it waiting for all of it, while the tracer was writing what it
 * could already have had). */
#define RECORD_PIECE (256u << 10)
static int stream_ring(struct inj *j, size_t idx, uint32_t k, const char *ring, uint64_t tail,
		       uint64_t head, const struct usc_raw_out *out)
{
	struct inj_image *img = j->images[idx];
	struct inj_slot *sl = &slots_of(&img->shm)[k];
	struct usc_raw_inject h = {(uint32_t)idx, k, sl->tgid ? (int32_t)sl->tgid : img->pid,
				   (int32_t)(sl->tid ? sl->tid : (uint32_t)sl->key), 0};
	int ret;

	inj_host_ids(j, img, &h.pid, &h.tid);
	if (!out->knows_thread(out, h.tid) &&
	    (ret = out->thread(out, h.pid, h.tid, inj_comm(j, img, h.pid, h.tid))))
		return ret;
	while (tail != head) {
		uint64_t to = count_records(j, ring, tail, head, RECORD_PIECE);
		uint64_t n = to - tail, at = tail & (INJ_RING_SIZE - 1);
		uint64_t first = n < INJ_RING_SIZE - at ? n : INJ_RING_SIZE - at;

		h.nbytes = (uint32_t)n;
		ret = out->inject(out, &h, ring + at, first, ring, n - first);
		if (ret)
			return ret;
		tail = to;
		__atomic_store_n(&sl->tail, tail, __ATOMIC_RELEASE);
		wake(sl);
	}
	return 0;
}

/* The flight recorder (--snapshot): the newest records of slot k's
 * overwrite ring, at most keep bytes, that an earlier dump has not written.
 * Its producer moves the ring's tail itself when the ring is full, past
 * records before it writes over them. So the bytes are copied first, to a
 * shadow ring at the same offsets, then the tail is read again: what lies
 * before it may have been overwritten during the copy and is left out; what
 * lies after it is intact. 1 (written), 0 (nothing new), or -errno. */
static int dump_slot(struct inj *j, size_t idx, uint32_t k, uint64_t keep,
		     const struct usc_raw_out *out)
{
	struct inj_image *img = j->images[idx];
	struct inj_shm *m = &img->shm;
	struct inj_slot *sl = &slots_of(m)[k];
	const char *ring = (const char *)m->map + m->ctl->rings_off + (uint64_t)k * INJ_RING_SIZE;
	uint64_t head, tail, from, at;
	int ret;

	if (!img->dumped && !(img->dumped = calloc(INJ_NSLOTS, sizeof(*img->dumped))))
		return -ENOMEM;
	if (!j->shadow && !(j->shadow = malloc(INJ_RING_SIZE)))
		return -ENOMEM;
	head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
	tail = __atomic_load_n(&sl->tail, __ATOMIC_ACQUIRE);
	if (img->dumped[k] > head)
		img->dumped[k] = 0;	/* the slot was given to another thread */
	from = tail > img->dumped[k] ? tail : img->dumped[k];
	if (head - from > INJ_RING_SIZE || head == from)
		return 0;
	for (uint64_t p = from; p < head;) {
		uint64_t o = p & (INJ_RING_SIZE - 1), len = head - p < INJ_RING_SIZE - o ?
							       head - p : INJ_RING_SIZE - o;

		memcpy(j->shadow + o, ring + o, len);
		p += len;
	}
	tail = __atomic_load_n(&sl->tail, __ATOMIC_ACQUIRE);
	if (tail > from)
		from = tail;
	/* the newest keep bytes: whole records from a record's start */
	while (head - from > keep) {
		uint32_t site, len;
		uint64_t tsc;

		at = from & (INJ_RING_SIZE - 1);
		if (inject_raw_peek(j->shadow + at, INJ_RING_SIZE - at < head - from ?
				    INJ_RING_SIZE - at : head - from, &site, &tsc, &len) < 0)
			return 0;
		from += len;
	}
	img->dumped[k] = head;
	if (head <= from)
		return 0;
	ret = write_ring(j, idx, k, j->shadow, from, head, out);
	return ret ? ret : 1;
}

static int record_images(struct inj *j, const struct usc_raw_out *out);

int inj_record_images(struct inj *j, const struct usc_raw_out *out)
{
	int ret;

	inj_bell_begin(j);
	ret = record_images(j, out);
	inj_bell_end(j);
	return ret;
}

static int record_images(struct inj *j, const struct usc_raw_out *out)
{
	const struct tsc_pair *last;
	int written = 0, ret;

	/* the clock: a sample each 10 ms, and one now if none was written, for
	 * the reader to convert TSCs (the first two a rate) */
	tsc_sample(j->clock, j->clock_sent < 2);
	last = tsc_last(j->clock);
	if (last && last->tsc != j->clock_tsc) {
		ret = out->clock(out, last->tsc, last->ns);
		if (ret)
			return ret;
		j->clock_tsc = last->tsc;
		j->clock_sent++;
	}
	for (size_t i = 0; i < j->nimages; i++) {
		struct inj_image *img = j->images[i];
		struct inj_shm *m = &img->shm;
		struct inj_slot *slots;

		if (!m->map)
			continue;
		if (!img->recorded && (ret = record_image(j, i, out)))
			return ret;
		if (m->ctl->overwrite) {
			/* the flight recorder: read when the session dumps it */
			for (uint32_t k = 0; k < INJ_NSLOTS && out->snapshot; k++) {
				if (!slots_of(m)[k].key && !(img->dumped && img->dumped[k]))
					continue;
				ret = dump_slot(j, i, k, j->base.ctx->set->record.snapshot, out);
				if (ret < 0)
					return ret;
				written += ret;
			}
			continue;
		}
		slots = slots_of(m);
		for (uint32_t k = 0; k < INJ_NSLOTS; k++) {
			struct inj_slot *sl = &slots[k];
			uint64_t head, tail, n;
			const char *ring = (const char *)m->map + m->ctl->rings_off +
					   (uint64_t)k * INJ_RING_SIZE;

			if (!sl->key)
				continue;
			head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
			tail = sl->tail;
			n = head - tail;
			if (!n || n > INJ_RING_SIZE)
				continue;
			ret = stream_ring(j, i, k, ring, tail, head, out);
			if (ret)
				return ret;
			written++;
		}
		__atomic_add_fetch(&m->ctl->progress, 1, __ATOMIC_RELEASE);
		if (j->live && inj_mono_ns() >= img->next_reclaim) {
			reclaim(j, img);
			img->next_reclaim = inj_mono_ns() + 200000000ULL;
		}
	}
	return written;
}

int inj_stats_images(struct inj *j, struct usc_stats *st)
{
	size_t nsites = j->base.nsites;

	st->events = st->lost = 0;
	j->dropped = 0;
	for (size_t i = 0; i < nsites; i++) {
		j->stats[i].hits = 0;
		j->stats[i].lost = 0;
		j->stats[i].lost_wait = 0;
		j->stats[i].agg_full = 0;
		j->stats[i].agg_fault = 0;
	}
	for (size_t k = 0; k < j->nimages; k++) {
		const struct inj_shm *m = &j->images[k]->shm;
		const uint64_t *c;
		const char *cc;

		if (!m->map)
			continue;
		c = counts_of(m);
		cc = (const char *)m->map + m->cpu_counts_off;
		for (size_t i = 0; i < nsites; i++) {
			const uint64_t *f = &m->folded[INJ_NCOUNTS * i];
			uint64_t hits = f[INJ_C_HITS], lost = f[INJ_C_LOST], full = f[INJ_C_AGG_FULL];
			uint64_t fault = f[INJ_C_FAULT], slow = f[INJ_C_LOST_WAIT];

			for (uint32_t sl = 0; sl < INJ_NSLOTS; sl++) {
				const uint64_t *cc = &c[INJ_NCOUNTS * ((uint64_t)sl * nsites + i)];

				hits += cc[INJ_C_HITS];
				lost += cc[INJ_C_LOST];
				full += cc[INJ_C_AGG_FULL];
				fault += cc[INJ_C_FAULT];
				slow += cc[INJ_C_LOST_WAIT];
			}
			j->stats[i].lost_wait += slow;
			j->stats[i].agg_full += full;
			j->stats[i].agg_fault += fault;
			for (uint32_t b = 0; b < INJ_CPU_BUCKETS; b++)
				hits += *(const uint64_t *)(cc + (uint64_t)b * m->cpu_stride +
							    i * sizeof(uint64_t));
			j->stats[i].hits += (int64_t)hits;
			j->stats[i].lost += (int64_t)lost;
		}
		st->lost += m->ctl->slot_full;
		j->dropped += m->dropped;
		for (uint32_t sl = 0; sl < INJ_NSLOTS; sl++)
			j->dropped += slots_of(m)[sl].dropped;
	}
	for (size_t i = 0; i < nsites; i++) {
		st->events += j->stats[i].events;
		st->lost += (uint64_t)j->stats[i].lost;
	}
	st->sites = j->stats;
	return 0;
}
