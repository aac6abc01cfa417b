/* uscope flamegraph [-i FOLDED | -r RECORDING [PROBE...]] [-o OUT.svg]: a
 * flame graph, one self-contained SVG, from folded stacks (export --format
 * folded, count --folded, perf's stackcollapse, ...) or from a recording
 * (through the svg sink, src/sink/svg.c, as export --format svg). The
 * merging, layout and SVG are the library's (src/flame). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "flame/flame.h"
#include "sink/sink.h"


enum { OPT_TITLE = 256, OPT_WIDTH, OPT_COLORS, OPT_COUNTNAME };

static const struct cli_opt flamegraph_opts[] = {
	{'i', 0, "-i, --input FOLDED",
	 "the folded stacks ('-' or no -i nor -r: standard input)"},
	{'r', 0, "-r, --read FILE", "a recording (uscope record) instead"},
	{'o', 0, "-o, --output OUT",
	 "the SVG written (default: standard output; a file:\nreadable by its owner alone)"},
	{OPT_TITLE, 0, "    --title TEXT",
	 "the graph's title (default: Flame Graph)"},
	{OPT_WIDTH, 0, "    --width PX",
	 "the image's width, 200 to 100000 (default: 1200)"},
	{OPT_COLORS, 0, "    --colors NAME",
	 "the palette: hot (default), mem, io, red, green, blue,\naqua, yellow, purple, orange; a "
	 "function's color is a\nhash of its name, the same in every graph"},
	{OPT_COUNTNAME, 0, "    --countname WORD",
	 "what a count is, in the tooltips (default: samples;\nns with -r)"},
	{'q', 0, "-q, --quiet",
	 "with -r: no readiness line nor summary on stderr"},
	{'v', 0, "-v, --verbose", "say more on stderr"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd flamegraph_cmd = {
	.name = "flamegraph",
	.head =
	"usage: uscope flamegraph [-i FOLDED | -r RECORDING [PROBE...]] [-o OUT.svg] [OPTIONS]\n"
	"\n"
	"  Draw a flame graph, one SVG file that a browser opens with no network\n"
	"  (click a frame to zoom, Search or Ctrl-F to highlight functions), from\n"
	"  folded stacks, 'main;parse;lex COUNT' a line (uscope export --format\n"
	"  folded, flamegraph.pl's stackcollapse scripts), or from a recording\n"
	"  (the call paths' self time, as export --format folded).\n"
	"  PROBEs, with -r, select the recorded probes by location (globs).\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope export -r app.usc --format folded -o app.folded\n"
	"  uscope flamegraph -i app.folded -o app.svg\n"
	"  uscope flamegraph -r app.usc --title 'app: self time' -o app.svg\n"
	"  perf script | stackcollapse-perf.pl | uscope flamegraph > perf.svg\n",
	.table = flamegraph_opts,
};

/* The lines of in into f; 0, or 1 (reported: label:LINE: why). */
static int read_folded(FILE *in, const char *label, struct usc_flame *f)
{
	struct usc_flame_error err = {0};
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	int ret = 0;

	errno = 0;
	while (!ret && (got = getline(&line, &cap, in)) > 0) {
		size_t len = (size_t)got;

		if (line[len - 1] == '\n')
			len--;
		ret = usc_flame_add_line(f, line, len, &err);
		if (ret == -EINVAL && err.line == 1 && len >= 8 && !memcmp(line, "USCOPE\x1aR", 8))
			cli_error("%s is a recording, not folded stacks: read it with -r", label);
		else if (ret == -EINVAL)
			cli_error("%s:%zu: %s", label, err.line, err.msg);
		else if (ret)
			cli_error("%s:%zu: %s", label, err.line, strerror(-ret));
	}
	if (!ret && ferror(in)) {
		cli_error("cannot read %s: %s", label, strerror(errno ? errno : EIO));
		ret = -EIO;
	}
	free(line);
	return ret ? 1 : 0;
}

