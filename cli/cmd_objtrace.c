/* uscope objtrace: follow objects through the calls that receive them, as
 * the kernel's objtrace trigger does. --from's probe adds its one fetch
 * argument (the object's address, typically a constructor's $retval) to the
 * followed set, --until's removes it; every other PROBE (a glob, usually)
 * is recorded only for a call that passes a followed object in an argument
 * register, where the probe runs when the engine can (the inject agent, the
 * bpf program; tracefs: the session). The objtrace sink prints them
 * (src/sink/objtrace.c). The probes are made by the library
 * (src/objtrace/objtrace.h, which says where every part of objtrace is). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "objtrace/objtrace.h"
#include "sink/sink.h"

static const struct cli_opt objtrace_own[] = {
	{'j', 0, NULL,
	 "one JSON object per line"},
	{'o', 0, NULL,
	 "write the events to FILE"},
	{'H', 0, NULL,
	 "also serve each probe's events (uscope_probe_hits_total)\nat http://ADDR:PORT/metrics for Prometheus, to the end"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd objtrace_cmd = {
	.name = "objtrace",
	.head =
	"usage: uscope objtrace [-p PID] [-d TIME] [--json] [-o FILE] [-e ENGINE]\n"
	"                       --from PROBE [--until PROBE] [--field OFFS[:TYPE]]\n"
	"                       [--max-objects N] [--serve ADDR:PORT [--label K=V]...]\n"
	"                       PROBE... [-- COMMAND [ARG...]]\n"
	"\n"
	"Follows objects through the calls that receive them. Each hit of --from's\n"
	"probe adds its one fetch argument, an object's address, to the followed\n"
	"set; each hit of --until's removes it. Every other PROBE (a function, a\n"
	"glob) shows only the calls that pass a followed object in an integer\n"
	"argument register (rdi, rsi, rdx, rcx, r8, r9: arg1..arg6): the argument,\n"
	"the object, and with --field the value at that offset in it. A register\n"
	"beyond a function's own parameters holds what its caller left there, and\n"
	"is tested too (as the kernel's objtrace does).\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope objtrace --from 'r:libobj:obj_new obj=$retval' --until 'libobj:obj_free $arg1' \\\n"
	"      --field 8:u32 'libobj:obj_*' -- ./driver\n"
	"  uscope objtrace --from 'r:libc:fopen f=$retval' --until 'libc:fclose $arg1' 'libc:f*' -p 1234\n",
	.extra = CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_OBJTRACE | CLI_ARG_SERVE |
		 CLI_ARG_LIVE,
	.own = objtrace_own,
};

/* --from or --until: the probe parsed, then made an object's (the
 * library's checks). 0, or 1 (reported). */
static int object_probe(const char *opt, const char *text, struct usc_probe_spec *spec,
			enum usc_obj_role role)
{
	struct usc_objtrace_error err;
	struct usc_probe_spec *p;

	if (cli_parse_probes((char **)&text, 1, &p))
		return 1;
	*spec = *p;
	free(p);
	if (usc_objtrace_object(spec, opt, role, &err)) {
		cli_probe_error(spec, err.pos, "%s", err.msg);
		return 1;
	}
	return 0;
}

int cmd_objtrace(int argc, char **argv)
{
	struct cli_opts o = {0};
	struct usc_probe_spec *specs;
	struct usc_objtrace_error err;
	char field[128];
	size_t n;
	int code = cli_parse_args(argc, argv, &objtrace_cmd, &o);
	FILE *fp;

	if (code >= 0)
		return code;
	if (!o.obj_from) {
		cli_usage_error("give --from PROBE: the probe whose fetch argument is an object "
				"to follow");
		free(o.specs);
		return 2;
	}
	if (o.obj_field && usc_objtrace_field(o.obj_field, field, sizeof(field), &err)) {
		cli_usage_error("%s", err.msg);
		free(o.specs);
		return 2;
	}
	n = o.nspecs;
	specs = realloc(o.specs, (n + 2) * sizeof(*specs));
	if (!specs) {
		cli_error("out of memory");
		free(o.specs);
		return 1;
	}
	o.specs = specs;
	for (size_t i = 0; i < n; i++) {
		if (usc_objtrace_match(&specs[i], o.obj_field ? field : NULL, &err)) {
			cli_probe_error(&specs[i], err.pos, "%s", err.msg);
			free(specs);
			return 1;
		}
	}
	if (object_probe("--from", o.obj_from, &specs[n++], USC_OBJ_FROM) ||
	    (o.obj_until && object_probe("--until", o.obj_until, &specs[n++], USC_OBJ_UNTIL))) {
		free(specs);
		return 1;
	}
	o.nspecs = n;
	o.so.objtrace.on = true;
	if (!o.so.objtrace.max_objects)
		o.so.objtrace.max_objects = USC_OBJ_DEFAULT;
	code = cli_add_serve(&o, USC_PROM_OBJTRACE, false);
	if (code) {
		free(specs);
		return code;
	}
	fp = cli_open_output(&o);
	if (!fp) {
		cli_drop_extra(&o);
		free(specs);
		return 1;
	}
	return cli_run_sink(&o, fp, usc_sink_objtrace(fp, o.json, o.so.objtrace.max_objects),
			    USC_SUMMARY_PROBES);
}
