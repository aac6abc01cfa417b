/* The recorder sink (uscope record): the file the engines write their
 * records to, unformatted (src/record/); at the start the probes and the
 * traced process, at the end every site's counts. The session runs in
 * recording mode when one is among its sinks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "record/record.h"
#include "sink/sink.h"

struct record_sink {
	struct usc_sink base;
	char *path, *command;
	struct rec_writer *w;
};

static int record_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct record_sink *rs = container_of(k, struct record_sink, base);
	int ret = rec_writer_open(rs->path, rs->command, &rs->w);

	if (ret)
		return ret;
	return rec_write_sites(rs->w, s->specs, s->nspecs, s->sites, s->nsites, s->place,
			       s->engine_names);
}

static struct rec_writer *record_writer(struct usc_sink *k)
{
	return container_of(k, struct record_sink, base)->w;
}

static int record_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			 const struct usc_stats *st, bool final)
{
	struct record_sink *rs = container_of(k, struct record_sink, base);
	int ret;

	if (!final || !rs->w)
		return 0;
	ret = rec_write_stats(rs->w, st, s->nsites);
	if (!ret) {
		uint64_t bytes = rec_written(rs->w);

		ret = rec_writer_close(rs->w);
		rs->w = NULL;
		if (!ret)
			log_info("recorded %llu bytes to %s", (unsigned long long)bytes, rs->path);
	}
	return ret;
}

static void record_destroy(struct usc_sink *k)
{
	struct record_sink *rs = container_of(k, struct record_sink, base);

	rec_writer_free(rs->w);	/* a run that failed: the file ends there */
	free(rs->path);
	free(rs->command);
	free(rs);
}

static const struct usc_sink_ops record_ops = {
	.begin = record_begin,
	.report = record_report,
	.destroy = record_destroy,
	.writer = record_writer,
};

struct usc_sink *usc_sink_record(const char *path, const char *command)
{
	struct record_sink *rs = calloc(1, sizeof(*rs));

	if (!rs || !(rs->path = strdup(path)) || !(rs->command = strdup(command ? command : ""))) {
		if (rs)
			free(rs->path);
		free(rs);
		return NULL;
	}
	rs->base.ops = &record_ops;
	return &rs->base;
}
