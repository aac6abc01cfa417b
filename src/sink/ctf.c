/* The CTF sink (export --format ctf): a CTF 1.8 trace directory that
 * babeltrace2 and Trace Compass read.
 *
 *   DIR/metadata   the trace's description in TSDL (text): the clock
 *                  (CLOCK_MONOTONIC in ns, offset to the wall time the
 *                  recording began), one stream, one event class per probe
 *                  label and argument layout
 *   DIR/stream     packets of events, little-endian, in time order
 *
 * Each event has a header (class id, timestamp), a context (pid, tid, cpu,
 * comm) and its probe's arguments as typed fields: integers with their
 * size, signedness and base (hex types in base 16), strings as strings,
 * stacks as sequences of their addresses (frame 0 first, NAME_length of them).
 * A value that could not be read (a fault, a NULL string) is written as 0
 * or "" with its bit set in the event's `unread` field (bit i: argument
 * i), so a reader can tell it apart from a real 0. Field names are the
 * arguments' names made into identifiers, written with a leading '_'
 * (CTF's escape: readers strip it), so no name collides with a TSDL
 * keyword. The records lost are in the last packet's events_discarded,
 * which babeltrace2 reports. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "core/log.h"
#include "core/grow.h"
#include "core/outfile.h"
#include "output/output.h"
#include "probe/fetch.h"
#include "record/format.h"
#include "sink/sink.h"
#include "sink/sink_int.h"

#define CTF_MAGIC 0xC1FC1FC1u
#define PACKET_MAX (1u << 20)	/* bytes of events a packet holds before a new one */

/* packet header + context, as the metadata declares them */
struct __attribute__((packed)) packet_head {
	uint32_t magic;
	uint8_t uuid[16];
	uint32_t stream_id;
	uint64_t timestamp_begin, timestamp_end;
	uint64_t content_size, packet_size;	/* bits */
	uint64_t events_discarded;
};

struct ctf_sink {
	struct usc_sink base;
	char *dir;
	FILE *stream;
	const struct usc_sink_ctx *s;
	uint32_t *class_of;		/* per site */
	uint8_t uuid[16];
	uint8_t *buf;			/* the packet being filled: head, then events */
	size_t len, cap;
	uint64_t first_ns, last_ns;	/* of the packet's events */
	bool open;			/* a packet has events */
	int error;
};

static int fail(struct ctf_sink *cs, int err, const char *what)
{
	if (!cs->error)
		log_error("cannot write the CTF trace %s%s%s: %s", cs->dir, what ? "/" : "",
			  what ? what : "", usc_outfile_strerror(err));
	cs->error = err;
	return err;
}

static int put(struct ctf_sink *cs, const void *p, size_t n)
{
	if (core_reserve(cs->buf, cs->cap, cs->len + n, 1 << 16))
		return -ENOMEM;
	memcpy(cs->buf + cs->len, p, n);
	cs->len += n;
	return 0;
}

/* Write the packet out, its head completed. */
static int packet_close(struct ctf_sink *cs, uint64_t discarded)
{
	struct packet_head h = {.magic = CTF_MAGIC, .stream_id = 0};

	if (!cs->open)
		return 0;
	memcpy(h.uuid, cs->uuid, 16);
	h.timestamp_begin = cs->first_ns;
	h.timestamp_end = cs->last_ns;
	h.content_size = h.packet_size = (uint64_t)cs->len * 8;
	h.events_discarded = discarded;
	memcpy(cs->buf, &h, sizeof(h));
	if (fwrite(cs->buf, 1, cs->len, cs->stream) != cs->len)
		return fail(cs, -errno, "stream");
	cs->len = 0;
	cs->open = false;
	return 0;
}

/* A name as a TSDL identifier: letters, digits and '_' (others become
 * '_'), written after the '_' escape. */
static void ident(FILE *f, const char *name)
{
	fputc('_', f);
	for (const char *p = name; *p; p++)
		fputc((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' ? *p : '_', f);
}

static void quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
	}
	fputc('"', f);
}

