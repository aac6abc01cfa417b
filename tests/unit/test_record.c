/* Recordings without root: a file written by the writer (record.h) from a
 * session built by hand, with records of all three forms (REC_EVENT, the
 * bpf program's REC_BPF, the inject agent's REC_INJECT), read back by the
 * reader (reader.h): the probes, sites and arguments, every event's fields
 * in time order across the engines, the counts, the snapshot. Then the
 * same file cut at every length, and with every byte changed: it reads up
 * to the damage (a prefix of the events), says where, and never fails
 * otherwise; a chunk of many records cut short keeps every whole one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/log.h"
#include "engine/bpf/bpf_shared.h"
#include "engine/inject/inject_shared.h"
#include "engine/raw.h"
#include "record/reader.h"
#include "record/record.h"
#include "session/session.h"
#include "session/session_int.h"

#define PID 4242
#define TID_EV 4243
#define TID_INJ 4244
#define T0 1000000000000ull	/* ns; the clock maps tsc to ns one to one */

static char dir[] = "/tmp/uscope-test-record-XXXXXX";
static char path[256], cut[256];

static int nerrors;
static void on_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	(void)msg;
	if (level == USC_LOG_ERROR)
		nerrors++;
}

/* ---- the file ----------------------------------------------------------- */

static const struct usc_enumerator colors_v[] = {{0, "RED"}, {5, "GREEN"}};
static const struct usc_enum colors = {2, false, colors_v};

static const struct usc_engine_ops ops_tracefs = {.name = "tracefs"};
static const struct usc_engine_ops ops_bpf = {.name = "bpf"};
static const struct usc_engine_ops ops_inject = {.name = "inject"};

/* What every event is expected to read as. */
struct want {
	uint64_t time;
	unsigned site;
	int32_t tid, cpu;
	const char *comm;
	uint64_t ip, func;
	unsigned nvals;
	struct {
		uint8_t kind;
		uint64_t u;
		const char *str;
	} v[4];
};

/* in time order: inject, event, bpf, inject, event, bpf */
static const struct want want[] = {
	{T0 + 100, 2, TID_INJ, 3, "injthr", 0x7f0000002000, 0, 1, {{USC_V_INT, 11, NULL}}},
	{T0 + 200, 0, TID_EV, 1, "evthr", 0x401130, 0, 4,
	 {{USC_V_INT, 7, NULL}, {USC_V_STR, 0, "/etc/hosts"}, {USC_V_INT, 5, NULL},
	  {USC_V_FAULT, 0, NULL}}},
	{T0 + 300, 1, TID_EV, 2, "bpfthr", 0x401199, 0x401130, 1, {{USC_V_INT, 8, NULL}}},
	{T0 + 400, 2, TID_INJ, 0, "injthr", 0x7f0000002000, 0, 1, {{USC_V_STR, 0, "tab\there"}}},
	/* a comm longer than the kernel's: the writer keeps 64 bytes */
	{T0 + 500, 0, TID_EV, 1, "a thread name of more than forty bytes, x", 0x401130, 0, 4,
	 {{USC_V_INT, 9, NULL}, {USC_V_NULL, 0, NULL}, {USC_V_INT, 3, NULL},
	  {USC_V_STR, 0, ""}}},
	{T0 + 600, 1, TID_EV, 2, "bpfthr", 0x401199, 0x401130, 1, {{USC_V_INT, 10, NULL}}},
};
#define NWANT (sizeof(want) / sizeof(want[0]))

static struct usc_probe_spec specs[2];
static struct usc_site sites[3];
static struct usc_fetcharg args0[4], args1[1], args2[1];

static void build_session(struct usc_session *s, struct usc_placement *place,
			  struct session_engine *eng)
{
	memset(s, 0, sizeof(*s));
	snprintf(specs[0].text, sizeof(specs[0].text), "app:handle id=$arg1:s32 path=$arg2:string");
	snprintf(specs[1].text, sizeof(specs[1].text), "r:app:handle $retval");
	specs[1].is_return = true;
	specs[0].loc_kind = specs[1].loc_kind = USC_LOC_SYMBOL;

