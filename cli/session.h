/* One tracing session, shared by the subcommands that trace (trace, flow):
 * resolve the probes, open and attach the engine, start or attach to the
 * target, deliver events until the target exits, a signal or the duration,
 * then drain, print the summary and remove everything. */
#ifndef USC_CLI_SESSION_H
#define USC_CLI_SESSION_H

#include <stdbool.h>
#include <sys/types.h>

#include "engine/engine.h"

struct cli_run {
	/* what to trace */
	pid_t pid;			/* -p */
	char **cmd;			/* -- COMMAND [ARG...], NULL-terminated */
	double duration;		/* -d, 0 = none */
	const char *engine;		/* -e */
	bool quiet;			/* no readiness line, no summary */
	bool uretprobe;			/* r: swaps the return address (kernel uretprobe)
					 * instead of probing the return sites */
	/* where events go */
	usc_event_fn on_event;
	void *ctx;
	/* after each drain; return non-zero to stop (a write error) */
	int (*flush)(void *ctx);
	/* every `interval` seconds (if > 0) and once at the end (final) */
	double interval;
	void (*report)(void *ctx, const struct usc_session *s, const struct usc_stats *st,
		       bool final);
	bool count_only;		/* only hit counts are wanted */
	bool no_summary;		/* report() replaces the summary */
};

/* Run a session over specs. Returns the exit code: COMMAND's status in
 * COMMAND mode, 0 on a clean end, 1 on an error (already reported), 127/126
 * when COMMAND cannot run. */
int cli_run_session(const struct cli_run *run, struct usc_probe_spec *specs, size_t nspecs);

#endif
