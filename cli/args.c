/* What the subcommands share: errors, probe parsing with a caret, the
 * options of every tracing command, and running a session to an exit code. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/log.h"
#include "core/outfile.h"
#include "sink/sink.h"

bool cli_verbose;
static unsigned errors_said;	/* the library's errors, said as they came */

void cli_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	switch (level) {
	case USC_LOG_ERROR:
		errors_said++;
		fprintf(stderr, "uscope: %s\n", msg);
		break;
	case USC_LOG_WARN:
		fprintf(stderr, "uscope: warning: %s\n", msg);
		break;
	default:
		if (cli_verbose)
			fprintf(stderr, "uscope: %s\n", msg);
		break;
	}
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("uscope: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_parse_probes(char **texts, int n, struct usc_probe_spec **out)
{
	struct usc_probe_spec *specs;

	*out = NULL;
	if (n <= 0)
		return 0;	/* -r FILE alone */
	specs = calloc((size_t)n, sizeof(*specs));
	if (!specs) {
		cli_error("out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct usc_parse_error err;

		if (usc_probe_parse(texts[i], &specs[i], &err)) {
			size_t pos = err.pos;

			fprintf(stderr, "uscope: bad probe: %s\n  %s\n  %*s^\n",
				usc_parse_strerror(err.code), texts[i], (int)pos, "");
			cli_probe_hint(texts[i]);
			free(specs);
			return -1;
		}
		if (cli_probe_foreign(&specs[i])) {
			cli_probe_error(&specs[i], 0, "bad probe: '%s:' is a bpftrace probe type, not "
					"a MODULE", specs[i].module);
			cli_probe_hint(texts[i]);
			free(specs);
			return -1;
		}
	}
	*out = specs;
	return 0;
}

/* A size: bytes, or with a K, M or G suffix. 0, or -1 when it is none. */
static int parse_size(const char *s, unsigned long long *out)
{
	unsigned long long v;
	char sfx = 0;
	int got = sscanf(s, "%llu%c", &v, &sfx);

	if (got < 1 || !v || (got == 2 && !strchr("kKmMgG", sfx)) || strlen(s) > 20 ||
	    (got == 2 && s[strlen(s) - 1] != sfx))
		return -1;
	*out = v << (sfx == 'k' || sfx == 'K' ? 10 : sfx == 'm' || sfx == 'M' ? 20 :
		     sfx == 'g' || sfx == 'G' ? 30 : 0);
	return 0;
}

/* What an option handler says: taken, a mistake (reported), not its own. */
enum { ARG_OK = 0, ARG_BAD = 2, ARG_NOT_MINE = -1 };

/* -p, -d, -i, -e, -q, -v, --json, -o, --uretprobe, --no-inlines, --all-sites. */
static int args_shared(int c, struct cli_opts *o)
{
	char *end;

	switch (c) {
	case 'p': {
		pid_t was = o->so.pid;

		errno = 0;
		o->so.pid = (pid_t)strtol(optarg, &end, 10);
		if (*end || o->so.pid <= 0 || errno) {
			cli_usage_error("-p wants a process id, not '%s'", optarg);
			return ARG_BAD;
		}
		/* a session follows one process (and its threads): a second -p
		 * would silently replace the first */
		if (was && was != o->so.pid) {
			cli_usage_error("-p %d -p %d: a session traces one process; run one uscope for "
					"each", (int)was, (int)o->so.pid);
			return ARG_BAD;
		}
		return ARG_OK;
	}
	case 'd':
	case 'i': {
		uint64_t ns;

		/* up to a year: a longer one is a typo */
		if (cli_parse_duration(optarg, false, 366 * 86400.0, &ns)) {
			cli_usage_error("-%c wants a time above 0: seconds, or with a ms, s or m "
					"suffix (1.5, 500ms, 10s, 2m), not '%s'", c, optarg);
			return ARG_BAD;
		}
		*(c == 'd' ? &o->so.duration : &o->so.interval) = (double)ns / 1e9;
		return ARG_OK;
	}
	case 'e':
		o->so.engine = optarg;
		return ARG_OK;
	case 'Q':
		o->so.root = optarg;	/* checked with the target (resolve_target) */
		return ARG_OK;
	case 'q':
		o->quiet = true;
		return ARG_OK;
	case 'v':
		cli_verbose = true;
		return ARG_OK;
	case 'j':
		o->json = true;
		return ARG_OK;
	case 'o':
		o->outfile = optarg;
		return ARG_OK;
	case 'R':
		o->so.resolve_flags |= RESOLVE_URETPROBE;
		return ARG_OK;
	case 'N':
		o->so.resolve_flags |= RESOLVE_NO_INLINES;
		return ARG_OK;
	case 'A':
		o->so.resolve_flags |= RESOLVE_ALL_LINE_SITES;
		return ARG_OK;
	case 'n':
		o->so.no_children = true;
		return ARG_OK;
	case 'x':
		o->program = optarg;
		return ARG_OK;
	case 'J': {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(optarg, &end, 10);
		if (*end || errno || !v || v > 65536 || optarg[0] == '-') {
			cli_usage_error("--max-procs wants a number of processes from 1 to 65536, "
					"not '%s'", optarg);
			return ARG_BAD;
		}
		o->so.max_procs = (uint32_t)v;
		return ARG_OK;
	}
	}
	return ARG_NOT_MINE;
}

/* --max-keys N, --strlen N, --top N. */
static int args_count(int c, struct cli_opts *o)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(optarg, &end, 10);
	if (*end || errno || !v || optarg[0] == '-' ||
	    (c == 'S' && (v < 8 || v > AGG_KEY_MAX - 8)) ||
	    (c == 'K' && v > (1UL << 24))) {
		cli_usage_error("--%s wants %s, not '%s'",
				c == 'K' ? "max-keys" : c == 'S' ? "strlen" : "top",
				c == 'S' ? "a length of 8 to 248 bytes" :
				c == 'K' ? "a number of keys from 1 to 16777216" :
				"a positive number", optarg);
		return ARG_BAD;
	}
	if (c == 'K')
		o->so.agg.max_rows = (uint32_t)v;
	else if (c == 'S')
		o->so.agg.str_max = (uint32_t)v;
	else
		o->top = v;
	return ARG_OK;
}

/* --linear MIN,MAX,STEP. */
static int args_linear(struct cli_opts *o)
{
	long long mn, mx, st;
	int used = 0;

	if (sscanf(optarg, "%lld,%lld,%lld%n", &mn, &mx, &st, &used) != 3 ||
	    optarg[used] || st <= 0 || mx <= mn ||
	    (mx - mn) / st + 2 > AGG_LINEAR_MAX) {
		cli_usage_error("--linear wants MIN,MAX,STEP with MIN < MAX, STEP > 0 and at "
				"most %d steps, not '%s'", AGG_LINEAR_MAX - 2, optarg);
		return ARG_BAD;
	}
	o->so.agg.linear = true;
	o->so.agg.lmin = mn;
	o->so.agg.lmax = mx;
	o->so.agg.lstep = st;
	return ARG_OK;
}

/* The aggregations': --max-keys, --strlen, --top, --linear, --unit,
 * --per-call, --all. */
static int args_agg(int c, struct cli_opts *o)
{
	switch (c) {
	case 'K':
	case 'S':
	case 'T':
		return args_count(c, o);
	case 'L':
		return args_linear(o);
	case 'U':
		if (!strcmp(optarg, "ns") || !strcmp(optarg, "us") || !strcmp(optarg, "ms")) {
			o->so.agg.unit_ns = optarg[0] == 'n' ? 1 : optarg[0] == 'u' ? 1000 :
					    1000000;
			return ARG_OK;
		}
		cli_usage_error("--unit wants ns, us or ms, not '%s'", optarg);
		return ARG_BAD;
	case 'C':
		o->so.agg.per_call = true;
		return ARG_OK;
	case 'a':
		o->all = true;
		return ARG_OK;
	}
	return ARG_NOT_MINE;
}

/* Recordings' and outputs': -r, --snapshot, --stack-size, --stack-mode, --folded, --drop,
 * --max-wait, --sort, --format. */
static int args_record(int c, struct cli_opts *o)
{
	unsigned long long v;

	switch (c) {
	case 'r':
		o->replay = optarg;
		return ARG_OK;
	case 'Z':
		if (parse_size(optarg, &v)) {
			cli_usage_error("--snapshot wants a size (4096, 64K, 1M), not '%s'", optarg);
			return ARG_BAD;
		}
		o->so.record.snapshot = v;
		return ARG_OK;
	case 'z':
		if (parse_size(optarg, &v) || v < 64 || v > USC_STACK_BYTES_MAX) {
			cli_usage_error("--stack-size wants a size from 64 to %uK (8K, 16K), not '%s'",
					USC_STACK_BYTES_MAX >> 10, optarg);
			return ARG_BAD;
		}
		o->so.stack_bytes = (uint32_t)v;
		return ARG_OK;
	case 'k':
		if (strcmp(optarg, "walk") && strcmp(optarg, "copy")) {
			cli_usage_error("--stack-mode wants walk or copy, not '%s'", optarg);
			return ARG_BAD;
		}
		o->so.stack_copy = !strcmp(optarg, "copy");
		return ARG_OK;
	case 'y':
		o->folded = true;
		return ARG_OK;
	case 'D':
		o->so.max_wait_ns = USC_MAX_WAIT_NEVER;
		return ARG_OK;
	case 'w': {
		uint64_t ns;

		if (cli_parse_duration(optarg, true, 3600, &ns)) {
			cli_usage_error("--max-wait wants a time up to an hour: seconds, or with a "
					"us, ms, s or m suffix (100ms, 2s, 0), not '%s'", optarg);
			return ARG_BAD;
		}
		if (o->so.max_wait_ns != USC_MAX_WAIT_NEVER)	/* --drop wins */
			o->so.max_wait_ns = ns ? ns : USC_MAX_WAIT_NEVER;
		return ARG_OK;
	}
	case 'Y':
		o->sort = optarg;
		return ARG_OK;
	case 'F':
		o->format = optarg;
		return ARG_OK;
	}
	return ARG_NOT_MINE;
}

/* objtrace's: --from, --until, --field, --max-objects. */
static int args_objtrace(int c, struct cli_opts *o)
{
	unsigned long v;
	char *end;

	switch (c) {
	case 'W':
	case 'X':
	case 'G':
		if (*(c == 'W' ? &o->obj_from : c == 'X' ? &o->obj_until : &o->obj_field)) {
			cli_usage_error("--%s is given once", c == 'W' ? "from" : c == 'X' ? "until" :
					"field");
			return ARG_BAD;
		}
		*(c == 'W' ? &o->obj_from : c == 'X' ? &o->obj_until : &o->obj_field) = optarg;
		return ARG_OK;
	case 'M':
		errno = 0;
		v = strtoul(optarg, &end, 10);
		if (*end || errno || !v || optarg[0] == '-' || v > USC_OBJ_MAX) {
			cli_usage_error("--max-objects wants a number of objects from 1 to %d, not '%s'",
					USC_OBJ_MAX, optarg);
			return ARG_BAD;
		}
		o->so.objtrace.max_objects = (uint32_t)v;
		return ARG_OK;
	}
	return ARG_NOT_MINE;
}

/* --serve ADDR:PORT, --label NAME=VALUE, --pprof FILE. */
static int args_metrics(int c, struct cli_opts *o)
{
	switch (c) {
	case 'H':
	case 'P':
		if (*(c == 'H' ? &o->serve : &o->pprof)) {
			cli_usage_error("--%s is given once", c == 'H' ? "serve" : "pprof");
			return ARG_BAD;
		}
		*(c == 'H' ? &o->serve : &o->pprof) = optarg;
		return ARG_OK;
	case 'B':
		if (o->nlabels == sizeof(o->labels) / sizeof(o->labels[0])) {
			cli_usage_error("--label is given %zu times at most", o->nlabels);
			return ARG_BAD;
		}
		o->labels[o->nlabels++] = optarg;
		return ARG_OK;
	}
	return ARG_NOT_MINE;
}

/* One option getopt returned (optarg its argument). */
static int args_option(int c, struct cli_opts *o)
{
	int ret = args_shared(c, o);

	if (ret == ARG_NOT_MINE)
		ret = args_agg(c, o);
	if (ret == ARG_NOT_MINE)
		ret = args_record(c, o);
	if (ret == ARG_NOT_MINE)
		ret = args_objtrace(c, o);
	if (ret == ARG_NOT_MINE)
		ret = args_metrics(c, o);
	return ret;
}

/* What the options say together; then the PROBEs, argv[optind..argc). */
static int args_check(int argc, char **argv, const struct cli_cmd *cmd, struct cli_opts *o)
{
	if (o->replay && (o->so.cmd || o->so.pid || o->so.engine)) {
		cli_usage_error("-r FILE reads a recording: no -p, -e nor COMMAND with it");
		return 2;
	}
	if (o->nlabels && !o->serve) {
		cli_usage_error("--label names a label of --serve's metrics: give --serve ADDR:PORT");
		return 2;
	}
	if (o->replay && o->serve) {
		cli_usage_error("--serve serves a live run: no -r FILE with it");
		return 2;
	}
	if (o->replay && o->so.root) {
		cli_usage_error("-r FILE reads a recording: no --root with it");
		return 2;
	}
	if ((cmd->extra & CLI_ARG_READS) && !o->replay) {
		cli_usage_error("it reads a recording: give -r FILE (made by uscope record)");
		return 2;
	}
	if (o->so.cmd && !(cmd->extra & CLI_ARG_LIVE)) {
		cli_usage_error("it reads a recording: no COMMAND");
		return 2;
	}
	/* a live command's empty result is said (cli_run_sink) */
	o->say_empty = cmd->extra & CLI_ARG_LIVE;
	if (cmd->extra & CLI_ARG_SCRIPT) {
		o->say_empty = false;
		o->words = argv + optind;
		o->nwords = argc - optind;
	} else if (optind >= argc && !o->replay) {
		cli_usage_error("give at least one PROBE");
		return 2;
	}
	if (o->so.cmd && o->so.pid) {
		cli_usage_error("give either -p PID or a COMMAND, not both");
		return 2;
	}
	if (o->so.max_procs && (o->so.pid || o->so.cmd)) {
		cli_usage_error("--max-procs is for system-wide tracing (neither -p nor COMMAND)");
		return 2;
	}
	if (o->so.no_children && !o->so.pid) {
		cli_usage_error("--no-children is for -p PID (COMMAND's children are always traced)");
		return 2;
	}
	if (cmd->extra & CLI_ARG_SCRIPT)
		return -1;
	o->nspecs = (size_t)(argc - optind);
	if (cli_parse_probes(argv + optind, argc - optind, &o->specs))
		return 1;
	return -1;
}

int cli_parse_args(int argc, char **argv, const struct cli_cmd *cmd, struct cli_opts *o)
{
	struct cli_getopt_tab t;
	int c;

	cli_getopt_table(cmd, &t);
	/* COMMAND follows the first "--"; everything before it is ours */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			o->so.cmd = argv + i + 1;
			if (!o->so.cmd[0]) {
				cli_usage_error("nothing after '--': give a COMMAND to run");
				return 2;
			}
			argc = i;
			break;
		}
	}
	optind = 1;
	while ((c = cli_getopt(cmd, argc, argv, &t)) != -1) {
		int ret;

		if (c == 'h') {
			cli_usage(cmd, stdout);
			return 0;
		}
		if (c == '?')
			return 2;
		ret = args_option(c, o);
		if (ret == ARG_BAD)
			return 2;
		if (ret == ARG_NOT_MINE) {
			cli_usage_error("unknown option '%s'", argv[optind - 1]);
			return 2;
		}
	}
	return args_check(argc, argv, cmd, o);
}

