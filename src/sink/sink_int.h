/* What the event-printing sinks (text.c, json.c) share: formatting into a
 * buffer (output.c) and writing it out in batches. */
#ifndef USC_SINK_SINK_INT_H
#define USC_SINK_SINK_INT_H

#include <stdbool.h>
#include <stdio.h>

#include "output/output.h"
#include "sink/sink.h"

struct sink_out {
	struct usc_sink base;
	struct usc_output out;
	FILE *fp;
	int write_error;	/* errno, reported once */
};

struct usc_sink *sink_out_new(const struct usc_sink_ops *ops, FILE *fp, bool json);
int sink_out_begin(struct usc_sink *k, const struct usc_sink_ctx *s);
int sink_out_event(struct usc_sink *k, const struct usc_event *ev);
int sink_out_flush(struct usc_sink *k);
void sink_out_destroy(struct usc_sink *k);

/* python.c: a py: probe's event is about a Python function: its name
 * ("module:qualname", interned: stable for the session), or NULL for an
 * event of another probe. */
const char *sink_py_name(struct usc_cache *c, const struct usc_event *ev);
/* flow_classify (flow/flow.h) for an event: a py: probe's pairs by its
 * Python function. */
#include "flow/flow.h"
enum flow_kind sink_flow_classify(struct usc_cache *c, const struct usc_event *ev,
				  const char **key, size_t *keylen, bool *unpaired);

/* Write buf[0..len) to fp's file with write(2), whole lines at a time:
 * buf holds whole lines, and COMMAND, which shares the file, can write
 * between two of them, never inside one (out.c). A failure is kept in
 * *error (errno) and logged once (EPIPE silently: the reader has gone).
 * Returns *error. */
int sink_write(FILE *fp, const char *buf, size_t len, int *error);

#endif
