/* The trace --json sink: one JSON object per event, a line each (output.c
 * formats). */
#include "output/output.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

static const struct usc_sink_ops json_ops = {
	.begin = sink_out_begin,
	.event = sink_out_event,
	.flush = sink_out_flush,
	.destroy = sink_out_destroy,
};

struct usc_sink *usc_sink_json(FILE *fp)
{
	return sink_out_new(&json_ops, fp, true);
}