	snprintf(args0[0].name, sizeof(args0[0].name), "id");
	args0[0].type = USC_T_S32;
	snprintf(args0[1].name, sizeof(args0[1].name), "path");
	args0[1].type = USC_T_STRING;
	snprintf(args0[2].name, sizeof(args0[2].name), "c");
	args0[2].type = USC_T_U32;
	args0[2].show = USC_SHOW_ENUM;
	args0[2].enums = &colors;
	snprintf(args0[3].name, sizeof(args0[3].name), "r__tag");
	args0[3].type = USC_T_STRING;
	args0[3].group_len = 1;
	args0[3].group_first = true;
	snprintf(args1[0].name, sizeof(args1[0].name), "arg1");
	args1[0].type = USC_T_S64;
	snprintf(args2[0].name, sizeof(args2[0].name), "x");
	args2[0].type = USC_T_U64;

	for (int i = 0; i < 3; i++) {
		sites[i].path = "/usr/bin/app";
		sites[i].vaddr = 0x1130;
		sites[i].func_vaddr = 0x1130;
		sites[i].offset = 0x1130;
		sites[i].symbol = "handle";
	}
	snprintf(sites[0].label, sizeof(sites[0].label), "handle");
	snprintf(sites[0].event, sizeof(sites[0].event), "handle");
	sites[0].args = args0;
	sites[0].nargs = 4;
	sites[1].probe = 1;
	sites[1].is_return = sites[1].ret_site = true;
	sites[1].vaddr = 0x1150;	/* its ret */
	snprintf(sites[1].label, sizeof(sites[1].label), "handle__return");
	snprintf(sites[1].event, sizeof(sites[1].event), "handle__return");
	sites[1].args = args1;
	sites[1].nargs = 1;
	snprintf(sites[2].label, sizeof(sites[2].label), "handle");
	snprintf(sites[2].event, sizeof(sites[2].event), "handle_1");
	sites[2].path = "/usr/lib/libapp.so";
	sites[2].args = args2;
	sites[2].nargs = 1;

	eng[0].ops = &ops_tracefs;
	eng[1].ops = &ops_bpf;
	eng[2].ops = &ops_inject;
	for (int i = 0; i < 3; i++)
		place[i].engine = i;
	s->specs = specs;
	s->nspecs = 2;
	s->sites = sites;
	s->nsites = 3;
	s->place = place;
	s->engines = eng;
	s->nengines = 3;
}

static void write_event(struct rec_writer *w, const struct want *x)
{
	struct usc_value v[4];
	struct usc_event ev = {.time_ns = x->time, .pid = PID, .tid = x->tid, .cpu = x->cpu,
			       .comm = x->comm, .site = &sites[x->site], .ip = x->ip,
			       .func = x->func, .nvals = x->nvals, .vals = v};

	for (unsigned i = 0; i < x->nvals; i++) {
		v[i] = (struct usc_value){.kind = x->v[i].kind, .u = x->v[i].u, .str = x->v[i].str};
		if (x->v[i].str)
			v[i].len = (uint32_t)strlen(x->v[i].str);
	}
	assert_int_equal(rec_write_event(w, &ev, x->site), 0);
}

static void write_bpf(struct rec_writer *w, const struct want *x)
{
	struct bpfeng_rec r;

	memset(&r, 0, sizeof(r));
	r.ts = x->time;
	r.ip = 0x401150;	/* the ret's runtime address: the load bias is 0x400000 */
	r.pid = PID;
	r.tid = (unsigned)x->tid;
	r.site = r.via = 0;	/* the first (only) bpf site */
	r.cpu = (unsigned)x->cpu;
	r.nargs = 2;
	r.len = sizeof(r);
	snprintf(r.comm, sizeof(r.comm), "%s", x->comm);
	r.vals[0] = (struct bpfeng_val){.val = x->v[0].u, .kind = BPFENG_INT};
	r.vals[1] = (struct bpfeng_val){.val = x->ip, .kind = BPFENG_INT};	/* the return address */
	assert_int_equal(rec_write_bpf(w, &r, sizeof(r)), 0);
}

