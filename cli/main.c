/* uscope: the command line. One file per subcommand (cmd_*.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/log.h"

bool cli_verbose;

static void cli_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	switch (level) {
	case USC_LOG_ERROR:
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
	struct usc_probe_spec *specs = calloc((size_t)n, sizeof(*specs));

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
			free(specs);
			return -1;
		}
	}
	*out = specs;
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: uscope [--version] [--help] COMMAND [ARGS]\n"
	      "\n"
	      "Trace user-space programs without recompiling or restarting them.\n"
	      "\n"
	      "commands:\n"
	      "  trace   put probes on functions and print their events\n"
	      "  flow    show calls as a per-thread tree with durations\n"
	      "  count   count the hits of each probe\n"
	      "  list    list the functions that can be probed\n"
	      "\n"
	      "'uscope COMMAND --help' describes a command.\n", f);
}

int main(int argc, char **argv)
{
	usc_set_log(cli_log, NULL);
	if (getenv("USCOPE_VERBOSE"))
		cli_verbose = true;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("uscope %s\n", USC_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "trace"))
		return cmd_trace(argc - 1, argv + 1);
	if (!strcmp(argv[1], "count"))
		return cmd_count(argc - 1, argv + 1);
	if (!strcmp(argv[1], "flow"))
		return cmd_flow(argc - 1, argv + 1);
	if (!strcmp(argv[1], "list"))
		return cmd_list(argc - 1, argv + 1);
	cli_error("unknown command '%s' (commands: trace, flow, count, list; see uscope --help)", argv[1]);
	return 2;
}