static unsigned shown_args(const struct usc_site *site)
{
	return probe_shown_args(site->args, site->nargs);
}

/* Do sites a and b have the same event class: label, argument names and
 * types? */
static bool same_class(const struct usc_site *a, const struct usc_site *b)
{
	unsigned n = shown_args(a);

	if (strcmp(a->label, b->label) || n != shown_args(b))
		return false;
	for (unsigned i = 0; i < n; i++)
		if (a->args[i].type != b->args[i].type || strcmp(a->args[i].name, b->args[i].name))
			return false;
	return true;
}

/* Argument a's field, named name. */
static void field_decl(FILE *f, const struct usc_fetcharg *a, const char *name)
{
	unsigned size = fetch_type_size(a->type);
	bool is_signed = a->type >= USC_T_S8 && a->type <= USC_T_S64;
	bool hex = (a->type >= USC_T_X8 && a->type <= USC_T_X64) || a->type == USC_T_SYMBOL;

	fputs("\t\t", f);
	if (a->type == USC_T_STACK) {
		/* a stack: its addresses, frame 0 first, as LTTng's
		 * callstack contexts are (a sequence and its length) */
		fputs("uint32_t ", f);
		ident(f, name);
		fputs("_length;\n\t\tinteger { size = 64; align = 8; signed = false; base = 16; } ",
		      f);
		ident(f, name);
		fputc('[', f);
		ident(f, name);
		fputs("_length];\n", f);
		return;
	}
	if (fetch_type_is_string(a->type))
		fputs("string { encoding = UTF8; }", f);
	else
		fprintf(f, "integer { size = %u; align = 8; signed = %s; base = %u; }",
			(size ? size : 8) * 8, is_signed ? "true" : "false", hex ? 16 : 10);
	fputc(' ', f);
	ident(f, name);
	fputs(";\n", f);
}

