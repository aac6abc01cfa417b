/* The command line: one file per subcommand (cmd_*.c), the helpers they
 * share in args.c, main.c only dispatches. The CLI parses arguments and
 * chooses sinks; the session (src/session/) runs the trace. */
#ifndef USC_CLI_CLI_H
#define USC_CLI_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/log.h"
#include "probe/probe.h"
#include "session/session.h"
#include "sink/sink.h"

extern bool cli_verbose;

int cmd_trace(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_count(int argc, char **argv);
int cmd_flow(int argc, char **argv);
int cmd_hist(int argc, char **argv);
int cmd_latency(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_objtrace(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_script(int argc, char **argv);

/* One-line error to stderr, "uscope: ..." */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The library's log hook: errors and warnings always, the rest with -v. */
void cli_log(enum usc_log_level level, const char *msg, void *ctx);

/* Parse probe texts; on a mistake print the probe with a caret under it and
 * return -EINVAL. */
int cli_parse_probes(char **texts, int n, struct usc_probe_spec **specs);

/* What a tracing subcommand takes beyond the shared options. */
enum cli_arg_extra {
	CLI_ARG_JSON = 1 << 0,		/* --json */
	CLI_ARG_OUTPUT = 1 << 1,	/* -o FILE */
	CLI_ARG_INTERVAL = 1 << 2,	/* -i SECONDS */
	CLI_ARG_URETPROBE = 1 << 3,	/* --uretprobe */
	CLI_ARG_NO_INLINES = 1 << 4,	/* --no-inlines */
	CLI_ARG_AGG = 1 << 5,		/* --max-keys N, --strlen N */
	CLI_ARG_TOP = 1 << 6,		/* --top N */
	CLI_ARG_LINEAR = 1 << 7,	/* --linear MIN,MAX,STEP */
	CLI_ARG_LATENCY = 1 << 8,	/* --unit ns|us|ms, --per-call */
	CLI_ARG_REPLAY = 1 << 9,	/* -r FILE: a recording instead of a live run */
	CLI_ARG_RECORD = 1 << 10,	/* --snapshot SIZE */
	CLI_ARG_SORT = 1 << 11,		/* --sort KEY */
	CLI_ARG_FORMAT = 1 << 12,	/* --format NAME */
	CLI_ARG_READS = 1 << 13,	/* only reads a recording: -r FILE required,
					 * no PROBE needed */
	CLI_ARG_OBJTRACE = 1 << 14,	/* --from PROBE, --until PROBE, --field OFFS:TYPE,
					 * --max-objects N */
	CLI_ARG_STACK = 1 << 15,	/* --stack-size SIZE ($ustack) */
	CLI_ARG_FOLDED = 1 << 16,	/* --folded */
	CLI_ARG_SERVE = 1 << 17,	/* --serve ADDR:PORT, --label K=V */
	CLI_ARG_PPROF = 1 << 18,	/* --pprof FILE */
	CLI_ARG_WAIT = 1 << 19,		/* --max-wait DURATION, --drop: how long a
					 * lossless producer may wait for room */
	CLI_ARG_ALL = 1 << 20,		/* --all */
	CLI_ARG_LIVE = 1 << 21,		/* a live run: -p, --root, -- COMMAND, -d, -e */
	CLI_ARG_SCRIPT = 1 << 22,	/* uscope script: -x PROGRAM; the words after the
					 * options are FILE and its parameters, not PROBEs */
};

/* An option, declared once (options.c): val, its getopt value (its short
 * letter where it has one; 0 ends a table); need, the CLI_ARG_* bits a
 * command takes it with (0: every one); left, as --help shows it, which is
 * all that names it: "-p, --pid PID" is -p and --pid and takes a value (a
 * word after the name), "    --drop" is --drop alone and takes none (in a
 * command's own: NULL, the shared words); and its help (lines split by
 * '\n'). --help is every command's, in no table. */
struct cli_opt {
	int val;
	unsigned need;
	const char *left;
	const char *help;
};
/* The entry of "-- COMMAND" in --help (no option). */
#define CLI_OPT_COMMAND 1
/* The tracing commands' options, ended by an entry of 0. */
extern const struct cli_opt cli_opts_all[];

/* A command: its name, --help's text before the options (usage,
 * description) and after them (examples); with extra (CLI_ARG_*) it takes
 * the shared options cli_opts_all, own rewording some of them (matched by
 * val; ended by an entry of 0); or a table of options all its own. */
struct cli_cmd {
	const char *name;
	const char *head;
	const char *tail;
	unsigned extra;
	const struct cli_opt *own;
	const struct cli_opt *table;
};

/* --help of cmd, to fp. */
void cli_usage(const struct cli_cmd *cmd, FILE *fp);
#define CLI_MAX_OPTS 64
/* getopt_long's tables of a command: its long options (their names copied
 * out of the left sides) and its short letters. */
struct cli_getopt_tab {
	struct option opts[CLI_MAX_OPTS];
	char names[CLI_MAX_OPTS][24];
	char shorts[64];
};
/* The tables of cmd into t, before the first cli_getopt. */
void cli_getopt_table(const struct cli_cmd *cmd, struct cli_getopt_tab *t);
/* getopt_long over cmd's tables; an unknown option or a missing value is
 * said in one line (cli_usage_error), and '?' returned. */
int cli_getopt(const struct cli_cmd *cmd, int argc, char **argv, const struct cli_getopt_tab *t);
/* A usage mistake in the command being parsed: one line, "uscope: CMD:
 * ... (see uscope CMD --help)". The caller exits 2. */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The command whose options are being read ("uscope" before any). */
const char *cli_cmd_name(void);

/* After a malformed probe: one line toward uscope-probes(7), with the
 * uscope equivalent when text is bpftrace's or perf probe's syntax.
 * Whether it was (hints.c). */
bool cli_probe_hint(const char *text);
/* Is spec, well formed, bpftrace's 'uprobe:PATH:FUNC' read as a MODULE
 * "uprobe"? */
bool cli_probe_foreign(const struct usc_probe_spec *spec);

/* A duration: seconds, or with a ns, us, ms, s or m suffix; at most max_s
 * seconds, 0 only when zero_ok. 0, or -1 when it is none. */
int cli_parse_duration(const char *s, bool zero_ok, double max_s, uint64_t *ns);

/* The options of a tracing subcommand. */
struct cli_opts {
	struct usc_session_opts so;	/* -p, -- COMMAND, -d, -i, -e, --uretprobe... */
	bool quiet;			/* -q: no readiness line, no summary */
	bool json;			/* --json */
	const char *outfile;		/* -o */
	size_t top;			/* --top */
	const char *replay;		/* -r FILE */
	const char *sort;		/* --sort */
	const char *format;		/* --format */
	bool folded;			/* --folded */
	bool all;			/* --all: count's rows of a glob's functions never hit */
	bool say_empty;			/* a run with no hit says "0 hits" */
	const char *obj_from;		/* --from PROBE */
	const char *obj_until;		/* --until PROBE */
	const char *obj_field;		/* --field OFFS:TYPE */
	struct usc_probe_spec *specs;	/* the PROBEs; the caller frees */
	size_t nspecs;
	const char *serve;		/* --serve ADDR:PORT */
	const char *labels[16];		/* --label K=V, nlabels of them */
	size_t nlabels;
	const char *pprof;		/* --pprof FILE */
	const char *program;		/* script -x PROGRAM */
	char **words;			/* CLI_ARG_SCRIPT: the words after the options */
	int nwords;
	/* sinks cli_run_sink adds to its own (and frees): --serve's, --pprof's */
	struct usc_sink *extra[2];
	size_t nextra;
	FILE *pprof_fp;
};

/* Parse a tracing subcommand's command line: the options of cli_opts_all
 * cmd->extra takes (-q, -v, -h for every one), then the PROBEs. Returns -1 when
 * the caller should go on, else the exit code to return (0 after --help, 2
 * for a usage mistake, 1 for a malformed probe, already reported). */
int cli_parse_args(int argc, char **argv, const struct cli_cmd *cmd, struct cli_opts *o);

/* --serve: the served sink of kind (keyed: count's probes have keys) into
 * o->extra, its address bound now, before anything is attached. 0, or the
 * exit code (the reason said). (metrics.c) */
int cli_add_serve(struct cli_opts *o, enum usc_prom_kind kind, bool keyed);
/* --pprof FILE: the pprof sink of o's aggregation into o->extra, FILE
 * opened now. 0, or the exit code (the reason said). (metrics.c) */
int cli_add_pprof(struct cli_opts *o);

/* Free what cli_add_serve and cli_add_pprof made (a run that does not
 * start). */
void cli_drop_extra(struct cli_opts *o);

/* --serve then --pprof (cli_add_serve, cli_add_pprof), what count and
 * latency add. 0, or the exit code: then what they made and o's PROBEs are
 * freed. (metrics.c) */
int cli_add_serve_pprof(struct cli_opts *o, enum usc_prom_kind kind, bool keyed);

/* A return probe for every function entry probe of o's PROBEs that has
 * none, then with fp the output (cli_open_output) in *fp: what flow,
 * latency, record, report, export and flamegraph do first. Returns -1 when
 * the caller should go on, else the exit code (1: out of memory, or the
 * output cannot be opened: reported), o->specs freed. */
int cli_add_returns_and_open(struct cli_opts *o, FILE **fp);

/* The probe with a caret under [pos, pos+len) and why it is refused. */
void cli_probe_error(const struct usc_probe_spec *spec, size_t pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The output FILE: -o FILE, or stdout. NULL (reported) when it cannot be
 * opened. */
FILE *cli_open_output(const struct cli_opts *o);
/* Close it (not stdout); a write error is reported. 0, or 1. */
int cli_close_output(const struct cli_opts *o, FILE *fp);

/* Plan and run a session over o's probes into the sinks, then free it.
 * Returns the exit code: COMMAND's status in COMMAND mode (128+N for a
 * signal N), 0 on a clean end, 1 on an error (already reported), 127/126
 * when COMMAND cannot run. */
int cli_run_session(struct cli_opts *o, struct usc_sink **sinks, size_t nsinks);

/* The same into sink (writing to fp: stdout, or -o's, closed after) and the
 * summary sink on stderr (its end-of-run summary as summary says, its
 * readiness line unless -q); both sinks and o's specs are freed. */
int cli_run_sink(struct cli_opts *o, FILE *fp, struct usc_sink *sink,
		 enum usc_summary_mode summary);

#endif