/* The inject records of want[] in one ring's bytes. */
static size_t inject_bytes(uint8_t *buf, const struct want *const *x, size_t n)
{
	size_t at = 0;

	for (size_t k = 0; k < n; k++) {
		struct inj_rec *r = (void *)(buf + at);
		size_t len = sizeof(*r) + sizeof(struct inj_val);

		if (k % 2 && x[k]->v[0].kind == USC_V_INT) {
			/* every other integer's record in the short form, as
			 * agent_fast_rec writes it */
			struct inj_rec_short *q = (void *)(buf + at);

			len = sizeof(*q) + sizeof(uint64_t);
			q->len = INJ_REC_SHORT | (uint32_t)x[k]->cpu << INJ_REC_SHORT_CPU |
				 (uint32_t)len;
			q->site = 0;
			q->tsc = x[k]->time;
			q->w[0] = x[k]->v[0].u;
			at += len;
			continue;
		}

		memset(r, 0, sizeof(*r) + sizeof(struct inj_val));
		r->site = 0;	/* the inject engine's first (only) site: session site 2 */
		r->tsc = x[k]->time;
		r->cpu = (uint32_t)x[k]->cpu;
		r->nvals = 1;
		if (x[k]->v[0].kind == USC_V_STR) {
			size_t sl = strlen(x[k]->v[0].str);

			r->vals[0].kind = INJ_STR;
			r->vals[0].str_off = (uint16_t)len;
			r->vals[0].str_len = (uint16_t)sl;
			memcpy(buf + at + len, x[k]->v[0].str, sl + 1);
			len += sl + 1;
		} else {
			r->vals[0].kind = INJ_INT;
			r->vals[0].val = x[k]->v[0].u;
		}
		len = (len + 7) & ~(size_t)7;
		r->len = (uint32_t)len;
		at += len;
	}
	return at;
}

static void write_file(void)
{
	struct usc_session s;
	struct usc_placement place[3];
	struct session_engine eng[3];
	struct rec_writer *w;
	struct rec_clock_pair clock[2] = {{T0, T0}, {2 * T0, 2 * T0}};
	uint64_t ips[1] = {0x7f0000002000};	/* by the inject engine's own site index */
	struct usc_site_stats st[3] = {{.events = 2, .hits = 2},
				       {.events = 2, .lost = 7, .hits = 9, .lost_wait = 5},
				       {.events = 2, .hits = -1}};
	struct usc_stats stats = {6, 7, st};
	uint8_t ring[512];
	const struct want *inj1[] = {&want[0]}, *inj2[] = {&want[3]};
	struct rec_inject h = {1, 0, PID, TID_INJ, 0, 0};
	size_t n;

	build_session(&s, place, eng);
	assert_int_equal(rec_writer_open(path, "uscope record test", &w), 0);
	assert_int_equal(rec_write_sites(w, s.specs, s.nspecs, s.sites, s.nsites, s.place,
					 (const char *const[]){"tracefs", "bpf", "inject"}), 0);
	assert_int_equal(rec_write_thread(w, PID, TID_INJ, "injthr"), 0);
	assert_int_equal(rec_write_clock(w, clock, 2), 0);
	assert_int_equal(rec_write_image(w, 1, PID, ips, 1), 0);
	assert_int_equal(rec_write_snapshot(w, "SIGUSR1"), 0);
	/* round one: events up to T0 + 300 */
	n = inject_bytes(ring, inj1, 1);
	h.nbytes = (uint32_t)n;
	assert_int_equal(rec_write_inject(w, &h, ring, n, NULL, 0), 0);
	write_event(w, &want[1]);
	write_bpf(w, &want[2]);
	assert_int_equal(rec_write_round(w), 0);
	/* round two: written in another order than their times */
	write_bpf(w, &want[5]);
	write_event(w, &want[4]);
	n = inject_bytes(ring, inj2, 1);
	h.nbytes = (uint32_t)n;
	assert_int_equal(rec_write_inject(w, &h, ring, n, NULL, 0), 0);
	assert_int_equal(rec_write_round(w), 0);
	assert_int_equal(rec_write_stats(w, &stats, 3), 0);
	assert_int_equal(rec_writer_close(w), 0);
}

/* ---- reading ------------------------------------------------------------- */

struct got {
	const struct usc_site *sites;
	size_t n;
	bool check;		/* compare with want[] */
	const unsigned *idx;	/* ... with want[idx[0]], want[idx[1]]... (NULL: in order) */
	size_t nidx;
};