static int write_metadata(struct ctf_sink *cs, const struct usc_sink_ctx *s)
{
	const struct rec_header *h = s->replayed;
	char path[4096], uuid[40];
	uint64_t offset_ns = 0;
	FILE *f;

	if (h && h->realtime_ns > h->mono_ns)
		offset_ns = h->realtime_ns - h->mono_ns;
	snprintf(uuid, sizeof(uuid),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 cs->uuid[0], cs->uuid[1], cs->uuid[2], cs->uuid[3], cs->uuid[4], cs->uuid[5],
		 cs->uuid[6], cs->uuid[7], cs->uuid[8], cs->uuid[9], cs->uuid[10], cs->uuid[11],
		 cs->uuid[12], cs->uuid[13], cs->uuid[14], cs->uuid[15]);
	snprintf(path, sizeof(path), "%s/metadata", cs->dir);
	f = usc_outfile_fopen(path);
	if (!f)
		return fail(cs, -errno, "metadata");
	fprintf(f, "/* CTF 1.8 */\n\n"
		"typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n"
		"typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
		"typealias integer { size = 32; align = 8; signed = true; } := int32_t;\n"
		"typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n\n"
		"trace {\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"%s\";\n\tbyte_order = le;\n"
		"\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n"
		"\t\tuint32_t stream_id;\n\t};\n};\n\n", uuid);
	fputs("env {\n\ttracer_name = \"uscope\";\n\ttracer_version = ", f);
	quoted(f, USC_VERSION);
	fputs(";\n\thostname = ", f);
	quoted(f, h ? h->host : "");
	fputs(";\n\tcommand = ", f);
	quoted(f, h ? h->command : "");
	fputs(";\n};\n\n", f);
	fprintf(f, "clock {\n\tname = monotonic;\n\tuuid = \"%s\";\n"
		"\tdescription = \"CLOCK_MONOTONIC of the traced machine\";\n"
		"\tfreq = 1000000000;\n\tprecision = 1;\n\toffset_s = %" PRIu64 ";\n"
		"\toffset = %" PRIu64 ";\n\tabsolute = false;\n};\n\n"
		"typealias integer { size = 64; align = 8; signed = false; "
		"map = clock.monotonic.value; } := uint64_clock_t;\n\n", uuid,
		offset_ns / 1000000000u, offset_ns % 1000000000u);
	fputs("stream {\n\tid = 0;\n"
	      "\tevent.header := struct {\n\t\tuint32_t id;\n\t\tuint64_clock_t timestamp;\n\t};\n"
	      "\tpacket.context := struct {\n\t\tuint64_clock_t timestamp_begin;\n"
	      "\t\tuint64_clock_t timestamp_end;\n\t\tuint64_t content_size;\n"
	      "\t\tuint64_t packet_size;\n\t\tuint64_t events_discarded;\n\t};\n"
	      "\tevent.context := struct {\n\t\tint32_t _pid;\n\t\tint32_t _tid;\n"
	      "\t\tint32_t _cpu;\n\t\tstring { encoding = UTF8; } _comm;\n\t};\n};\n", f);
	for (size_t i = 0; i < s->nsites; i++) {
		const struct usc_site *site = &s->sites[i];
		unsigned n = shown_args(site);

		if (cs->class_of[i] != i)
			continue;
		fprintf(f, "\nevent {\n\tname = ");
		quoted(f, site->label);
		fprintf(f, ";\n\tid = %zu;\n\tstream_id = 0;\n\tfields := struct {\n", i);
		if (n)
			fputs("\t\tuint32_t _unread;\n", f);
		for (unsigned k = 0; k < n; k++) {
			char alt[USC_NAME_MAX + 16];
			bool dup = !strcmp(site->args[k].name, "unread");

			for (unsigned j = 0; j < k && !dup; j++)
				dup = !strcmp(site->args[j].name, site->args[k].name);
			/* a field name once: the same name again gets its index */
			snprintf(alt, sizeof(alt), dup ? "%s_%u" : "%s", site->args[k].name, k);
			field_decl(f, &site->args[k], alt);
		}
		fputs("\t};\n};\n", f);
	}
	if (fclose(f))
		return fail(cs, -errno, "metadata");
	return 0;
}

static int ctf_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct ctf_sink *cs = container_of(k, struct ctf_sink, base);
	char path[4096];
	int ret;

	cs->s = s;
	ret = usc_outdir_make(cs->dir);
	if (ret)
		return fail(cs, ret, NULL);
	cs->class_of = malloc((s->nsites ? s->nsites : 1) * sizeof(*cs->class_of));
	if (!cs->class_of)
		return fail(cs, -ENOMEM, NULL);
	/* sites of one label and argument layout share a class: the first's */
	for (size_t i = 0; i < s->nsites; i++) {
		cs->class_of[i] = (uint32_t)i;
		for (size_t j = 0; j < i; j++)
			if (cs->class_of[j] == j && same_class(&s->sites[j], &s->sites[i])) {
				cs->class_of[i] = (uint32_t)j;
				break;
			}
	}
	if (getrandom(cs->uuid, sizeof(cs->uuid), 0) != sizeof(cs->uuid))
		memset(cs->uuid, 0x5c, sizeof(cs->uuid));
	cs->uuid[6] = (cs->uuid[6] & 0x0f) | 0x40;	/* a version 4 UUID */
	cs->uuid[8] = (cs->uuid[8] & 0x3f) | 0x80;
	if (write_metadata(cs, s))
		return cs->error;
	snprintf(path, sizeof(path), "%s/stream", cs->dir);
	cs->stream = usc_outfile_fopen(path);
	if (!cs->stream)
		return fail(cs, -errno, "stream");
	return 0;
}

