/* Sinks: where a session's events and counts go. One consumer per file:
 * text.c (trace), json.c (trace --json), flow.c (uscope flow), count.c
 * (uscope count), hist.c (uscope hist), latency.c (uscope latency),
 * summary.c (the readiness line and the summary on stderr); aggsink.c is
 * what the aggregating ones share. A command is a choice of sinks; the session (src/session/)
 * feeds every sink it was given, in order.
 *
 * A sink writes to the FILE it was made with; it never chooses stdout by
 * itself. Its failures (a write error) are reported through the log hook,
 * once, and stop the session. */
#ifndef USC_SINK_SINK_H
#define USC_SINK_SINK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "engine/engine.h"

struct usc_sink;
struct usc_probe_spec;
struct script_source;
struct rec_header;

/* What a sink is told of the session, once it is planned (the session fills
 * it and keeps it for the run): the probes and their sites, the engine each
 * site went to, the shared cache of files, and the options its output
 * depends on. A sink knows nothing else of the session. */
struct usc_sink_ctx {
	const struct usc_probe_spec *specs;
	size_t nspecs;
	const struct usc_site *sites;
	size_t nsites;
	const struct usc_placement *place;	/* nsites: the engine of each, -1 skipped */
	const char *const *engine_names;	/* the engines place[i].engine indexes */
	const size_t *engine_nsites;		/* ... and how many sites each took */
	size_t nengines;
	struct usc_cache *cache;			/* ELF files, debug info, maps, stacks */
	const struct usc_settings *set;		/* the run's settings (agg/settings.h):
						 * agg, interval, record... */
	const struct rec_header *replayed;	/* -r FILE: the recording's header */
	pid_t pid;				/* the traced process (-p, COMMAND); 0:
						 * system-wide, or a recording */
	const char *exe;			/* its executable (NULL: none) */
	bool command;				/* started as COMMAND (exe as it was run) */
	size_t nprocs;				/* system-wide: the processes patched at
						 * start (-e inject); 0: not counted */
	size_t nlate;				/* ... and at the end, the ones patched
						 * as they started */
	/* uscope script: what the engines that run the program where the
	 * probe fires hold (its maps' rows there: script/run.h), or NULL */
	const struct script_source *script_src;
};

/* Is site i one the user sees (not hidden, placed on an engine)? */
static inline bool sink_site_shown(const struct usc_sink_ctx *c, size_t i)
{
	return !c->sites[i].hidden && c->place[i].engine >= 0;
}

struct usc_sink_ops {
	/* Every probe is in place, before COMMAND runs. 0 or -errno. */
	int (*begin)(struct usc_sink *k, const struct usc_sink_ctx *c);
	/* One event, in time order. 0, or non-zero to stop the session. */
	int (*event)(struct usc_sink *k, const struct usc_event *ev);
	/* A drain is over: write out what is buffered. 0, or non-zero to stop. */
	int (*flush)(struct usc_sink *k);
	/* What the engines aggregated where the probe runs since the last
	 * report (agg/agg.h, usc_agg_fn): given before each report. 0, or
	 * non-zero to stop. */
	int (*agg_row)(struct usc_sink *k, const struct usc_site *site, const uint8_t *key,
		       uint32_t keylen, const struct agg_stats *st, const uint64_t *buckets);
	/* Every interval (final false), and once at the end (final true), with
	 * the session's counts: st->sites[i] is for c->sites[i]. */
	int (*report)(struct usc_sink *k, const struct usc_sink_ctx *c, const struct usc_stats *st,
		      bool final);
	/* About once a second (SESSION_REFRESH_MS), for a sink that keeps what
	 * is aggregated so far up to date without printing (sink/prom.c): after
	 * the engines' new rows went to agg_row, with the session's counts;
	 * taken is when the engines were read (CLOCK_REALTIME, just before).
	 * Also once before the first event. 0, or non-zero to stop. */
	int (*refresh)(struct usc_sink *k, const struct usc_sink_ctx *c, const struct usc_stats *st,
		       const struct timespec *taken);
	void (*destroy)(struct usc_sink *k);
	/* The recorder (record.c): the file the engines write their records
	 * to, unformatted; the session then runs in recording mode. */
	struct rec_writer *(*writer)(struct usc_sink *k);
};

struct usc_sink {
	const struct usc_sink_ops *ops;
};

void usc_sink_free(struct usc_sink *k);

/* trace: one ftrace-shaped line per event (text.c). */
struct usc_sink *usc_sink_text(FILE *fp);
/* trace --json: one JSON object per line (json.c). */
struct usc_sink *usc_sink_json(FILE *fp);
/* flow: entries and returns as a per-thread call tree with durations; one
 * JSON object per line with json (flow.c). */
struct usc_sink *usc_sink_flow(FILE *fp, bool json);
/* count: hits per probe label at each report, as BCC's funccount (a
 * glob's functions that were hit; with all, every one); keyed: per label
 * and key (the probes' fetch arguments); the first top rows (0: all); one
 * JSON object per row with json (count.c). */