void cli_probe_error(const struct usc_probe_spec *spec, size_t pos, const char *fmt, ...)
{
	va_list ap;

	fputs("uscope: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  %s\n  %*s^\n", spec->text, (int)pos, "");
}

/* A return probe for every function entry probe that has none (flow,
 * latency). 0 or -ENOMEM. */
static int cli_add_returns(struct usc_probe_spec **specs, size_t *nspecs)
{
	size_t n = *nspecs, extra = 0;
	struct usc_probe_spec *v = *specs;

	for (size_t i = 0; i < n; i++) {
		const struct usc_probe_spec *sp = &v[i];
		bool have = false;

		if ((sp->loc_kind != USC_LOC_SYMBOL && sp->loc_kind != USC_LOC_PYTHON) ||
		    sp->is_return || sp->has_offset)
			continue;
		for (size_t k = 0; k < n + extra && !have; k++)
			have = v[k].loc_kind == sp->loc_kind && v[k].is_return &&
			       !v[k].has_offset && !strcmp(v[k].module, sp->module) &&
			       !strcmp(v[k].symbol, sp->symbol);
		if (have)
			continue;

		struct usc_probe_spec *nv = realloc(v, (n + extra + 1) * sizeof(*nv));

		if (!nv) {
			*specs = v;
			*nspecs = n + extra;
			return -ENOMEM;
		}
		v = nv;
		sp = &v[i];
		struct usc_probe_spec *r = &v[n + extra++];

		memcpy(r, sp, sizeof(*r));
		r->is_return = true;
		r->nargs = 0;
		memset(&r->filter, 0, sizeof(r->filter));	/* the entry's filter is the call's */
		if (r->event_given) {
			/* an explicit EVENT is used as it is: give the return its own */
			char ev[USC_NAME_MAX];
			const size_t room = USC_NAME_MAX - 1 - strlen("__return");

			snprintf(ev, sizeof(ev), "%.*s__return", (int)room, sp->event);
			memcpy(r->event, ev, sizeof(ev));
		}
	}
	*specs = v;
	*nspecs = n + extra;
	return 0;
}