static int on_event(const struct usc_event *ev, void *ctx)
{
	struct got *g = ctx;
	const struct want *x;

	if (!g->check) {
		g->n++;
		return 0;
	}
	assert_true(g->n < (g->idx ? g->nidx : NWANT));
	x = &want[g->idx ? g->idx[g->n] : g->n];
	g->n++;
	assert_int_equal(ev->time_ns, x->time);
	assert_ptr_equal(ev->site, &g->sites[x->site]);
	assert_int_equal(ev->pid, PID);
	assert_int_equal(ev->tid, x->tid);
	assert_int_equal(ev->cpu, x->cpu);
	assert_string_equal(ev->comm, x->comm);
	assert_int_equal(ev->ip, x->ip);
	assert_int_equal(ev->func, x->func);
	assert_int_equal(ev->nvals, x->nvals);
	for (unsigned i = 0; i < x->nvals; i++) {
		assert_int_equal(ev->vals[i].kind, x->v[i].kind);
		if (x->v[i].kind == USC_V_INT)
			assert_int_equal(ev->vals[i].u, x->v[i].u);
		if (x->v[i].kind == USC_V_STR) {
			assert_int_equal(ev->vals[i].len, strlen(x->v[i].str));
			assert_memory_equal(ev->vals[i].str, x->v[i].str, ev->vals[i].len);
		}
	}
	return 0;
}

/* The taken sites, freed as the session frees them. */
static void free_sites(struct usc_site *st, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(st[i].path);
		free(st[i].symbol);
		free(st[i].args);
	}
	free(st);
}

static void test_round_trip(void **state)
{
	struct rec_file *f;
	struct usc_probe_spec *sp;
	struct usc_site *st;
	const struct rec_site_stats *rs;
	struct got g = {0};
	uint64_t bad = 1, events, lost;
	size_t n, ns;

	(void)state;
	write_file();
	assert_int_equal(rec_file_open(path, &f), 0);
	assert_null(rec_file_damage(f));
	assert_string_equal(rec_file_snapshot(f), "SIGUSR1");
	assert_string_equal(rec_file_header(f)->command, "uscope record test");
	sp = rec_file_specs(f, &n);
	assert_int_equal(n, 2);
	assert_string_equal(sp[0].text, specs[0].text);
	assert_true(sp[1].is_return);

	st = rec_file_take_sites(f, &ns);
	assert_int_equal(ns, 3);
	assert_ptr_equal(st[1].spec, &sp[1]);
	assert_string_equal(st[0].label, "handle");
	assert_string_equal(st[2].event, "handle_1");
	assert_string_equal(st[2].path, "/usr/lib/libapp.so");
	assert_string_equal(st[0].symbol, "handle");
	assert_true(st[1].ret_site && st[1].is_return && !st[0].is_return);
	assert_int_equal(st[1].vaddr, 0x1150);
	assert_int_equal(st[0].nargs, 4);
	assert_string_equal(st[0].args[1].name, "path");
	assert_int_equal(st[0].args[1].type, USC_T_STRING);
	assert_int_equal(st[0].args[2].show, USC_SHOW_ENUM);
	assert_int_equal(st[0].args[2].enums->n, 2);
	assert_string_equal(st[0].args[2].enums->v[1].name, "GREEN");
	assert_int_equal(st[0].args[2].enums->v[1].value, 5);
	assert_int_equal(st[0].args[3].group_len, 1);
	assert_true(st[0].args[3].group_first);

	rs = rec_file_stats(f, &events, &lost);
	assert_non_null(rs);
	assert_int_equal(events, 6);
	assert_int_equal(lost, 7);
	assert_int_equal(rs[1].hits, 9);
	assert_int_equal(rs[1].lost, 7);
	assert_int_equal(rs[2].hits, -1);
	assert_non_null(rec_file_lost_wait(f));
	assert_int_equal(rec_file_lost_wait(f)[0], 0);
	assert_int_equal(rec_file_lost_wait(f)[1], 5);
	assert_int_equal(rec_file_lost_wait(f)[2], 0);

	g = (struct got){st, 0, true, NULL, 0};
	assert_int_equal(rec_file_events(f, on_event, &g, &bad), 0);
	assert_int_equal(g.n, NWANT);
	assert_int_equal(bad, 0);
	rec_file_free(f);
	free_sites(st, ns);
}

