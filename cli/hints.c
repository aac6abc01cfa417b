/* Another tool's probe syntax, pasted: a pointer to uscope-probes(7) and,
 * where it can be derived, the uscope command that does the same; a
 * bpftrace program ('uprobe:/bin/ls:main { @ = count(); }') to uscope
 * script. bpftrace's probes (uprobe:, uretprobe:, usdt:, u:, ur:, U:)
 * and perf probe (FUNC%return; -x BINARY, cli_getopt's). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define HINT_MAX 2048

/* bpftrace's probe types: the prefix, the uscope form of what follows. */
static const struct {
	const char *type;
	bool ret, usdt;
} bt_types[] = {
	{"uprobe:", false, false}, {"u:", false, false}, {"uretprobe:", true, false},
	{"ur:", true, false}, {"usdt:", false, true}, {"U:", false, true},
};

/* The aggregation a bpftrace action names: count, hist or trace. */
static const char *bt_command(const char *body)
{
	if (!body)
		return "trace";
	if (strstr(body, "count()"))
		return "count";
	if (strstr(body, "hist("))
		return "hist";
	return "trace";
}

/* text as bpftrace's: the uscope command in out. */
static bool bt_probe_hint(const char *text, char *out, size_t len)
{
	const char *loc = NULL, *body = strchr(text, '{'), *end;
	char where[256];
	size_t n, k;

	for (k = 0; k < sizeof(bt_types) / sizeof(bt_types[0]) && !loc; k++)
		if (!strncmp(text, bt_types[k].type, strlen(bt_types[k].type)))
			loc = text + strlen(bt_types[k].type);
	if (!loc)
		return false;
	k--;
	end = loc + strcspn(loc, " \t{,");
	n = (size_t)(end - loc);
	if (!n || n >= sizeof(where)) {
		snprintf(out, len, "that is bpftrace's syntax; uscope's is in uscope-probes(7)");
		return true;
	}
	memcpy(where, loc, n);
	where[n] = 0;
	if (bt_types[k].usdt) {
		/* PATH:PROVIDER:NAME -> PATH:%PROVIDER:NAME (PATH:NAME: its provider to be named) */
		char *last = strrchr(where, ':'), *prov;

		if (!last) {
			snprintf(out, len, "that is bpftrace's syntax; uscope's is in "
				 "uscope-probes(7): USDT probes are [MODULE:]%%PROVIDER:NAME");
			return true;
		}
		*last = 0;
		prov = strrchr(where, ':');
		if (prov) {
			*prov = 0;
			snprintf(out, len, "that is bpftrace's syntax; uscope's is in "
				 "uscope-probes(7): uscope %s '%s:%%%s:%s'", bt_command(body), where,
				 prov + 1, last + 1);
		} else {
			snprintf(out, len, "that is bpftrace's syntax; uscope's is in "
				 "uscope-probes(7): uscope %s '%s:%%PROVIDER:%s' (uscope list "
				 "--usdt %s names the providers)", bt_command(body), where, last + 1,
				 where);
		}
		return true;
	}
	snprintf(out, len, "that is bpftrace's syntax; uscope's is in uscope-probes(7): "
		 "uscope %s '%s%s%s'", bt_command(body), bt_types[k].ret ? "r:" : "", where,
		 body && strstr(body, "ustack") ? " $ustack" : "");
	return true;
}

/* A bpftrace program (a probe with its actions) is uscope script's to
 * run; the one-liner that does the same after it. */
static bool bt_hint(const char *text, char *out, size_t len)
{
	char one[HINT_MAX];

	if (!bt_probe_hint(text, one, sizeof(one)))
		return false;
	if (!strchr(text, '{')) {
		snprintf(out, len, "%s", one);
		return true;
	}
	snprintf(out, len, "that is a bpftrace program: uscope script -x '%.*s' runs it "
		 "(uscope-script(1)); as one probe, %.1024s", (int)(strlen(text) < 512 ? strlen(text) : 512),
		 text, one + (strncmp(one, "that is bpftrace's syntax; ", 27) ? 0 : 27));
	return true;
}

/* text as perf probe's FUNC%return: the uscope command in out. */
static bool perf_hint(const char *text, char *out, size_t len)
{
	const char *pct = strstr(text, "%return");

	if (!pct || (pct[7] && pct[7] != ' '))
		return false;
	snprintf(out, len, "that is perf probe's syntax; uscope's is in uscope-probes(7): "
		 "uscope %s 'r:%.*s%s'", cli_cmd_name(), (int)(pct - text), text, pct + 7);
	return true;
}

bool cli_probe_hint(const char *text)
{
	char hint[HINT_MAX];

	if (!bt_hint(text, hint, sizeof(hint)) && !perf_hint(text, hint, sizeof(hint)))
		return false;
	fprintf(stderr, "uscope: %s\n", hint);
	return true;
}

bool cli_probe_foreign(const struct usc_probe_spec *spec)
{
	for (size_t k = 0; k < sizeof(bt_types) / sizeof(bt_types[0]); k++) {
		size_t n = strlen(bt_types[k].type) - 1;

		if (strlen(spec->module) == n && !strncmp(spec->module, bt_types[k].type, n) &&
		    !strncmp(spec->text, bt_types[k].type, n + 1))
			return true;
	}
	return false;
}
