/* uscope flow: probe entries and returns, print them as a per-thread call
 * tree with durations. Pairing is src/flow; this file only classifies events
 * and formats them. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/session.h"
#include "engine/engine.h"
#include "flow/flow.h"
#include "output/output.h"

static const char flow_usage[] =
	"usage: uscope flow [-p PID] [--json] [-o FILE] [-d SECONDS] [-e ENGINE] PROBE...\n"
	"                   [-- COMMAND [ARG...]]\n"
	"\n"
	"  Show calls as a tree, per thread, with the time each one took. Every PROBE\n"
	"  on a function (globs included) gets an entry and a return probe; USDT\n"
	"  probes pair by name (NAME*entry or *start with NAME*return, *done or\n"
	"  *end); other probes show as one-off events.\n"
	"\n"
	"  PROBE is one shell word, as for 'uscope trace': [p|r][:EVENT] LOCATION [FETCHARG ...]\n"
	"    LOCATION  [MODULE:]SYMBOL | [MODULE:]SYMBOL+OFFSET | [MODULE:]ADDRESS |\n"
	"              %PROVIDER:NAME (USDT)\n"
	"\n"
	"  -p, --pid PID        trace a running process (all its threads)\n"
	"  -- COMMAND           start COMMAND with the probes in place; exit with its status\n"
	"                       (neither: system-wide, for every process running the file)\n"
	"      --json           one JSON object per entry, return or event\n"
	"  -o, --output FILE    write the flow to FILE\n"
	"  -d, --duration SECS  stop after SECS seconds\n"
	"  -e, --engine NAME    auto (default), tracefs or bpf\n"
	"  -q, --quiet          no readiness line or summary on stderr\n"
	"      --uretprobe      return probes swap the return address (the kernel's\n"
	"                       uretprobe) instead of probing every ret of the function;\n"
	"                       Go programs and stack walkers do not survive it\n"
	"  -v, --verbose        say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope flow 'app:*' -- ./app\n"
	"  uscope flow '%python:function__*' -p PID\n";

struct flow_ctx {
	struct flow_state *st;
	struct usc_output scratch;	/* escaped strings and arguments */
	bool json;
	FILE *fp;
	bool have_t0;
	uint64_t t0;
	int error;			/* -ENOMEM from formatting or pairing */
	int write_error;		/* errno */
	bool reported;
	bool header_done;
};

static bool ends_with(const char *s, size_t n, const char *suffix, size_t *stem)
{
	size_t k = strlen(suffix);

	if (n < k || memcmp(s + n - k, suffix, k))
		return false;
	*stem = n - k;
	return true;
}

/* What the event is to the flow, and its pairing key (bytes of a string owned
 * by the site, valid for the session). */
static enum flow_kind classify(const struct usc_site *site, const char **key, size_t *keylen,
			       bool *unpaired)
{
	const struct usc_probe_spec *spec = site->spec;

	*unpaired = false;
	if (spec->loc_kind == USC_LOC_USDT) {
		/* symbol is PROVIDER_NAME: the stem keeps the provider */
		const char *s = site->symbol ? site->symbol : site->label;
		size_t n = strlen(s), stem;

		*key = s;
		if (ends_with(s, n, "entry", &stem) || ends_with(s, n, "start", &stem)) {
			*keylen = stem;
			return FLOW_ENTRY;
		}
		if (ends_with(s, n, "return", &stem) || ends_with(s, n, "done", &stem) ||
		    ends_with(s, n, "end", &stem)) {
			*keylen = stem;
			return FLOW_RETURN;
		}
		*keylen = n;
		return FLOW_EVENT;
	}
	/* A function's entry or return pairs by the function's name. */
	*key = site->symbol ? site->symbol : site->label;
	*keylen = strlen(*key);
	if (site->is_return)
		return FLOW_RETURN;
	if (spec->loc_kind == USC_LOC_SYMBOL && !spec->has_offset)
		return FLOW_ENTRY;
	/* p on an ADDRESS or SYMBOL+OFFSET: an entry without a pair. It shows
	 * as an entry but opens no frame, which no return would close. */
	*unpaired = true;
	return FLOW_EVENT;
}

