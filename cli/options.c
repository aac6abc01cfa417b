/* The options of the tracing commands, each declared once: as --help shows
 * it (its names, its argument), which commands take it (its need, a
 * CLI_ARG_* bit) and its help. The getopt tables and every command's --help
 * are made from it; a
 * command words an option its own way only where it means something else
 * there (struct cli_cmd's own). Also what every parser shares: one line
 * for a usage mistake, and one reading of a duration. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Where an option's help starts. */
#define HELP_COL 25

/* In the order --help lists them. */
const struct cli_opt cli_opts_all[] = {
	{'W', CLI_ARG_OBJTRACE, "    --from PROBE",
	 "a probe with one fetch argument, the object:\n'r:libfoo:foo_new obj=$retval'"},
	{'X', CLI_ARG_OBJTRACE, "    --until PROBE",
	 "a probe with one fetch argument, the object no\nlonger followed: 'libfoo:foo_free $arg1'"},
	{'G', CLI_ARG_OBJTRACE, "    --field OFFS[:TYPE]",
	 "also show the value at OFFS bytes into the object\n(TYPE as in a fetch argument; "
	 "default x64)"},
	{'M', CLI_ARG_OBJTRACE, "    --max-objects N",
	 "objects followed at once (default 1024, at most\n65535); a --from hit beyond is shown "
	 "and reported,\nits object not followed"},
	{'r', CLI_ARG_REPLAY, "-r, --read FILE",
	 "read a recording (uscope record) instead of tracing"},
	{'o', CLI_ARG_OUTPUT, "-o, --output FILE",
	 "write to FILE (made readable by its owner alone)"},
	{'F', CLI_ARG_FORMAT, "    --format NAME", "the output's form"},
	{'Y', CLI_ARG_SORT, "    --sort KEY", "the order of the rows"},
	{'p', CLI_ARG_LIVE, "-p, --pid PID",
	 "in a running process (all its threads), its\nchildren running at attach, and the "
	 "processes\nany of them forks after"},
	{'n', CLI_ARG_LIVE, "    --no-children",
	 "-p: PID alone, none of its children"},
	{'J', CLI_ARG_LIVE, "    --max-procs N",
	 "system-wide on -e inject: patch at most N processes,\nrunning or started later "
	 "(default 256); the others\nare said"},
	{'Q', CLI_ARG_LIVE, "    --root DIR",
	 "system-wide: MODULE paths are files under DIR\n(a container's: --root /proc/PID/root)"},
	{CLI_OPT_COMMAND, CLI_ARG_LIVE, "-- COMMAND",
	 "start COMMAND with the probes in place; exit with\nits status (neither -p nor COMMAND: "
	 "system-wide,\nevery process running the file)"},
	{'d', CLI_ARG_LIVE, "-d, --duration TIME",
	 "stop after TIME: seconds, or 500ms, 10s, 2m"},
	{'i', CLI_ARG_INTERVAL, "-i, --interval TIME",
	 "also print every TIME what that interval saw\n(seconds, or 500ms, 10s, 2m)"},
	{'T', CLI_ARG_TOP, "    --top N", "print the N highest counts only"},
	{'a', CLI_ARG_ALL, "    --all",
	 "a glob's functions never hit too (as rows of 0);\nwithout it, only those hit, as "
	 "funccount"},
	{'L', CLI_ARG_LINEAR, "    --linear MIN,MAX,STEP",
	 "linear buckets of STEP from MIN to MAX (below and\nabove in a bucket each)"},
	{'U', CLI_ARG_LATENCY, "    --unit UNIT", "ns (default), us or ms"},
	{'C', CLI_ARG_LATENCY, "    --per-call",
	 "also print a line per call as it returns"},
	{'j', CLI_ARG_JSON, "    --json", "one JSON object per line"},
	{'y', CLI_ARG_FOLDED, "    --folded",
	 "folded stacks, 'main;parse;malloc 42' a line, at the end:\nflamegraph.pl's input, and "
	 "uscope flamegraph's"},
	{'Z', CLI_ARG_RECORD, "    --snapshot SIZE",
	 "the flight recorder: keep the last SIZE bytes of records a\nthread (K, M suffixes) in "
	 "memory, written at the end, on\nSIGUSR1 and when COMMAND dies by a signal"},
	{'w', CLI_ARG_WAIT, "    --max-wait TIME",
	 "a thread whose buffer is full waits at most TIME\n(100ms by default; us, ms, s, m "
	 "suffixes) for uscope,\nthen drops and counts"},
	{'D', CLI_ARG_WAIT, "    --drop",
	 "a full buffer drops records (counted) at once:\n--max-wait 0"},
	{'k', CLI_ARG_STACK, "    --stack-mode MODE",
	 "$ustack walked where the probe runs (walk, the default)\nor copied at each hit and "
	 "unwound by uscope (copy)"},
	{'z', CLI_ARG_STACK, "    --stack-size SIZE",
	 "bytes of stack a copied $ustack takes (default 8K, at\nmost 32K): deeper stacks end "
	 "with that reason"},
	{'K', CLI_ARG_AGG, "    --max-keys N",
	 "keys each engine's table holds (default 4096); hits of\nnew keys beyond it are counted "
	 "as lost, and said so"},
	{'S', CLI_ARG_AGG, "    --strlen N",
	 "bytes of a string in a key (default 64); longer ones\nare cut, and marked [cut]"},
	{'H', CLI_ARG_SERVE, "    --serve ADDR:PORT",
	 "also serve the results at http://ADDR:PORT/metrics\nfor Prometheus, to the end"},
	{'B', CLI_ARG_SERVE, "    --label NAME=VALUE",
	 "a label every served series has (repeatable)"},
	{'P', CLI_ARG_PPROF, "    --pprof FILE",
	 "also write the stacks ($ustack) as a pprof profile\n(gzipped), for go tool pprof, "
	 "Pyroscope, Parca"},
	{'x', CLI_ARG_SCRIPT, "-x, --program PROGRAM",
	 "the program itself, instead of FILE (bpftrace's -e)"},
	{'e', CLI_ARG_LIVE, "-e, --engine NAME",
	 "auto (default: each probe on the fastest engine that\ncan take it), inject, bpf or "
	 "tracefs"},
	{'q', 0, "-q, --quiet", "no readiness line or summary on stderr"},
	{'R', CLI_ARG_URETPROBE, "    --uretprobe",
	 "return probes swap the return address (the kernel's\nuretprobe) instead of probing "
	 "every ret of the function;\nGo programs and stack walkers do not survive it"},
	{'N', CLI_ARG_NO_INLINES, "    --no-inlines",
	 "probe a function at its out-of-line entry only, not also\nat the copies the compiler "
	 "inlined (debug info)"},
	{'A', CLI_ARG_NO_INLINES, "    --all-sites",
	 "a FILE:LINE probe on every statement of the line, not\nonce per execution (its first "
	 "address in each block)"},
	{'v', 0, "-v, --verbose", "say more on stderr"},
	{0, 0, NULL, NULL},
};