static uint8_t *slurp(size_t *n)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *b;
	long len;

	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	rewind(fp);
	b = malloc((size_t)len);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)len, fp), (size_t)len);
	fclose(fp);
	*n = (size_t)len;
	return b;
}

static void put(const uint8_t *b, size_t n)
{
	FILE *fp = fopen(cut, "wb");

	assert_non_null(fp);
	assert_int_equal(fwrite(b, 1, n, fp), n);
	fclose(fp);
}

/* Where the damage is: "at byte N: ..." */
static size_t damage_at(const struct rec_file *f)
{
	unsigned long long at;

	assert_int_equal(sscanf(rec_file_damage(f), "at byte %llu: ", &at), 1);
	return (size_t)at;
}

/* The want[] index of each record chunk, in file order (write_file). */
static const unsigned file_order[] = {0, 1, 2, 5, 4, 3};

/* want[] indexes of the records of the chunks that end at or before at,
 * in time order; how many. */
static size_t read_before(const uint8_t *b, size_t size, size_t at, unsigned *idx)
{
	size_t k = 0, n = 0, pos = sizeof(struct rec_header);

	while (pos + sizeof(struct rec_chunk) <= size) {
		const struct rec_chunk *c = (const void *)(b + pos);
		size_t end = pos + sizeof(*c) + c->len;

		if (c->type == REC_INJECT || c->type == REC_BPF || c->type == REC_EVENT) {
			if (end <= at)
				idx[n++] = file_order[k];
			k++;
		}
		pos = end;
	}
	assert_int_equal(k, NWANT);
	/* time order is want[] order */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
			unsigned t = idx[j];

			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	return n;
}

static void test_every_cut(void **state)
{
	size_t size, sites_end;
	uint8_t *b;

	(void)state;
	write_file();
	b = slurp(&size);
	sites_end = sizeof(struct rec_header) + 8 + ((const struct rec_chunk *)(b + 352))->len;
	usc_set_log(on_log, NULL);
	for (size_t len = 0; len <= size; len++) {
		struct rec_file *f = NULL;
		struct got g = {0};
		unsigned idx[NWANT];
		uint64_t bad = 0;
		size_t ns, at;
		int ret;

		put(b, len);
		nerrors = 0;
		ret = rec_file_open(cut, &f);
		if (len < sites_end) {
			/* no probes: nothing to read */
			assert_int_equal(ret, -EINVAL);
			assert_int_equal(nerrors, 1);
			continue;
		}
		assert_int_equal(ret, 0);
		assert_int_equal(nerrors, 0);
		if (len == size) {
			assert_null(rec_file_damage(f));
			at = size;
		} else {
			assert_non_null(rec_file_damage(f));
			at = damage_at(f);
			/* where the last whole chunk ends */
			assert_true(at <= len && at >= sites_end);
		}
		g.sites = rec_file_take_sites(f, &ns);
		g.check = true;
		/* the events read are those of the chunks before the damage,
		 * in time order */
		g.idx = idx;
		g.nidx = read_before(b, size, at, idx);
		assert_int_equal(rec_file_events(f, on_event, &g, &bad), 0);
		assert_int_equal(bad, 0);
		assert_int_equal(g.n, g.nidx);
		if (len == size)
			assert_int_equal(g.n, NWANT);
		rec_file_free(f);
		free_sites((struct usc_site *)g.sites, ns);
	}
	usc_set_log(NULL, NULL);
	free(b);
}

static void test_every_byte(void **state)
{
	size_t size;
	uint8_t *b;

	(void)state;
	write_file();
	b = slurp(&size);
	usc_set_log(on_log, NULL);
	for (size_t at = 0; at < size; at++) {
		for (int k = 0; k < 2; k++) {
			uint8_t old = b[at];
			struct rec_file *f = NULL;
			struct got g = {0};
			uint64_t bad = 0;
			int ret;

			b[at] = k ? 0xff : (uint8_t)(old ^ 0x01);
			put(b, size);
			b[at] = old;
			nerrors = 0;
			ret = rec_file_open(cut, &f);
			assert_true(ret == 0 || ret == -EINVAL);
			assert_int_equal(nerrors, ret ? 1 : 0);
			if (ret)
				continue;
			/* whatever it reads is read without a fault (ASan) */
			assert_int_equal(rec_file_events(f, on_event, &g, &bad), 0);
			rec_file_free(f);
		}
	}
	usc_set_log(NULL, NULL);
	free(b);
}

