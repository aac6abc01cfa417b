/* Waking us without a poll: the producers of an image ring its doorbell (a
 * futex word in the shared memory, inj_ctl.doorbell) when a ring passes the
 * watermark while we sleep (inj_ctl.asleep). A thread of ours waits on the
 * doorbells of every live image at once (futex_waitv, Linux 5.16) and makes
 * an eventfd readable, on which the session sleeps (usc_engine_ops.wait_fd).
 *
 * No file descriptor of ours goes into the traced process: a program that
 * closes every descriptor and opens a file in its place would see our
 * writes land in that file. The thread only turns a futex into an fd.
 *
 * Lost wake-ups: a drain ends by raising asleep, then (a full barrier) reads
 * every ring: a ring already past its watermark makes the eventfd readable
 * at once; a producer that publishes later sees asleep and rings. A producer
 * that read asleep just before it was raised rings at its next record, or
 * before it waits for room. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"

#define BELL_MAX (FUTEX_WAITV_MAX - 1)	/* the last entry is ours */

struct inj_bell {
	pthread_t th;
	pthread_mutex_t mu;
	int efd;
	uint32_t gen;			/* a futex: the set changed, or stop */
	bool stop, running;
	volatile uint32_t *words[BELL_MAX];	/* the live images' doorbells */
	size_t n;
};

static void *bell_main(void *arg)
{
	struct inj_bell *b = arg;
	struct futex_waitv w[FUTEX_WAITV_MAX];

	for (;;) {
		size_t n = 0;
		long r;

		pthread_mutex_lock(&b->mu);
		if (b->stop) {
			pthread_mutex_unlock(&b->mu);
			return NULL;
		}
		for (size_t i = 0; i < b->n; i++)
			w[n++] = (struct futex_waitv){
				.val = __atomic_load_n(b->words[i], __ATOMIC_ACQUIRE),
				.uaddr = (uintptr_t)b->words[i], .flags = FUTEX_32};
		w[n++] = (struct futex_waitv){.val = __atomic_load_n(&b->gen, __ATOMIC_SEQ_CST),
					      .uaddr = (uintptr_t)&b->gen,
					      .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG};
		pthread_mutex_unlock(&b->mu);
		r = syscall(SYS_futex_waitv, w, n, 0, NULL, CLOCK_MONOTONIC);
		/* a doorbell rang, or moved before we slept (EAGAIN; maybe only
		 * the set: a wake-up for nothing, harmless) */
		if ((r >= 0 && (size_t)r < n - 1) || (r < 0 && errno == EAGAIN)) {
			uint64_t one = 1;

			if (write(b->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				log_debug("inject: cannot signal the session: %s", strerror(errno));
		}
	}
}

static void bell_kick(struct inj_bell *b)
{
	__atomic_add_fetch(&b->gen, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &b->gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

int inj_bell_fd(struct inj *j)
{
	struct inj_bell *b = j->bell;
	sigset_t all, old;

	if (b)
		return b->running ? b->efd : -1;
	b = j->bell = calloc(1, sizeof(*b));
	if (!b)
		return -1;
	b->efd = -1;
	/* futex_waitv: an empty set is EINVAL where the call exists */
	if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, CLOCK_MONOTONIC) < 0 && errno == ENOSYS) {
		log_debug("inject: no futex_waitv (Linux 5.16): the session polls");
		return -1;
	}
	b->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (b->efd < 0 || pthread_mutex_init(&b->mu, NULL))
		return -1;
	/* no signal for it: the session reads its own from a signalfd */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	b->running = pthread_create(&b->th, NULL, bell_main, b) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return b->running ? b->efd : -1;
}

/* The images whose doorbells the thread waits on: the live ones. */
static void bell_sync(struct inj *j)
{
	struct inj_bell *b = j->bell;
	volatile uint32_t *words[BELL_MAX];
	size_t n = 0;

	for (size_t i = 0; i < j->nimages && n < BELL_MAX; i++)
		if (j->images[i]->refs > 0 && j->images[i]->shm.map)
			words[n++] = &j->images[i]->shm.ctl->doorbell;
	if (n == b->n && !memcmp(words, b->words, n * sizeof(words[0])))
		return;
	pthread_mutex_lock(&b->mu);
	memcpy(b->words, words, n * sizeof(words[0]));
	b->n = n;
	pthread_mutex_unlock(&b->mu);
	bell_kick(b);
}

void inj_bell_begin(struct inj *j)
{
	uint64_t v;

	if (!j->bell || !j->bell->running)
		return;
	if (read(j->bell->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("inject: cannot read the session's eventfd: %s", strerror(errno));
	for (size_t i = 0; i < j->nimages; i++)
		if (j->images[i]->shm.map)
			__atomic_store_n(&j->images[i]->shm.ctl->asleep, 0, __ATOMIC_RELAXED);
	bell_sync(j);
}

void inj_bell_end(struct inj *j)
{
	bool past = false;

	if (!j->bell || !j->bell->running)
		return;
	for (size_t i = 0; i < j->nimages; i++)
		if (j->images[i]->shm.map)
			__atomic_store_n(&j->images[i]->shm.ctl->asleep, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (size_t i = 0; i < j->nimages && !past; i++) {
		const struct inj_shm *m = &j->images[i]->shm;
		const struct inj_slot *sl;

		if (!m->map || m->ctl->overwrite)
			continue;
		sl = (const struct inj_slot *)((const char *)m->map + m->ctl->slots_off);
		for (uint32_t k = 0; k < INJ_NSLOTS && !past; k++) {
			uint64_t head = __atomic_load_n(&sl[k].head, __ATOMIC_ACQUIRE);

			past = sl[k].key &&
			       head - __atomic_load_n(&sl[k].tail, __ATOMIC_ACQUIRE) >= m->ctl->watermark;
		}
	}
	if (past) {
		uint64_t one = 1;

		if (write(j->bell->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_debug("inject: cannot signal the session: %s", strerror(errno));
	}
}

void inj_bell_stop(struct inj *j)
{
	struct inj_bell *b = j->bell;

	if (!b)
		return;
	if (b->running) {
		pthread_mutex_lock(&b->mu);
		b->stop = true;
		pthread_mutex_unlock(&b->mu);
		bell_kick(b);
		pthread_join(b->th, NULL);
		pthread_mutex_destroy(&b->mu);
	}
	if (b->efd >= 0)
		close(b->efd);
	free(b);
	j->bell = NULL;
}