int cli_add_returns_and_open(struct cli_opts *o, FILE **fp)
{
	/* calls pair: a Go function's by its goroutine */
	o->so.resolve_flags |= RESOLVE_GO_PAIRS;
	if (cli_add_returns(&o->specs, &o->nspecs)) {
		cli_error("out of memory");
		free(o->specs);
		o->specs = NULL;
		return 1;
	}
	if (fp) {
		*fp = cli_open_output(o);
		if (!*fp) {
			free(o->specs);
			o->specs = NULL;
			return 1;
		}
	}
	return -1;
}

FILE *cli_open_output(const struct cli_opts *o)
{
	FILE *fp;

	if (!o->outfile)
		return stdout;
	fp = usc_outfile_fopen(o->outfile);
	if (!fp)
		cli_error("cannot write %s: %s", o->outfile, usc_outfile_strerror(errno));
	return fp;
}

int cli_close_output(const struct cli_opts *o, FILE *fp)
{
	if (!fp || fp == stdout)
		return 0;
	if (fclose(fp)) {
		cli_error("cannot write %s: %s", o->outfile, strerror(errno));
		return 1;
	}
	return 0;
}

/* cli_run_session, and in *res how the run went: *ran when it ran to its
 * end. */
static int run_session(struct cli_opts *o, struct usc_sink **sinks, size_t nsinks,
		       struct usc_run_result *res, bool *ran)
{
	struct usc_session *s = NULL;
	int code = 1, ret;