/* ---- REC_STATS as older and newer versions write it ----------------------- */

/* The file of write_file with its REC_STATS chunk's counts added since
 * (format.h) made nwords words a site: 0, as before there were any; 2, as a
 * later version with one word more (its value 1000 + site). */
static void put_stats_words(const uint8_t *b, size_t size, uint64_t nwords)
{
	const size_t nsites = 3, base = 24 + nsites * sizeof(struct rec_site_stats);
	size_t at = sizeof(struct rec_header);
	uint8_t *out = malloc(size + 256);
	struct rec_chunk c;

	assert_non_null(out);
	for (;;) {
		assert_true(at + 8 <= size);
		memcpy(&c, b + at, sizeof(c));
		if (c.type == REC_STATS)
			break;
		at += 8 + c.len;
	}
	assert_int_equal(c.len, base + 8 + nsites * 8);	/* as this version writes it */
	memcpy(out, b, at + 8 + base);
	size_t o = at + 8 + base;
	uint64_t lw[3];

	memcpy(lw, b + at + 8 + base + 8, sizeof(lw));
	if (nwords) {
		memcpy(out + o, &nwords, 8);
		o += 8;
		for (size_t i = 0; i < nsites; i++) {
			uint64_t more = 1000 + i;

			memcpy(out + o, &lw[i], 8);
			memcpy(out + o + 8, &more, 8);
			o += 16;
		}
	}
	c.len = (uint32_t)(o - at - 8);
	memcpy(out + at, &c, sizeof(c));
	memcpy(out + o, b + at + 8 + base + 8 + sizeof(lw), size - (at + 8 + base + 8 + sizeof(lw)));
	o += size - (at + 8 + base + 8 + sizeof(lw));
	put(out, o);
	free(out);
}

static void test_stats_versions(void **state)
{
	size_t size;
	uint8_t *b;

	(void)state;
	write_file();
	b = slurp(&size);
	for (uint64_t nwords = 0; nwords <= 2; nwords += 2) {
		struct rec_file *f = NULL;
		const struct rec_site_stats *rs;
		uint64_t events, lost;

		put_stats_words(b, size, nwords);
		assert_int_equal(rec_file_open(cut, &f), 0);
		assert_null(rec_file_damage(f));
		rs = rec_file_stats(f, &events, &lost);
		assert_non_null(rs);
		assert_int_equal(lost, 7);
		assert_int_equal(rs[1].lost, 7);
		assert_int_equal(rs[1].hits, 9);
		if (!nwords) {
			assert_null(rec_file_lost_wait(f));	/* an older file: none */
		} else {
			assert_non_null(rec_file_lost_wait(f));
			assert_int_equal(rec_file_lost_wait(f)[1], 5);
			assert_int_equal(rec_file_lost_wait(f)[2], 0);
		}
		rec_file_free(f);
	}
	free(b);
}

/* ---- a chunk cut short: its whole records ------------------------------ */

#define NRING 8

/* A recording whose events are all in one chunk: NRING inject records in
 * one ring's bytes (events: NRING REC_EVENT payloads merged into one
 * chunk, as the format allows). *at: the chunk's offset. */
