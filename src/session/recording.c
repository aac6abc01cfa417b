/* The session's recording (uscope record): the recorder sink's writer, the
 * usc_raw_out the engines hand their records to (engine/engine.h), and the
 * flight recorder's dumps. Engines know nothing of the file: this is where
 * their raw records become chunks of it (record/record.h). */
#include <errno.h>
#include <stdlib.h>

#include "core/log.h"
#include "engine/raw.h"
#include "record/record.h"
#include "session/session.h"
#include "session/session_int.h"
#include "sink/sink.h"

static struct rec_writer *writer_of(const struct usc_raw_out *o)
{
	return ((const struct usc_session *)o->ctx)->rec;
}

static int raw_process(const struct usc_raw_out *o, pid_t pid)
{
	const struct usc_session *s = o->ctx;

	return rec_knows_process(s->rec, pid) ? 0 : rec_write_process(s->rec, s->cache, pid);
}

static bool raw_knows_thread(const struct usc_raw_out *o, pid_t tid)
{
	return rec_knows_thread(writer_of(o), tid);
}

static int raw_thread(const struct usc_raw_out *o, pid_t pid, pid_t tid, const char *comm)
{
	return rec_write_thread(writer_of(o), pid, tid, comm);
}

static int raw_clock(const struct usc_raw_out *o, uint64_t tsc, uint64_t ns)
{
	struct rec_clock_pair p = {tsc, ns};

	return rec_write_clock(writer_of(o), &p, 1);
}

static int raw_image(const struct usc_raw_out *o, uint32_t image, pid_t pid, const uint64_t *ips,
		     size_t n)
{
	return rec_write_image(writer_of(o), image, pid, ips, n);
}

static int raw_inject(const struct usc_raw_out *o, const struct usc_raw_inject *h, const void *a,
		      size_t alen, const void *b, size_t blen)
{
	struct rec_inject r = {h->image, h->slot, h->pid, h->tid, h->nbytes, 0};
	struct usc_session *s = (struct usc_session *)o->ctx;
	int ret;

	/* the Python code objects the records name, first (session/python.c) */
	if (s->python && ((ret = session_python_record_ring(s, h->pid, a, alen)) ||
			  (ret = session_python_record_ring(s, h->pid, b, blen))))
		return ret;
	return rec_write_inject(writer_of(o), &r, a, alen, b, blen);
}

int session_record_begin(struct usc_session *s)
{
	for (size_t k = 0; k < s->nsinks && !s->rec; k++)
		if (s->sinks[k]->ops->writer)
			s->rec = s->sinks[k]->ops->writer(s->sinks[k]);
	if (!s->rec)
		return 0;
	s->raw = (struct usc_raw_out){
		.ctx = s,
		.process = raw_process,
		.knows_thread = raw_knows_thread,
		.thread = raw_thread,
		.clock = raw_clock,
		.image = raw_image,
		.inject = raw_inject,
	};
	/* -p: the process as it is; COMMAND is described once it has exec'd,
	 * by its first event (session_record_event) or its inject image (now
	 * it is still uscope's copy) */
	if (s->target.kind == USC_TARGET_PID && s->pid > 0 &&
	    rec_write_process(s->rec, s->cache, s->pid))
		return -EIO;
	return 0;
}

int session_record_event(struct usc_session *s, const struct usc_event *ev)
{
	/* an engine that writes no records of its own: its events, in
	 * uscope's binary form; a process described when first seen */
	int ret = raw_process(&s->raw, ev->pid);

	ret = ret || !s->python ? ret : session_python_record_event(s, ev);
	ret = ret ? ret : rec_write_event(s->rec, ev, (uint32_t)(ev->site - s->sites));
	if (ret)
		s->sink_stop = ret;
	return ret;
}

int session_record_poll(struct usc_session *s, struct usc_engine *e)
{
	return e->ops->record(e, &s->raw);
}

void session_record_maps(struct usc_session *s, pid_t pid)
{
	if (s->rec && rec_knows_process(s->rec, pid) && rec_write_maps(s->rec, s->cache, pid))
		s->sink_stop = -EIO;
}

int session_record_round(struct usc_session *s)
{
	return rec_write_round(s->rec) ? -EIO : 0;
}

int session_record_dump(struct usc_session *s, const char *why)
{
	int n;

	if (!s->rec || !s->set.record.snapshot)
		return 0;
	log_info("the flight recorder writes: %s", why);
	if (rec_write_snapshot(s->rec, why))
		return -EIO;
	s->raw.snapshot = true;
	n = session_poll_engines(s, false);
	s->raw.snapshot = false;
	if (n >= 0 && rec_writer_flush(s->rec))
		n = -EIO;
	return n < 0 ? n : 0;
}

int session_record_last(struct usc_session *s, const char *why)
{
	int ret = rec_write_snapshot(s->rec, why) ? -EIO : 0;

	s->raw.snapshot = true;
	return ret;
}