	for (size_t k = 0; k < nsinks; k++)
		if (!sinks[k]) {
			cli_error("out of memory");
			return 1;
		}
	/* the janitor of a uscope that dies runs this executable again
	 * (main.c, USC_JANITOR_ARG) */
	o->so.janitor_exe = "/proc/self/exe";
	ret = usc_session_new(&o->so, &s);
	for (size_t k = 0; k < nsinks && !ret; k++)
		ret = usc_session_add_sink(s, sinks[k]);
	if (ret) {
		cli_error("out of memory");
		goto out;
	}
	ret = o->replay ? usc_session_replay(s, o->replay, o->specs, o->nspecs) :
			  usc_session_plan(s, o->specs, o->nspecs);
	if (ret) {
		if (usc_session_target_missing(s))
			code = 127;
		goto out;
	}
	ret = usc_session_run(s, res);
	*ran = !ret && !res->exec_errno;
	if (res->exec_errno)
		code = res->exec_errno == ENOENT ? 127 : 126;
	else if (res->signal)
		code = 128 + res->signal;	/* passed on to COMMAND, left running */
	else if (ret)
		code = 1;
	else if (res->target_exited && WIFEXITED(res->status))
		code = WEXITSTATUS(res->status);
	else if (res->target_exited && WIFSIGNALED(res->status))
		code = 128 + WTERMSIG(res->status);
	else
		code = 0;
out:
	usc_session_free(s);
	return code;
}