static void write_one_chunk(bool events, size_t *at)
{
	struct usc_session s;
	struct usc_placement place[3];
	struct session_engine eng[3];
	struct rec_writer *w;
	struct rec_clock_pair clock[2] = {{T0, T0}, {2 * T0, 2 * T0}};
	uint64_t ips[1] = {0x7f0000002000};
	struct want x[NRING];
	const struct want *px[NRING];
	uint8_t ring[NRING * 64];
	struct rec_inject h = {1, 0, PID, TID_INJ, 0, 0};
	size_t n;

	for (unsigned k = 0; k < NRING; k++) {
		x[k] = want[events ? 1 : 0];
		x[k].time = T0 + 10 * k;
		x[k].v[0].u = k;
		px[k] = &x[k];
	}
	build_session(&s, place, eng);
	assert_int_equal(rec_writer_open(path, "uscope record test", &w), 0);
	assert_int_equal(rec_write_sites(w, s.specs, s.nspecs, s.sites, s.nsites, s.place,
					 (const char *const[]){"tracefs", "bpf", "inject"}), 0);
	assert_int_equal(rec_write_thread(w, PID, TID_INJ, "injthr"), 0);
	assert_int_equal(rec_write_clock(w, clock, 2), 0);
	assert_int_equal(rec_write_image(w, 1, PID, ips, 1), 0);
	assert_int_equal(rec_writer_flush(w), 0);
	*at = (size_t)rec_written(w);
	if (events) {
		for (unsigned k = 0; k < NRING; k++)
			write_event(w, &x[k]);
	} else {
		n = inject_bytes(ring, px, NRING);
		h.nbytes = (uint32_t)n;
		assert_int_equal(rec_write_inject(w, &h, ring, n, NULL, 0), 0);
	}
	assert_int_equal(rec_write_round(w), 0);
	assert_int_equal(rec_writer_close(w), 0);
	if (events) {
		/* the NRING event chunks, one chunk */
		size_t size, pos = *at, out = *at + sizeof(struct rec_chunk);
		uint8_t *b = slurp(&size);
		struct rec_chunk c = {REC_EVENT, 0};

		for (unsigned k = 0; k < NRING; k++) {
			struct rec_chunk ck;

			memcpy(&ck, b + pos, sizeof(ck));
			assert_int_equal(ck.type, REC_EVENT);
			memmove(b + out, b + pos + sizeof(ck), ck.len);
			out += ck.len;
			c.len += ck.len;
			pos += sizeof(ck) + ck.len;
		}
		memcpy(b + *at, &c, sizeof(c));
		memmove(b + out, b + pos, size - pos);
		size -= pos - out;
		FILE *fp = fopen(path, "wb");

		assert_non_null(fp);
		assert_int_equal(fwrite(b, 1, size, fp), size);
		fclose(fp);
		free(b);
	}
}

static int on_ring_event(const struct usc_event *ev, void *ctx)
{
	size_t *n = ctx;

	assert_int_equal(ev->time_ns, T0 + 10 * *n);
	assert_int_equal(ev->vals[0].kind, USC_V_INT);
	assert_int_equal(ev->vals[0].u, *n);
	++*n;
	return 0;
}

/* Cut anywhere in the chunk: every record that ends before the cut reads,
 * in order, and none is counted as bad (the damage is said once). */
static void cut_one_chunk(bool events)
{
	size_t size, at, payload, first = 0, end[NRING];
	uint8_t *b;

	write_one_chunk(events, &at);
	b = slurp(&size);
	payload = at + sizeof(struct rec_chunk) + (events ? 0 : sizeof(struct rec_inject));
	/* where each record ends (a ring's are of two forms, short and full) */
	for (unsigned k = 0; k < NRING; k++) {
		size_t from = k ? end[k - 1] : payload;

		end[k] = from + (events ? ((const struct rec_event *)(b + from))->len
					: inj_rec_len(*(const uint32_t *)(b + from)));
	}
	usc_set_log(on_log, NULL);
	for (size_t len = at; len <= size; len++) {
		struct rec_file *f = NULL;
		uint64_t bad = 1;
		size_t n = 0, ns, whole;
		struct usc_site *st;

		put(b, len);
		nerrors = 0;
		assert_int_equal(rec_file_open(cut, &f), 0);
		assert_int_equal(nerrors, 0);
		st = rec_file_take_sites(f, &ns);
		assert_int_equal(rec_file_events(f, on_ring_event, &n, &bad), 0);
		assert_int_equal(bad, 0);
		for (whole = 0; whole < NRING && end[whole] <= len; whole++)
			;
		assert_int_equal(n, whole);
		first += n == 1 && !first ? len : 0;
		rec_file_free(f);
		free_sites(st, ns);
	}
	/* the first record reads as soon as its last byte is there */
	assert_int_equal(first, end[0]);
	usc_set_log(NULL, NULL);
	free(b);
}

static void test_cut_ring(void **state)
{
	(void)state;
	cut_one_chunk(false);
}

static void test_cut_events(void **state)
{
	(void)state;
	cut_one_chunk(true);
}

/* The short record (struct inj_rec_short) read back: its words in order,
 * the return address first at a return site, an argument without a word a
 * fault; one whose length word is not what the agent writes refused. */
