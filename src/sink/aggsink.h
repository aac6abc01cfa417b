/* What the aggregating sinks (count.c with keys, hist.c, latency.c) share:
 * their rows, by probe label and key (agg/table.h), fed by what the
 * engines aggregated where the probe runs (agg_row) and by the events of
 * the ones that cannot (event: a key from the event, and for latency the
 * pairing of entries and returns, src/flow's rules); the report's order, its
 * intervals, and how a key is written.
 *
 * Every report prints the rows of its interval (-i), the final one the rows
 * of the whole run. */
#ifndef USC_SINK_AGGSINK_H
#define USC_SINK_AGGSINK_H

#include <stdbool.h>
#include <stdio.h>

#include "flow/flow.h"
#include "output/output.h"
#include "agg/table.h"
#include "sink/sink.h"

struct agg_sink;

/* Print the rows of a report (sorted by the sink's order). 0 or -ENOMEM. */
typedef int (*agg_print_fn)(struct agg_sink *k, struct usc_output *o, struct agg_row **rows,
			    size_t n, bool final);

/* The room of each line agg_words_fn fills. */
#define AGGSINK_LINE 320

/* What a histogram sink's row says of itself besides its key and buckets:
 * JSON, its members after the key, written to o; text, head, the line
 * after the key, and stats, the line after the histogram, into
 * AGGSINK_LINE bytes each (o untouched). 0 or -ENOMEM. */
typedef int (*agg_words_fn)(const struct agg_sink *k, struct usc_output *o,
			    const struct agg_row *r, char *head, char *stats);

struct agg_sink {
	struct usc_sink base;
	FILE *fp;
	bool json;
	int write_error;		/* errno, reported once */
	int err;			/* -ENOMEM on the event path */
	const struct usc_sink_ctx *s;
	struct usc_agg_opts a;
	uint32_t nbuckets;
	struct agg_table iv;		/* since the last report */
	struct agg_table all;		/* the whole run, with -i */
	bool intervals;
	const char **labels;		/* distinct labels of the shown sites */
	size_t nlabels;
	size_t *label_of;		/* per site */
	struct flow_state *flow;	/* latency: entries waiting for their return */
	uint64_t bad_values;		/* hist: values that were not numbers (faults) */
	size_t event_keys;		/* keys made from events: at most a.max_rows */
	uint64_t full;			/* hits of new keys beyond it */
	agg_print_fn print;
	agg_words_fn words;		/* hist, latency: for aggsink_print_hists */
	bool by_count;			/* order: count first (count), else label first */
	size_t top;			/* print the first top rows only (0: all) */
	bool folded;			/* count --folded: folded stacks, not a table */
	/* latency --per-call: a call's line, into calls; 0 or -errno */
	int (*per_call)(struct agg_sink *k, const struct usc_event *ret, const struct agg_row *r,
			int64_t v);
	struct usc_output calls;	/* the calls' lines, written at each flush */
};

/* The distinct labels of the session's shown sites, in site order, into
 * labels (s->nsites of room), and each site's index among them into
 * label_of; how many. */
size_t aggsink_labels(const struct usc_sink_ctx *s, const char **labels, size_t *label_of);

/* The ops of an aggregating sink whose begin needs nothing more. */
extern const struct usc_sink_ops aggsink_ops;

/* Set up the common part; the caller sets print and the rest. */
void aggsink_init(struct agg_sink *k, const struct usc_sink_ops *ops, FILE *fp, bool json);

int aggsink_begin(struct usc_sink *k, const struct usc_sink_ctx *s);
int aggsink_event(struct usc_sink *k, const struct usc_event *ev);
int aggsink_row(struct usc_sink *k, const struct usc_site *site, const uint8_t *key,
		uint32_t keylen, const struct agg_stats *st, const uint64_t *buckets);
int aggsink_report(struct usc_sink *k, const struct usc_sink_ctx *s, const struct usc_stats *st,
		   bool final);
int aggsink_flush(struct usc_sink *k);
void aggsink_destroy(struct usc_sink *k);

/* The key of row r, as an event's arguments print: text " name=value ..."
 * (with " [cut]" after a string cut to the key's length), or a JSON
 * object. 0 or -ENOMEM. */
int aggsink_key(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r);

/* Key slot i of row r (the key of its site's arguments from first) into
 * vals[first + i], with ev's pid (a stack's process) and nvals set to show
 * it: what a sink that writes one key at a time reads. */
void aggsink_key_slot(const struct agg_sink *k, const struct agg_row *r, unsigned first,
		      unsigned i, struct usc_value *vals, struct usc_event *ev);

/* Value j of ev as a label's text: a string's bytes themselves, not
 * quoted, else as the argument prints. 0 or -ENOMEM. */
int aggsink_value_text(struct usc_output *o, const struct usc_event *ev, unsigned j);

/* What begins a row's output: text "LABEL name=value ...", or JSON
 * {"probe":LABEL,"key":{...} (the object left open). 0 or -ENOMEM. */
/* A row's stacks: text, each frame on its line, indented; folded, the
 * frames outermost first joined by ';' (the probe's label when it has no
 * stack), then " count" and a newline. 0 or -ENOMEM. */
int aggsink_stacks(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r,
		   bool folded, uint64_t count);
int aggsink_head(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r);

/* What ends a row's JSON object: its cut mark, its buckets, final. */
int aggsink_json_tail(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r,
		      bool final);

/* "[HH:MM:SS]" and a newline, for an interval's report. */
int aggsink_stamp(struct usc_output *o);

/* Histogram lines as bpftrace prints them: "[lo, hi)  count |@@@...|",
 * from the first bucket with a count to the last. log2 buckets show by power
 * of two. 0 or -ENOMEM. */
int aggsink_hist_text(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r);
/* The same as a JSON array of {"min":..,"max":..,"count":..} (min and max
 * absent where the bucket is open). */
int aggsink_hist_json(const struct agg_sink *k, struct usc_output *o, const struct agg_row *r);
/* The print of a histogram sink (hist.c, latency.c): an interval's text
 * stamped, then each row's head and its words (k->words), then in JSON its
 * buckets, in text its histogram (aggsink_hist_text) between the words'
 * lines. 0 or -ENOMEM. */
int aggsink_print_hists(struct agg_sink *k, struct usc_output *o, struct agg_row **rows,
			size_t n, bool final);

#endif
