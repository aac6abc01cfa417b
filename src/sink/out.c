/* The event-printing sinks' shared part: see sink_int.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

#define FLUSH_AT 65536	/* bytes formatted before they are written */

void usc_sink_free(struct usc_sink *k)
{
	if (k)
		k->ops->destroy(k);
}

int sink_write(FILE *fp, const char *buf, size_t len, int *error)
{
	if (*error)
		return *error;
	errno = 0;
	if ((len && fwrite(buf, 1, len, fp) != len) || fflush(fp)) {
		*error = errno ? errno : EIO;
		if (*error != EPIPE)
			log_error("cannot write events: %s", strerror(*error));
	}
	return *error;
}

struct usc_sink *sink_out_new(const struct usc_sink_ops *ops, FILE *fp, bool json)
{
	struct sink_out *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->base.ops = ops;
	o->fp = fp;
	o->out.json = json;
	return &o->base;
}

int sink_out_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	o->out.cache = s->cache;
	return 0;
}

int sink_out_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	if (output_event(&o->out, ev)) {
		log_error("out of memory");
		return -ENOMEM;
	}
	if (o->out.len < FLUSH_AT)
		return 0;
	sink_write(o->fp, o->out.buf, o->out.len, &o->write_error);
	output_reset(&o->out);
	return o->write_error;
}

int sink_out_flush(struct usc_sink *k)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	sink_write(o->fp, o->out.buf, o->out.len, &o->write_error);
	output_reset(&o->out);
	return o->write_error;
}

void sink_out_destroy(struct usc_sink *k)
{
	struct sink_out *o = container_of(k, struct sink_out, base);

	output_free(&o->out);
	free(o);
}
