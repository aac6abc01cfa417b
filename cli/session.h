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
	bool no_inlines;		/* --no-inlines: out-of-line entries only */
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

/* What a tracing subcommand takes beyond the shared options. */
enum cli_arg_extra {
	CLI_ARG_JSON = 1 << 0,		/* --json */
	CLI_ARG_OUTPUT = 1 << 1,	/* -o FILE */
	CLI_ARG_INTERVAL = 1 << 2,	/* -i SECONDS */
	CLI_ARG_URETPROBE = 1 << 3,	/* --uretprobe */
};

struct cli_args {
	bool json;
	const char *outfile;
	struct usc_probe_spec *specs;	/* parsed PROBE...; the caller frees */
	size_t nspecs;
};

/* Parse a tracing subcommand's command line: -p, -d, -e, -q, -v, -h and
 * "-- COMMAND" for every one, plus `extra`; then the PROBEs. Returns -1 when
 * the caller should go on, else the exit code to return (0 after --help, 2
 * for a usage mistake, 1 for a malformed probe, already reported). */
int cli_parse_args(int argc, char **argv, unsigned extra, const char *name, const char *usage,
		   struct cli_run *run, struct cli_args *a);

/* Run a session over specs. Returns the exit code: COMMAND's status in
 * COMMAND mode, 0 on a clean end, 1 on an error (already reported), 127/126
 * when COMMAND cannot run. */
int cli_run_session(const struct cli_run *run, struct usc_probe_spec *specs, size_t nspecs);

#endif