static void format_duration(char *buf, size_t len, int64_t ns)
{
	if (ns < 0)
		buf[0] = 0;
	else if (ns >= 1000000000)
		snprintf(buf, len, "%.3f s", (double)ns / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3f us", (double)ns / 1e3);
}

/* Once the probes are in place (the first event or drain), not before: a
 * session that fails to start prints only its error. */
static void header(struct flow_ctx *fc)
{
	if (fc->header_done)
		return;
	fc->header_done = true;
	if (!fc->json)
		fprintf(fc->fp, "%-6s %10s %10s  %s\n", " TID", "TIME(us)", "DURATION", "FUNCTION");
}

static int on_event(const struct usc_event *ev, void *ctx)
{
	static const char *const arrows[] = {"->", "<-", "--"};
	static const char *const types[] = {"entry", "return", "event"};
	struct flow_ctx *fc = ctx;
	const struct usc_site *site = ev->site;
	const bool usdt = site->spec->loc_kind == USC_LOC_USDT;
	/* functions show their name; USDT probes their label and arguments */
	const char *name = !usdt && site->symbol ? site->symbol : site->label;
	struct flow_result r;
	const char *key;
	size_t keylen, a, b;
	bool unpaired;
	enum flow_kind kind = classify(site, &key, &keylen, &unpaired);
	/* how it shows: an unpaired entry is still an entry */
	enum flow_kind shown = unpaired ? FLOW_ENTRY : kind;
	char where[USC_SYM_MAX + 24];
	int ret;

	/* a probe inside a function shows as SYMBOL+0xOFF */
	if (unpaired && site->symbol && site->vaddr != site->func_vaddr) {
		snprintf(where, sizeof(where), "%s+0x%" PRIx64, site->symbol,
			 site->vaddr - site->func_vaddr);
		name = where;
	}

	header(fc);
	if (!fc->have_t0) {
		fc->t0 = ev->time_ns;
		fc->have_t0 = true;
	}
	ret = flow_feed(fc->st, ev->tid, ev->time_ns, kind, key, keylen, &r);
	if (ret) {
		fc->error = ret;
		return -1;
	}

	output_reset(&fc->scratch);
	fc->scratch.json = fc->json;
	if (fc->json) {
		/* scratch holds comm, then the function, then the arguments */
		ret = output_json_string(&fc->scratch, ev->comm, strlen(ev->comm));
		a = fc->scratch.len;
		ret = ret ? ret : output_json_string(&fc->scratch, name, strlen(name));
		b = fc->scratch.len;
		ret = ret ? ret : output_event_args(&fc->scratch, ev);
		if (ret) {
			fc->error = ret;
			return -1;
		}
		fprintf(fc->fp, "{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"comm\":%.*s,"
			"\"type\":\"%s\",\"function\":%.*s,\"depth\":%zu,\"duration_ns\":",
			ev->time_ns, ev->pid, ev->tid, (int)a, fc->scratch.buf, types[shown],
			(int)(b - a), fc->scratch.buf + a, r.depth);
		if (r.duration_ns >= 0)
			fprintf(fc->fp, "%" PRId64, r.duration_ns);
		else
			fputs("null", fc->fp);
		fprintf(fc->fp, ",\"args\":%s}\n", fc->scratch.buf + b);
		return 0;
	}

	char dur[32];

	if (usdt) {
		ret = output_event_args(&fc->scratch, ev);
		if (ret) {
			fc->error = ret;
			return -1;
		}
	}
	format_duration(dur, sizeof(dur), r.duration_ns);
	fprintf(fc->fp, "%-6d %10.3f %10s  %*s%s %s%s\n", ev->tid,
		(double)(ev->time_ns - fc->t0) / 1e3, dur, (int)(2 * r.depth), "", arrows[shown],
		name, fc->scratch.buf ? fc->scratch.buf : "");
	return 0;
}

static int flush_out(void *ctx)
{
	struct flow_ctx *fc = ctx;

	header(fc);
	errno = 0;
	if ((fflush(fc->fp) || ferror(fc->fp)) && !fc->write_error)
		fc->write_error = errno ? errno : EIO;
	if (!fc->reported && fc->write_error && fc->write_error != EPIPE)
		cli_error("cannot write the flow: %s", strerror(fc->write_error));
	else if (!fc->reported && fc->error)
		cli_error("cannot follow the flow: %s", strerror(-fc->error));
	fc->reported |= fc->write_error || fc->error;
	return fc->write_error ? fc->write_error : -fc->error;
}

/* The user's specs, then a return probe for every function entry probe that
 * does not already have one. */
static int add_returns(struct usc_probe_spec **specs, size_t *nspecs)
{
	size_t n = *nspecs, extra = 0;
	struct usc_probe_spec *v = *specs;

	for (size_t i = 0; i < n; i++) {
		const struct usc_probe_spec *sp = &v[i];
		bool have = false;

		if (sp->loc_kind != USC_LOC_SYMBOL || sp->is_return || sp->has_offset)
			continue;
		for (size_t k = 0; k < n + extra && !have; k++)
			have = v[k].loc_kind == USC_LOC_SYMBOL && v[k].is_return &&
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

int cmd_flow(int argc, char **argv)
{
	struct flow_ctx fc = {0};
	struct cli_run run = {.engine = "auto"};
	struct cli_args a = {0};
	struct usc_probe_spec *specs;
	const char *outfile;
	size_t nspecs;
	int exit_code = cli_parse_args(argc, argv, CLI_ARG_JSON | CLI_ARG_OUTPUT | CLI_ARG_URETPROBE,
				       "flow", flow_usage, &run, &a);

	if (exit_code >= 0)
		return exit_code;
	specs = a.specs;
	nspecs = a.nspecs;
	outfile = a.outfile;
	fc.json = a.json;
	/* an inlined copy has no return to pair its entry with */
	run.no_inlines = true;
	if (add_returns(&specs, &nspecs)) {
		cli_error("out of memory");
		free(specs);
		return 1;
	}
	fc.st = flow_new();
	if (!fc.st) {
		cli_error("out of memory");
		free(specs);
		return 1;
	}
	fc.fp = stdout;
	if (outfile) {
		fc.fp = fopen(outfile, "w");
		if (!fc.fp) {
			cli_error("cannot write %s: %s", outfile, strerror(errno));
			flow_free(fc.st);
			free(specs);
			return 1;
		}
	}
	run.on_event = on_event;
	run.ctx = &fc;
	run.flush = flush_out;
	exit_code = cli_run_session(&run, specs, nspecs);
	if (fc.fp != stdout && fclose(fc.fp) && !exit_code) {
		cli_error("cannot write %s: %s", outfile, strerror(errno));
		exit_code = 1;
	}
	output_free(&fc.scratch);
	flow_free(fc.st);
	free(specs);
	return exit_code;
}