/* The command whose options are being read: named in a usage mistake. */
static const char *cli_cmd_now = "uscope";

const char *cli_cmd_name(void)
{
	return cli_cmd_now;
}

void cli_usage_error(const char *fmt, ...)
		     {
		     va_list ap;

	fprintf(stderr, "uscope: %s: ", cli_cmd_now);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see uscope %s --help)\n", cli_cmd_now);
}

static bool opt_taken(const struct cli_opt *op, unsigned extra)
{
	return !op->need || (extra & op->need) == op->need;
}

/* How cmd words option val, if it has its own words. */
static const struct cli_opt *opt_own(const struct cli_cmd *cmd, int val)
{
	for (const struct cli_opt *op = cmd->own; op && op->val; op++)
		if (op->val == val)
			return op;
	return NULL;
}

/* "  LEFT    help", the help's words wrapped at 80 columns from HELP_COL
 * (a '\n' in it is a space). */
static void print_opt(FILE *fp, const char *left, const char *help)
{
	int col = fprintf(fp, "  %s", left);
	const char *p = help;

	if (col + 1 >= HELP_COL) {	/* a long left side: its help after it */
		fputc(' ', fp);
		col++;
	} else {
		col += fprintf(fp, "%*s", HELP_COL - col, "");
	}
	for (bool first = true; *p; first = false) {
		size_t len = strcspn(p, " \n");

		if (!first && col + 1 + (int)len > 80) {
			col = fprintf(fp, "\n%*s", HELP_COL, "") - 1;
		} else if (!first) {
			fputc(' ', fp);
			col++;
		}
		col += fprintf(fp, "%.*s", (int)len, p);
		p += len;
		p += strspn(p, " \n");
	}
	fputc('\n', fp);
}

void cli_usage(const struct cli_cmd *cmd, FILE *fp)
{
	const struct cli_opt *table = cmd->table ? cmd->table : cli_opts_all;

	fputs(cmd->head, fp);
	for (const struct cli_opt *op = table; op->val; op++) {
		const struct cli_opt *own = cmd->table ? NULL : opt_own(cmd, op->val);

		if (!cmd->table && !opt_taken(op, cmd->extra))
			continue;
		print_opt(fp, own && own->left ? own->left : op->left,
			  own && own->help ? own->help : op->help);
	}
	if (cmd->tail)
		fputs(cmd->tail, fp);
}