struct usc_sink *usc_sink_count(FILE *fp, bool json, bool keyed, size_t top, bool folded,
				bool all);
/* hist: a histogram of each probe's last fetch argument, per label and key
 * (hist.c). */
struct usc_sink *usc_sink_hist(FILE *fp, bool json);
/* latency: entry-to-return times per function and key, and with per_call a
 * line per call (latency.c). */
struct usc_sink *usc_sink_latency(FILE *fp, bool json, bool per_call);
/* objtrace: a line per call that received a followed object (the
 * argument, the object, the --field value), per object followed and per
 * object released; one JSON object per line with json (objtrace.c). A
 * --from hit that found the set (max_objects) full is reported. */
struct usc_sink *usc_sink_objtrace(FILE *fp, bool json, uint32_t max_objects);
/* --serve ADDR:PORT: the live aggregates served over HTTP at /metrics, in
 * the Prometheus text format or OpenMetrics (the Accept header chooses),
 * from a snapshot refreshed about once a second (prom.c, src/serve/):
 *   uscope_probe_hits_total{probe,KEYS...}       count, objtrace
 *   uscope_latency_seconds_bucket/_sum/_count    latency
 *   uscope_value_bucket/_sum/_count              hist
 *   uscope_lost_total{probe}, uscope_snapshot_timestamp_seconds
 * each with pid, comm and binary, and the constant labels given as "k=v".
 * keyed: count's probes have keys (else the engines' hit counts). The
 * address is bound here: a bad one, a port in use or a bad label is
 * refused (logged, -errno) before anything is attached. */
enum usc_prom_kind { USC_PROM_COUNT, USC_PROM_HIST, USC_PROM_LATENCY, USC_PROM_OBJTRACE };
int usc_sink_prom(enum usc_prom_kind kind, bool keyed, const char *addr,
		  const char *const *labels, size_t nlabels, struct usc_sink **out);
/* The address a served sink listens on, "ADDR:PORT" (the port chosen for
 * 0), or NULL for another sink. */
const char *usc_sink_prom_address(const struct usc_sink *k);
/* count --pprof, latency --pprof: a pprof profile (gzipped profile.proto)
 * of the counted stacks at the end, the calls' time summed too for latency
 * (pprof.c). */
struct usc_sink *usc_sink_pprof(FILE *fp);
/* export --format pprof: a recording's stacks as a pprof profile, with the
 * time to the return where the probe is an entry paired with one. */
struct usc_sink *usc_sink_pprof_export(FILE *fp);
/* record: the engines' records, unformatted, into a recording at path
 * (record/format.h); command is how it was made, for the header. */
struct usc_sink *usc_sink_record(const char *path, const char *command);
enum usc_report_sort { USC_REPORT_TOTAL, USC_REPORT_SELF, USC_REPORT_CALLS };
/* report: per function (entry and return pairs) calls, total and self
 * time, min, avg and max, heaviest first by sort; then per probe its events
 * and losses (report.c). */
struct usc_sink *usc_sink_report(FILE *fp, bool json, enum usc_report_sort sort);
/* export --format chrome: Chrome trace-event JSON (chrome.c). */
struct usc_sink *usc_sink_chrome(FILE *fp);
/* export --format folded: folded call paths with their self time
 * (folded.c). */
struct usc_sink *usc_sink_folded(FILE *fp);
/* export --format svg, flamegraph -r: the folded sink's call paths drawn
 * as a flame graph (src/flame) with opts (its countname defaults to "ns":
 * the counts are self times) (svg.c). */
struct usc_flame_opts;
struct usc_sink *usc_sink_svg(FILE *fp, const struct usc_flame_opts *opts);
/* export --format ctf: a CTF 1.8 trace in directory dir, made if needed
 * (ctf.c). */
struct usc_sink *usc_sink_ctf(const char *dir);
/* What the summary sink says at the end. */
enum usc_summary_mode {
	USC_SUMMARY_NONE,	/* nothing (the command's own output says it) */
	USC_SUMMARY_PROBES,	/* events and losses, and per probe label */
	USC_SUMMARY_BRIEF,	/* ... per label only those that lost some and
				 * the few with the most events (every label when
				 * verbose): record and export */
};

/* uscope script: the script's own output (printf, print, the maps at the
 * end, in bpftrace's text, or its JSON lines with json) to fp, its probes
 * run on the events of engines that stream them, BEGIN, END and interval
 * probes run here (script.c, src/script/). The script is the caller's. */
struct usc_script;
struct usc_sink *usc_sink_script(struct usc_script *s, FILE *fp, bool json);

/* The readiness line ("uscope: tracing 163 functions (429 sites)"), one
 * line a probe on how its sites went to the engines (when more than one
 * took some, or verbose), and at the end the summary mode says
 * (summary.c). */
struct usc_sink *usc_sink_summary(FILE *fp, enum usc_summary_mode mode, bool verbose);
/* The hits of the shown sites the final report counted (their events or
 * the engines' hit counts, and what was lost of them); -1 before it. */
int64_t usc_sink_summary_hits(const struct usc_sink *k);

#endif