static int from_folded(const char *input, const char *outfile, const struct usc_flame_opts *fo)
{
	const bool std_in = !input || !strcmp(input, "-");
	const char *label = std_in ? "stdin" : input;
	struct cli_opts o = {.outfile = outfile};
	struct usc_flame *f = NULL;
	FILE *in = std_in ? stdin : fopen(input, "r"), *out;
	int code = 1, ret;

	if (!in) {
		cli_error("cannot read %s: %s", input, strerror(errno));
		return 1;
	}
	if (usc_flame_new(&f)) {
		cli_error("out of memory");
		goto done;
	}
	if (read_folded(in, label, f))
		goto done;
	if (!usc_flame_total(f)) {
		cli_error("%s holds no samples (no line with a count above 0): no flame graph to draw",
			  label);
		goto done;
	}
	/* the output is made once the input is known good */
	if (!(out = cli_open_output(&o)))
		goto done;
	ret = usc_flame_write_svg(f, fo, out);
	if (ret == -ENOMEM)
		cli_error("out of memory");
	else if (ret && ret != -EPIPE)
		cli_error("cannot write %s: %s", outfile ? outfile : "the flame graph",
			  strerror(-ret));
	code = cli_close_output(&o, out) || ret ? 1 : 0;
	if (code && outfile)
		unlink(outfile);
done:
	usc_flame_free(f);
	if (in != stdin)
		fclose(in);
	return code;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct cli_getopt_tab t;
	struct usc_flame_opts fo = {0};
	struct cli_opts o = {0};
	const char *input = NULL;
	struct usc_sink *sink;
	FILE *fp;
	int c;

	cli_getopt_table(&flamegraph_cmd, &t);
	optind = 1;
	while ((c = cli_getopt(&flamegraph_cmd, argc, argv, &t)) != -1) {
		switch (c) {
		case 'i':
			input = optarg;
			break;
		case 'r':
			o.replay = optarg;
			break;
		case 'o':
			o.outfile = optarg;
			break;
		case OPT_TITLE:
			fo.title = optarg;
			break;
		case OPT_WIDTH: {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (*end || errno || end == optarg || v < USC_FLAME_WIDTH_MIN ||
			    v > USC_FLAME_WIDTH_MAX) {
				cli_usage_error("--width wants a number of pixels from %d to %d, not '%s'",
						USC_FLAME_WIDTH_MIN, USC_FLAME_WIDTH_MAX, optarg);
				return 2;
			}
			fo.width = (unsigned)v;
			break;
		}
		case OPT_COLORS: {
			int p = usc_flame_palette_parse(optarg);

			if (p < 0) {
				cli_usage_error("--colors wants one of %s, not '%s'", usc_flame_palette_list,
						optarg);
				return 2;
			}
			fo.palette = (enum usc_flame_palette)p;
			break;
		}
		case OPT_COUNTNAME:
			fo.countname = optarg;
			break;
		case 'q':
			o.quiet = true;
			break;
		case 'v':
			cli_verbose = true;
			break;
		case 'h':
			cli_usage(&flamegraph_cmd, stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (input && o.replay) {
		cli_usage_error("give either -i FOLDED or -r RECORDING, not both");
		return 2;
	}
	if (!o.replay) {
		if (optind < argc) {
			cli_usage_error("PROBEs select the probes of a recording: '%s' needs -r FILE",
					argv[optind]);
			return 2;
		}
		if (!input && isatty(STDIN_FILENO)) {
			cli_usage_error("flamegraph reads folded stacks: give -i FILE or -r RECORDING, "
					"or pipe them in");
			return 2;
		}
		return from_folded(input, o.outfile, &fo);
	}
	/* a recording: through the folded sink, as export --format svg */
	o.nspecs = (size_t)(argc - optind);
	if (cli_parse_probes(argv + optind, argc - optind, &o.specs))
		return 1;
	c = cli_add_returns_and_open(&o, &fp);
	if (c >= 0)
		return c;
	sink = usc_sink_svg(fp, &fo);
	return cli_run_sink(&o, fp, sink, USC_SUMMARY_BRIEF);
}
