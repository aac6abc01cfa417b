/* uscope objtrace: follow objects through the calls that receive them, as
 * the kernel's objtrace trigger does. --from's probe adds its one fetch
 * argument (the object's address, typically a constructor's $retval) to the
 * followed set, --until's removes it; every other PROBE (a glob, usually)
 * is recorded only for a call that passes a followed object in an argument
 * register, where the probe runs when the engine can (the inject agent, the
 * bpf program; tracefs: the session). The objtrace sink prints them
 * (src/sink/objtrace.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sink/sink.h"

static const char objtrace_usage[] =
	"usage: uscope objtrace [-p PID] [-d SECONDS] [--json] [-o FILE] [-e ENGINE]\n"
	"                       --from PROBE [--until PROBE] [--field OFFS[:TYPE]]\n"
	"                       [--max-objects N] PROBE... [-- COMMAND [ARG...]]\n"
	"\n"
	"Follows objects through the calls that receive them. Each hit of --from's\n"
	"probe adds its one fetch argument, an object's address, to the followed\n"
	"set; each hit of --until's removes it. Every other PROBE (a function, a\n"
	"glob) shows only the calls that pass a followed object in an integer\n"
	"argument register (rdi, rsi, rdx, rcx, r8, r9: arg1..arg6): the argument,\n"
	"the object, and with --field the value at that offset in it. A register\n"
	"beyond a function's own parameters holds what its caller left there, and\n"
	"is tested too (as the kernel's objtrace does).\n"
	"\n"
	"  --from PROBE           a probe with one fetch argument, the object:\n"
	"                         'r:libfoo:foo_new obj=$retval'\n"
	"  --until PROBE          a probe with one fetch argument, the object no\n"
	"                         longer followed: 'libfoo:foo_free $arg1'\n"
	"  --field OFFS[:TYPE]    also show the value at OFFS bytes into the object\n"
	"                         (TYPE as in a fetch argument; default x64)\n"
	"  --max-objects N        objects followed at once (default 1024, at most\n"
	"                         65535); a --from hit beyond is shown and reported,\n"
	"                         its object not followed\n"
	"  -p, --pid PID          in a running process\n"
	"  -- COMMAND             in COMMAND; exit with its status (neither: system-wide)\n"
	"  -d, --duration SECS    stop after SECS seconds\n"
	"      --json             one JSON object per line\n"
	"  -o, --output FILE      write the events to FILE\n"
	"  -e, --engine NAME      auto (default), inject, bpf or tracefs\n"
	"  -q, --quiet            no readiness line and no summary on stderr\n"
	"  -v, --verbose          say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope objtrace --from 'r:libobj:obj_new obj=$retval' --until 'libobj:obj_free $arg1' \\\n"
	"      --field 8:u32 'libobj:obj_*' -- ./driver\n"
	"  uscope objtrace --from 'r:libc:fopen f=$retval' --until 'libc:fclose $arg1' 'libc:f*' -p 1234\n";

/* spec's text with more fetch arguments, parsed again into spec (its own
 * text kept for messages). 0, or 1 (reported). */
static int add_args(struct usc_probe_spec *spec, const char *more)
{
	char text[USC_SPEC_MAX + 1024], own[USC_SPEC_MAX];
	struct usc_parse_error err;

	snprintf(own, sizeof(own), "%s", spec->text);
	if ((size_t)snprintf(text, sizeof(text), "%s %s", own, more) >= sizeof(text) ||
	    strlen(text) >= USC_SPEC_MAX || usc_probe_parse(text, spec, &err)) {
		cli_probe_error(spec, 0, "bad probe: too long for objtrace's arguments");
		return 1;
	}
	snprintf(spec->text, sizeof(spec->text), "%s", own);
	return 0;
}

/* The last argument: the verdict the engine writes (probe.h), fetched as a
 * constant where the engine keeps no set (the session writes it then). */
static void verdict_arg(struct usc_probe_spec *spec)
{
	struct usc_fetcharg *a = &spec->args[spec->nargs - 1];

	a->insn[0] = (struct fetch_insn){.op = FOP_IMM, .imm = 0};
	a->hidden = true;
}

/* --from or --until: one integer fetch argument, no filter. */
static int object_probe(const char *opt, const char *text, struct usc_probe_spec *spec,
			uint8_t role)
{
	struct usc_probe_spec *p;

	if (cli_parse_probes((char **)&text, 1, &p))
		return 1;
	*spec = *p;
	free(p);
	if (spec->nargs != 1 || spec->filter.n || fetch_type_is_string(spec->args[0].type) ||
	    spec->loc_kind == USC_LOC_USDT) {
		cli_probe_error(spec, spec->nargs > 1 ? spec->args[1].pos : spec->filter.n ?
				spec->filter.pos : 0,
				"bad probe: %s takes a function probe with one fetch argument, the "
				"object's address (an integer), and no 'if'", opt);
		return 1;
	}
	if (add_args(spec, USC_OBJ_VERDICT "=%rax:u32"))
		return 1;
	verdict_arg(spec);
	spec->obj_role = role;
	return 0;
}