static int ctf_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct ctf_sink *cs = container_of(k, struct ctf_sink, base);
	const struct usc_site *site = ev->site;
	size_t i = (size_t)(site - cs->s->sites);
	unsigned n = shown_args(site);
	uint32_t unread = 0, id;
	int ret = 0;

	if (cs->error || i >= cs->s->nsites)
		return cs->error;
	if (cs->open && cs->len >= PACKET_MAX && (ret = packet_close(cs, 0)))
		return ret;
	if (!cs->open) {
		struct packet_head h = {0};

		ret = put(cs, &h, sizeof(h));
		cs->first_ns = ev->time_ns;
		cs->open = true;
	}
	cs->last_ns = ev->time_ns;
	id = cs->class_of[i];
	ret = ret ? ret : put(cs, &id, 4);
	ret = ret ? ret : put(cs, &ev->time_ns, 8);
	ret = ret ? ret : put(cs, &ev->pid, 4);
	ret = ret ? ret : put(cs, &ev->tid, 4);
	ret = ret ? ret : put(cs, &ev->cpu, 4);
	ret = ret ? ret : put(cs, ev->comm, strlen(ev->comm) + 1);
	for (unsigned a = 0; a < n && a < ev->nvals && a < 32; a++)
		if (ev->vals[a].kind == USC_V_FAULT || ev->vals[a].kind == USC_V_NULL)
			unread |= 1u << a;
	if (n)
		ret = ret ? ret : put(cs, &unread, 4);
	for (unsigned a = 0; a < n && !ret; a++) {
		const struct usc_value *v = a < ev->nvals ? &ev->vals[a] : NULL;
		enum usc_type t = site->args[a].type;

		if (t == USC_T_STACK) {
			uint32_t nf = v && v->kind == USC_V_STACK ? v->stack->n : 0;

			ret = put(cs, &nf, 4);
			for (uint32_t j = 0; j < nf && !ret; j++)
				ret = put(cs, &v->stack->pc[j], 8);
		} else if (fetch_type_is_string(t)) {
			const char *str = v && v->kind == USC_V_STR ? v->str : "";
			size_t len = v && v->kind == USC_V_STR ? strnlen(str, v->len) : 0;

			ret = put(cs, str, len);
			ret = ret ? ret : put(cs, "", 1);
		} else {
			unsigned size = fetch_type_size(t);
			uint64_t u = v && v->kind == USC_V_INT ? v->u : 0;

			ret = put(cs, &u, size ? size : 8);
		}
	}
	return ret ? fail(cs, ret, NULL) : 0;
}

static int ctf_report(struct usc_sink *k, const struct usc_sink_ctx *s, const struct usc_stats *st,
		      bool final)
{
	struct ctf_sink *cs = container_of(k, struct ctf_sink, base);
	int ret;

	(void)s;
	if (!final || cs->error)
		return cs->error;
	/* the losses, where a reader says them: an empty packet when no
	 * event is left to carry them */
	if (!cs->open && st->lost) {
		struct packet_head h = {0};

		if (put(cs, &h, sizeof(h)))
			return fail(cs, -ENOMEM, NULL);
		cs->first_ns = cs->last_ns;
		cs->open = true;
	}
	ret = packet_close(cs, st->lost);
	if (!ret && fclose(cs->stream))
		ret = fail(cs, -errno, "stream");
	cs->stream = NULL;
	return ret;
}

static void ctf_destroy(struct usc_sink *k)
{
	struct ctf_sink *cs = container_of(k, struct ctf_sink, base);

	if (cs->stream)
		fclose(cs->stream);
	free(cs->class_of);
	free(cs->buf);
	free(cs->dir);
	free(cs);
}

static const struct usc_sink_ops ctf_ops = {
	.begin = ctf_begin,
	.event = ctf_event,
	.report = ctf_report,
	.destroy = ctf_destroy,
};

struct usc_sink *usc_sink_ctf(const char *dir)
{
	struct ctf_sink *cs = calloc(1, sizeof(*cs));

	if (!cs || !(cs->dir = strdup(dir))) {
		free(cs);
		return NULL;
	}
	cs->base.ops = &ctf_ops;
	return &cs->base;
}