/* The long name in an option's left side ("-p, --pid PID": "pid"), its
 * length (0: none, "-- COMMAND"), and whether a value follows it. */
static size_t opt_long_name(const char *left, const char **name, bool *value)
{
	const char *p = strstr(left, "--");
	size_t len;

	if (!p)
		return 0;
	p += 2;
	len = strcspn(p, " ");
	*name = p;
	*value = p[len] == ' ';
	return len;
}

void cli_getopt_table(const struct cli_cmd *cmd, struct cli_getopt_tab *t)
{
	const struct cli_opt *table = cmd->table ? cmd->table : cli_opts_all;
	size_t n = 0, k = 0;

	cli_cmd_now = cmd->name;
	t->shorts[k++] = ':';	/* a missing argument: ':', said by cli_getopt */
	for (const struct cli_opt *op = table; op->val; op++) {
		const char *name;
		bool value;
		size_t len = opt_long_name(op->left, &name, &value);

		if (!len || (!cmd->table && !opt_taken(op, cmd->extra)))
			continue;
		snprintf(t->names[n], sizeof(t->names[n]), "%.*s", (int)len, name);
		t->opts[n] = (struct option){t->names[n], value ? required_argument : no_argument,
					     NULL, op->val};
		n++;
		/* its short name: the letter its help shows ("-p, --pid") */
		if (op->left[0] == '-' && op->left[1] != '-') {
			t->shorts[k++] = op->left[1];
			if (value)
				t->shorts[k++] = ':';
		}
	}
	t->opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	t->shorts[k++] = 'h';
	t->opts[n] = (struct option){NULL, 0, NULL, 0};
	t->shorts[k] = 0;
}

/* How many of opts start with prefix. */
static size_t opts_starting(const struct option *opts, const char *prefix)
{
	size_t n = 0;

	for (; opts->name; opts++)
		n += !strncmp(opts->name, prefix, strlen(prefix));
	return n;
}

int cli_getopt(const struct cli_cmd *cmd, int argc, char **argv, const struct cli_getopt_tab *t)
{
	int prev = optind, c;

	cli_cmd_now = cmd->name;
	opterr = 0;
	c = getopt_long(argc, argv, t->shorts, t->opts, NULL);
	if (c == '?' || c == ':') {
		/* the word getopt stopped at: argv[optind - 1], or the one before
		 * it when a short option's letters ran on ("-xq") */
		const char *word = optind > prev ? argv[optind - 1] : argv[prev];
		const bool is_long = word[0] == '-' && word[1] == '-';
		char shown[64];

		if (is_long)
			snprintf(shown, sizeof(shown), "%.*s", (int)strcspn(word, "="), word);
		else
			snprintf(shown, sizeof(shown), "-%c", optopt ? optopt : '?');
		if (c == ':')
			cli_usage_error("%s needs a value", shown);
		else if (is_long && optopt && strchr(word, '='))
			cli_usage_error("%s takes no value", shown);
		else if (is_long && opts_starting(t->opts, shown + 2) > 1)
			cli_usage_error("'%s' is ambiguous: give the option's whole name", shown);
		else if (!strcmp(shown, "-x") && optind + 1 < argc)
			/* perf probe -x BINARY FUNC */
			cli_usage_error("unknown option '-x': perf probe's -x BINARY FUNC is "
					"BINARY:FUNC here (uscope-probes(7)): uscope %s '%s:%s'",
					cmd->name, argv[optind], argv[optind + 1]);
		else
			cli_usage_error("unknown option '%s'", shown);
		return '?';
	}
	return c;
}

/* ---- durations ----------------------------------------------------------- */

int cli_parse_duration(const char *s, bool zero_ok, double max_s, uint64_t *ns)
{
	static const struct {
		const char *sfx;
		double mult;
	} units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"", 1e9}};
	char *end;
	double v;

	if (!*s || *s == '-' || *s == '+' || strchr(s, ' ') || !strncasecmp(s, "nan", 3) ||
	    !strncasecmp(s, "inf", 3) || strchr(s, 'x') || strchr(s, 'X'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].sfx)) {
			v *= units[i].mult;
			if (!(v >= 0 && v <= max_s * 1e9) || (!zero_ok && v < 1))
				return -1;
			*ns = (uint64_t)v;
			return 0;
		}
	return -1;
}
