/* The run's settings: what a session was asked to compute and how it
 * buffers, decided once from its options (usc_session_new) and held once,
 * by the session. Engines (usc_engine_ctx.set) and sinks (usc_sink_ctx.set)
 * read them through a pointer; none keeps a copy. Here beside
 * usc_agg_opts, which it holds, so that engines and sinks may include it
 * without the session's header. */
#ifndef USC_AGG_SETTINGS_H
#define USC_AGG_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "agg/agg.h"

struct script_blob;

struct usc_settings {
	struct usc_agg_opts agg;	/* what is aggregated (its defaults applied) */
	/* uscope script: the compiled program (script/prog.h) the sites run
	 * (usc_site.script), or NULL */
	const struct script_blob *script;
	bool count_only;		/* only hit counts are wanted: an engine may
					 * count instead of recording */
	uint32_t stack_bytes;		/* $ustack: bytes of stack copied (0: 8 KiB) */
	double interval;		/* seconds between reports, 0: at the end */
	/* uscope record: lossless within max_wait_ns (then a full buffer
	 * drops and counts); snapshot: the flight recorder keeps that many
	 * bytes a thread (a CPU, on tracefs) in overwrite buffers */
	struct {
		bool on;
		uint64_t snapshot;
	} record;
	/* --max-wait: a lossless producer (record, stacks counted) that finds
	 * no room waits for it at most this long a wait, and only while the
	 * tracer makes progress; past it, records are dropped and counted (0:
	 * it never waits: --drop, --max-wait 0) */
	uint64_t max_wait_ns;
	/* uscope objtrace: the followed set holds max_objects at most (a
	 * --from hit beyond is reported) */
	struct {
		bool on;
		uint32_t max_objects;
	} objtrace;
	/* system-wide on inject: the most processes patched (--max-procs) */
	uint32_t max_procs;
};

#endif