int cli_run_session(struct cli_opts *o, struct usc_sink **sinks, size_t nsinks)
{
	struct usc_run_result res = {0};
	bool ran = false;

	return run_session(o, sinks, nsinks, &res, &ran);
}

/* Has process pid ended (gone, or a zombie its parent has not reaped)? */
static bool process_ended(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return errno == ENOENT || errno == ESRCH;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && (p[2] == 'Z' || p[2] == 'X');
}

/* A run that saw no hit says so, and why where it is known. "Not called"
 * is not said after an error the library said (a probe it could not arm
 * says why itself). */
static void say_no_hits(const struct cli_opts *o, const struct usc_run_result *res)
{
	if (o->replay)
		cli_error("0 hits: the recording holds none of these probes' hits");
	else if (res->target_exited && o->so.cmd && !errors_said)
		cli_error("0 hits: %s ran to its end without calling what was probed",
			  o->so.cmd[0]);
	else if (o->so.pid && (res->target_exited || process_ended(o->so.pid)))
		cli_error("0 hits: process %d ended before any hit", (int)o->so.pid);
	else if (errors_said)
		return;
	else if (res->signal || !o->so.duration)
		cli_error("0 hits: what was probed was not called while traced");
	else
		cli_error("0 hits: what was probed was not called in the %g s traced",
			  o->so.duration);
}