/* A probe whose calls are matched: no fetch argument of its own; the six
 * argument registers, the field behind each (field: field_expr's template),
 * the verdict. */
static int match_probe(struct usc_probe_spec *spec, const char *field)
{
	static const char *const regs[USC_OBJ_NREGS] = {"rdi", "rsi", "rdx", "rcx", "r8", "r9"};
	char more[1024];
	size_t used = 0;

	if (spec->nargs || spec->filter.n || spec->is_return || spec->loc_kind == USC_LOC_USDT) {
		cli_probe_error(spec, spec->nargs ? spec->args[0].pos : spec->filter.n ?
				spec->filter.pos : 0,
				"bad probe: objtrace follows objects into function entries: no "
				"'r:', USDT, fetch arguments nor 'if' (--field shows a value)");
		return 1;
	}
	for (int i = 0; i < USC_OBJ_NREGS; i++)
		used += (size_t)snprintf(more + used, sizeof(more) - used, "arg%d=%%%s:x64 ", i + 1,
					 regs[i]);
	for (int i = 0; field && i < USC_OBJ_NREGS && used < sizeof(more); i++) {
		const char *at = strstr(field, "%REG");	/* field_expr's template */

		used += (size_t)snprintf(more + used, sizeof(more) - used, "field%d=%.*s%%%s%s ",
					 i + 1, (int)(at - field), field, regs[i], at + 4);
	}
	if (used < sizeof(more))
		snprintf(more + used, sizeof(more) - used, "%s=%%rax:u32", USC_OBJ_VERDICT);
	if (add_args(spec, more))
		return 1;
	for (unsigned i = 0; i < spec->nargs; i++)
		spec->args[i].hidden = true;
	verdict_arg(spec);
	spec->obj_role = USC_OBJ_MATCH;
	return 0;
}

/* --field OFFS[:TYPE] as a fetch expression on %REG: "+OFFS(%REG):TYPE",
 * with %REG in place of its register. 0, or 2 (reported). */
static int field_expr(const char *field, char *out, size_t len)
{
	const char *colon = strchr(field, ':'), *num = field;
	struct usc_fetcharg a;
	struct usc_parse_error err;
	char test[256];
	uint64_t off;
	size_t n;
	bool neg = false;

	if (*num == '+' || *num == '-')
		neg = *num++ == '-';
	n = probe_parse_number(num, &off);
	if (!n || (colon ? num + n != colon : num[n] != 0) || off > 0x7fffffff ||
	    (colon && !colon[1]) ||
	    snprintf(out, len, "%c%llu(%%REG):%s", neg ? '-' : '+', (unsigned long long)off,
		     colon ? colon + 1 : "x64") >= (int)len) {
		cli_error("--field wants OFFS[:TYPE] (8, 0x10:u32, -8:s64), not '%s'", field);
		return 2;
	}
	snprintf(test, sizeof(test), "%c%llu(%%rdi):%s", neg ? '-' : '+', (unsigned long long)off,
		 colon ? colon + 1 : "x64");
	if (probe_parse_fetcharg(test, 0, strlen(test), false, &a, &err)) {
		cli_error("--field %s: %s", field, usc_parse_strerror(err.code));
		return 2;
	}
	return 0;
}

int cmd_objtrace(int argc, char **argv)
{
	struct cli_opts o = {0};
	struct usc_probe_spec *specs;
	char field[128];
	size_t n;
	int code = cli_parse_args(argc, argv, CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_OBJTRACE,
				  "objtrace", objtrace_usage, &o);
	FILE *fp;

	if (code >= 0)
		return code;
	if (!o.obj_from) {
		cli_error("objtrace needs --from PROBE: the probe whose fetch argument is an "
			  "object to follow (see uscope objtrace --help)");
		free(o.specs);
		return 2;
	}
	if (o.obj_field && field_expr(o.obj_field, field, sizeof(field))) {
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
		if (match_probe(&specs[i], o.obj_field ? field : NULL)) {
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
	fp = cli_open_output(&o);
	if (!fp) {
		free(specs);
		return 1;
	}
	return cli_run_sink(&o, fp, usc_sink_objtrace(fp, o.json, o.so.objtrace.max_objects),
			    true);
}