static void test_short_records(void **state)
{
	struct usc_site entry = {.nargs = 2, .vaddr = 0x1000, .func_vaddr = 0x1000};
	struct usc_site ret = {.nargs = 2, .ret_site = true, .vaddr = 0x1010, .func_vaddr = 0x1000};
	struct usc_value vals[INJ_MAX_ARGS];
	struct usc_event ev;
	uint64_t buf[8] = {0}, tsc;
	struct inj_rec_short *q = (void *)buf;
	uint32_t site, len;

	(void)state;
	q->len = INJ_REC_SHORT | 37u << INJ_REC_SHORT_CPU | 32;
	q->site = 5;
	q->tsc = 12345;
	q->w[0] = 7;
	q->w[1] = (uint64_t)-2;
	assert_int_equal(inject_raw_peek(q, 32, &site, &tsc, &len), 0);
	assert_int_equal(site, 5);
	assert_int_equal(tsc, 12345);
	assert_int_equal(len, 32);
	assert_int_equal(inject_raw_event(q, 32, &entry, 0x5000, 99, 10, 11, "c", vals, &ev), 0);
	assert_int_equal(ev.cpu, 37);
	assert_int_equal(ev.ip, 0x5000);
	assert_int_equal(ev.nvals, 2);
	assert_int_equal(vals[0].kind, USC_V_INT);
	assert_int_equal(vals[0].u, 7);
	assert_int_equal(vals[1].kind, USC_V_INT);
	assert_int_equal(vals[1].u, (uint64_t)-2);
	/* at a return: where it returns to, then one argument; the second has
	 * no word */
	assert_int_equal(inject_raw_event(q, 32, &ret, 0x5010, 99, 10, 11, "c", vals, &ev), 0);
	assert_int_equal(ev.ip, 7);
	assert_int_equal(ev.func, 0x5000);
	assert_int_equal(vals[0].kind, USC_V_INT);
	assert_int_equal(vals[0].u, (uint64_t)-2);
	assert_int_equal(vals[1].kind, USC_V_FAULT);
	/* no word at all: a record of 16 bytes */
	q->len = INJ_REC_SHORT | 16;
	assert_int_equal(inject_raw_event(q, 16, &entry, 0x5000, 99, 10, 11, "c", vals, &ev), 0);
	assert_int_equal(ev.cpu, 0);
	assert_int_equal(vals[0].kind, USC_V_FAULT);
	assert_int_equal(vals[1].kind, USC_V_FAULT);
	/* refused: longer than two words, shorter than the header, not
	 * 8-aligned, past what is readable, stray bits */
	q->len = INJ_REC_SHORT | 40;
	assert_int_equal(inject_raw_peek(q, sizeof(buf), &site, &tsc, &len), -EINVAL);
	q->len = INJ_REC_SHORT | 8;
	assert_int_equal(inject_raw_peek(q, sizeof(buf), &site, &tsc, &len), -EINVAL);
	q->len = INJ_REC_SHORT | 20;
	assert_int_equal(inject_raw_peek(q, sizeof(buf), &site, &tsc, &len), -EINVAL);
	q->len = INJ_REC_SHORT | 32;
	assert_int_equal(inject_raw_peek(q, 24, &site, &tsc, &len), -EINVAL);
	q->len = INJ_REC_SHORT | 1u << 24 | 24;
	assert_int_equal(inject_raw_peek(q, sizeof(buf), &site, &tsc, &len), -EINVAL);
	q->len = INJ_REC_SHORT | INJ_REC_PAD | 24;
	assert_int_equal(inject_raw_peek(q, sizeof(buf), &site, &tsc, &len), -EINVAL);
	/* the length the agent's flight recorder steps by */
	assert_int_equal(inj_rec_len(INJ_REC_SHORT | 5u << INJ_REC_SHORT_CPU | 24), 24);
	assert_int_equal(inj_rec_len(INJ_REC_PAD | 4096), 4096);
	assert_int_equal(inj_rec_len(64), 64);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/rec.usc", dir);
	snprintf(cut, sizeof(cut), "%s/cut.usc", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	unlink(cut);
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_every_cut),
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_stats_versions),
		cmocka_unit_test(test_cut_ring),
		cmocka_unit_test(test_cut_events),
		cmocka_unit_test(test_short_records),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