int cli_run_sink(struct cli_opts *o, FILE *fp, struct usc_sink *sink,
		 enum usc_summary_mode summary)
{
	struct usc_sink *sum = usc_sink_summary(stderr, summary, cli_verbose);
	struct usc_sink *sinks[4] = {sink};
	struct usc_run_result res = {0};
	bool ran = false;
	size_t n = 1;
	int code;
	struct stat sb;

	for (size_t k = 0; k < o->nextra; k++)
		sinks[n++] = o->extra[k];
	if (!o->quiet)
		sinks[n++] = sum;	/* "tracing N probes" once the others began */
	code = run_session(o, sinks, n, &res, &ran);
	if (ran && !o->quiet && o->say_empty && !usc_sink_summary_hits(sum))
		say_no_hits(o, &res);
	for (size_t k = 0; k < o->nextra; k++)
		usc_sink_free(o->extra[k]);
	o->nextra = 0;
	if (o->pprof_fp && fclose(o->pprof_fp) && !code) {
		cli_error("cannot write %s: %s", o->pprof, strerror(errno));
		code = 1;
	}
	/* nor an empty profile */
	if (o->pprof_fp && code == 1 && !stat(o->pprof, &sb) && S_ISREG(sb.st_mode) && !sb.st_size)
		unlink(o->pprof);
	o->pprof_fp = NULL;

	if (cli_close_output(o, fp) && !code)
		code = 1;
	/* a run that failed before writing anything leaves no empty -o file */
	if (code == 1 && fp && fp != stdout && !stat(o->outfile, &sb) && S_ISREG(sb.st_mode) &&
	    !sb.st_size)
		unlink(o->outfile);
	usc_sink_free(sinks[0]);
	usc_sink_free(sum);
	free(o->specs);
	o->specs = NULL;
	return code;
}
