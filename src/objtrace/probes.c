/* The probes uscope objtrace runs, made from the user's (objtrace.h): the
 * user's probe text with hidden fetch arguments added and parsed again, and
 * its role. */
#include "objtrace/objtrace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Fill *err: the probe goes wrong at pos, for msg. */
static int objtrace_fail(struct usc_objtrace_error *err, size_t pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int objtrace_fail(struct usc_objtrace_error *err, size_t pos, const char *fmt, ...)
{
	va_list ap;

	err->pos = pos;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* spec's text with more fetch arguments, parsed again into spec (its own
 * text kept for messages). 0, or -EINVAL with *err. */
static int objtrace_add_args(struct usc_probe_spec *spec, const char *more,
			     struct usc_objtrace_error *err)
{
	char text[USC_SPEC_MAX + 1024], own[USC_SPEC_MAX];
	struct usc_parse_error perr;

	snprintf(own, sizeof(own), "%s", spec->text);
	if ((size_t)snprintf(text, sizeof(text), "%s %s", own, more) >= sizeof(text) ||
	    strlen(text) >= USC_SPEC_MAX || usc_probe_parse(text, spec, &perr))
		return objtrace_fail(err, 0, "bad probe: too long for objtrace's arguments");
	snprintf(spec->text, sizeof(spec->text), "%s", own);
	return 0;
}

/* The last argument: the verdict the engine writes (probe.h), fetched as a
 * constant where the engine keeps no set (the session writes it then). */
static void objtrace_verdict_arg(struct usc_probe_spec *spec)
{
	struct usc_fetcharg *a = &spec->args[spec->nargs - 1];

	a->insn[0] = (struct fetch_insn){.op = FOP_IMM, .imm = 0};
	a->hidden = true;
}

/* --from or --until: one integer fetch argument, no filter. */
int usc_objtrace_object(struct usc_probe_spec *spec, const char *opt, enum usc_obj_role role,
			struct usc_objtrace_error *err)
{
	if (spec->nargs != 1 || spec->filter.n || fetch_type_is_string(spec->args[0].type) ||
	    spec->loc_kind == USC_LOC_USDT)
		return objtrace_fail(err, spec->nargs > 1 ? spec->args[1].pos : spec->filter.n ?
				     spec->filter.pos : 0,
				     "bad probe: %s takes a function probe with one fetch argument, "
				     "the object's address (an integer), and no 'if'", opt);
	if (objtrace_add_args(spec, USC_OBJ_VERDICT "=%rax:u32", err))
		return -EINVAL;
	objtrace_verdict_arg(spec);
	spec->obj_role = role;
	return 0;
}

/* A probe whose calls are matched: no fetch argument of its own; the six
 * argument registers, the field behind each (tmpl: usc_objtrace_field's
 * template), the verdict. */
int usc_objtrace_match(struct usc_probe_spec *spec, const char *tmpl,
		       struct usc_objtrace_error *err)
{
	static const char *const regs[USC_OBJ_NREGS] = {"rdi", "rsi", "rdx", "rcx", "r8", "r9"};
	char more[1024];
	size_t used = 0;

	if (spec->nargs || spec->filter.n || spec->is_return || spec->loc_kind == USC_LOC_USDT)
		return objtrace_fail(err, spec->nargs ? spec->args[0].pos : spec->filter.n ?
				     spec->filter.pos : 0,
				     "bad probe: objtrace follows objects into function entries: no "
				     "'r:', USDT, fetch arguments nor 'if' (--field shows a value)");
	for (int i = 0; i < USC_OBJ_NREGS; i++)
		used += (size_t)snprintf(more + used, sizeof(more) - used, "arg%d=%%%s:x64 ", i + 1,
					 regs[i]);
	for (int i = 0; tmpl && i < USC_OBJ_NREGS && used < sizeof(more); i++) {
		const char *at = strstr(tmpl, "%REG");	/* usc_objtrace_field's template */

		used += (size_t)snprintf(more + used, sizeof(more) - used, "field%d=%.*s%%%s%s ",
					 i + 1, (int)(at - tmpl), tmpl, regs[i], at + 4);
	}
	if (used < sizeof(more))
		snprintf(more + used, sizeof(more) - used, "%s=%%rax:u32", USC_OBJ_VERDICT);
	if (objtrace_add_args(spec, more, err))
		return -EINVAL;
	for (unsigned i = 0; i < spec->nargs; i++)
		spec->args[i].hidden = true;
	objtrace_verdict_arg(spec);
	spec->obj_role = USC_OBJ_MATCH;
	return 0;
}

/* --field OFFS[:TYPE] as a fetch expression on %REG: "+OFFS(%REG):TYPE",
 * with %REG in place of its register. */
int usc_objtrace_field(const char *field, char *tmpl, size_t len,
		       struct usc_objtrace_error *err)
{
	const char *colon = strchr(field, ':'), *num = field;
	struct usc_fetcharg a;
	struct usc_parse_error perr;
	char test[256];
	uint64_t off;
	size_t n;
	bool neg = false;

	if (*num == '+' || *num == '-')
		neg = *num++ == '-';
	n = probe_parse_number(num, &off);
	if (!n || (colon ? num + n != colon : num[n] != 0) || off > 0x7fffffff ||
	    (colon && !colon[1]) ||
	    snprintf(tmpl, len, "%c%llu(%%REG):%s", neg ? '-' : '+', (unsigned long long)off,
		     colon ? colon + 1 : "x64") >= (int)len)
		return objtrace_fail(err, 0, "--field wants OFFS[:TYPE] (8, 0x10:u32, -8:s64), "
				     "not '%s'", field);
	snprintf(test, sizeof(test), "%c%llu(%%rdi):%s", neg ? '-' : '+', (unsigned long long)off,
		 colon ? colon + 1 : "x64");
	if (probe_parse_fetcharg(test, 0, strlen(test), false, &a, &perr))
		return objtrace_fail(err, 0, "--field %s: %s", field,
				     usc_parse_strerror(perr.code));
	return 0;
}
