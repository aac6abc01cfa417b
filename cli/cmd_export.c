/* uscope export -r FILE --format chrome|ctf|folded|svg|pprof -o OUT: a
 * recording in a form other tools open. Each format is a sink
 * (src/sink/chrome.c, ctf.c, folded.c, svg.c, pprof.c) fed by the
 * recording, as live sinks are by engines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const struct cli_opt export_own[] = {
	{'r', 0, NULL,
	 "the recording"},
	{'F', 0, NULL,
	 "chrome, ctf, folded, svg or pprof"},
	{'o', 0, "-o, --output OUT",
	 "the file written (a directory for ctf), readable\nby its owner alone"},
	{'v', 0, NULL,
	 "say more on stderr; the summary lists every probe"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd export_cmd = {
	.name = "export",
	.head =
	"usage: uscope export -r FILE --format chrome|ctf|folded|svg|pprof -o OUT [PROBE...]\n"
	"\n"
	"  Write a recording (uscope record) in a form other tools open:\n"
	"    chrome  Chrome trace-event JSON, for the Perfetto UI (ui.perfetto.dev)\n"
	"            and chrome://tracing: a slice per call, instants for other probes\n"
	"    ctf     a CTF 1.8 trace directory, for babeltrace2 and Trace Compass:\n"
	"            an event class per probe, its arguments as typed fields\n"
	"    folded  folded call paths, 'main;parse;lex NANOSECONDS' (self time), for\n"
	"            flamegraph.pl, inferno and speedscope\n"
	"    svg     a flame graph of the same (self time in ns), one SVG file a\n"
	"            browser opens (uscope flamegraph -r has its options)\n"
	"    pprof   the recorded stacks ($ustack) as a gzipped pprof profile, for go\n"
	"            tool pprof, Pyroscope and Parca: calls per stack, and the time to\n"
	"            the return where the probe is a function's entry and its return\n"
	"            was recorded too\n"
	"  PROBEs, if given, select the recorded probes by location (globs).\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope export -r app.usc --format chrome -o app.json\n"
	"  uscope export -r app.usc --format ctf -o app-ctf && babeltrace2 app-ctf\n"
	"  uscope export -r app.usc --format folded -o app.folded && flamegraph.pl app.folded\n"
	"  uscope export -r app.usc --format svg -o app.svg\n"
	"  uscope export -r app.usc --format pprof -o app.pb.gz && go tool pprof -top app.pb.gz\n",
	.extra = CLI_ARG_REPLAY | CLI_ARG_OUTPUT | CLI_ARG_FORMAT | CLI_ARG_READS,
	.own = export_own,
};

int cmd_export(int argc, char **argv)
{
	struct cli_opts o = {0};
	struct usc_sink *sink;
	FILE *fp = NULL;
	int code = cli_parse_args(argc, argv, &export_cmd, &o);

	if (code >= 0)
		return code;
	code = 2;
	if (!o.format)
		cli_usage_error("give --format chrome, ctf, folded, svg or pprof");
	else if (strcmp(o.format, "chrome") && strcmp(o.format, "ctf") &&
		 strcmp(o.format, "folded") && strcmp(o.format, "svg") && strcmp(o.format, "pprof"))
		cli_usage_error("--format wants chrome, ctf, folded, svg or pprof, not '%s'", o.format);
	else if (!o.outfile)
		cli_usage_error("give -o OUT: where the %s trace goes", o.format);
	else
		code = -1;
	if (code >= 0) {
		free(o.specs);
		return code;
	}
	/* PROBEs select functions: their returns too, to pair them; ctf
	 * writes a directory the sink makes: nothing to open, nor for
	 * cli_run_sink to close */
	code = cli_add_returns_and_open(&o, strcmp(o.format, "ctf") ? &fp : NULL);
	if (code >= 0)
		return code;
	if (!strcmp(o.format, "ctf")) {
		sink = usc_sink_ctf(o.outfile);
		o.outfile = NULL;
	} else {
		sink = !strcmp(o.format, "chrome") ? usc_sink_chrome(fp) :
		       !strcmp(o.format, "svg") ? usc_sink_svg(fp, NULL) :
		       !strcmp(o.format, "pprof") ? usc_sink_pprof_export(fp) : usc_sink_folded(fp);
	}
	return cli_run_sink(&o, fp, sink, USC_SUMMARY_BRIEF);
}
