/* A script running in uscope (run.c): the executor (vm.h) on the events
 * of engines that stream them, and on BEGIN, END and interval probes; the
 * output records of engines that run the program where the probe runs;
 * the maps printed at the end, uscope's own rows merged with the engines'. */
#ifndef USC_SCRIPT_RUN_H
#define USC_SCRIPT_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "probe/event.h"
#include "script/script.h"

struct usc_cache;
struct usc_site;
struct script_rt;

/* A source of map rows other than uscope's own tables: an engine that
 * runs the program where the probe runs. rows hands each of map m's rows
 * to fn (the key, a plain value or an aggregation's combined copies);
 * clear clears (zero: zeroes) map m there. */
struct script_source {
	void *ctx;
	int (*rows)(void *ctx, int m, void (*fn)(void *arg, int m, const uint8_t *key,
						  const uint8_t *val), void *arg);
	void (*clear)(void *ctx, int m, bool zero);
	/* the engine's counts of runtime errors, by enum script_err, and of
	 * updates each map lost for want of room, added to *errs, *full */
	void (*errors)(void *ctx, uint64_t *errs, uint64_t *full);
};

struct script_rt *script_rt_new(struct usc_script *s, FILE *fp, bool json);
void script_rt_free(struct script_rt *rt);
/* What the script's values name: the session's cache and sites. */
void script_rt_session(struct script_rt *rt, struct usc_cache *c, const struct usc_site *sites,
		       size_t nsites, const struct usc_probe_spec *specs);
int script_rt_add_source(struct script_rt *rt, const struct script_source *src);
/* BEGIN probes. 0, or 1 when one called exit(). */
int script_rt_begin(struct script_rt *rt);
/* An event of a site the tracer runs the program of. 0; 1 after exit(). */
int script_rt_event(struct script_rt *rt, const struct usc_event *ev);
/* An output record an engine's executor made at a hit (ev: its process,
 * thread, time, site). 0; 1 after exit(). */
int script_rt_record(struct script_rt *rt, const struct usc_event *ev, const void *rec,
		     uint32_t len);
/* interval probes that are due at now (CLOCK_MONOTONIC ns). 0; 1 after exit(). */
int script_rt_tick(struct script_rt *rt, uint64_t now);
/* END probes, then every map (bpftrace's exit), and the errors counted. 0
 * or -errno. */
int script_rt_end(struct script_rt *rt);
bool script_rt_exited(const struct script_rt *rt);

#endif
