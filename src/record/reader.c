/* Reading a recording: see record.h and format.h. The file is mapped; a
 * first pass reads its metadata (probes, sites, threads, images, clock,
 * modules, maps, counts) and finds where it ends (its END, or the first
 * damage); events are then read chunk by chunk, each engine's records by
 * the engine's own decoder (engine/raw.h), and handed out in time order a
 * round at a time (a round ends when the recorder had drained every
 * engine: what comes after it is no older than the round before). Nothing
 * read is trusted: every length is checked. */
#include "record/reader.h"
#include "core/grow.h"
#include "objfile/modules.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/tsc.h"
#include "engine/raw.h"
#include "python/frame.h"
#include "python/names.h"
#include "record/buf.h"

struct rec_image_info {
	uint32_t image;
	int32_t pid;
	const uint64_t *ips;	/* into the mapping */
	uint32_t nips;
};

struct rec_thread_info {
	int32_t pid, tid;
	char comm[17];
};

struct rec_file {
	const uint8_t *map;
	size_t size;
	size_t end;			/* readable up to here */
	char damage[256];		/* "" when whole */
	/* the chunk at end, cut short, whose whole records are still read (a
	 * thread's ring bytes, events): the bytes of it there are (0: none) */
	size_t cut_len;
	bool clean_end;			/* an END chunk */
	struct rec_header hdr;
	struct usc_probe_spec *specs;
	size_t nspecs;
	struct usc_site *sites;		/* handed out once (rec_file_take_sites) */
	size_t nsites;
	bool sites_taken;
	char **engine_of;		/* per site: the engine that recorded it, or NULL */
	uint32_t *inject_site;		/* the inject engine's site k: the session's index */
	size_t ninject;
	struct usc_enum **enums;	/* owned, for the sites' args */
	size_t nenums;
	struct rec_image_info *images;
	size_t nimages;
	struct rec_thread_info *threads;
	size_t nthreads;
	struct tsc_clock *clock;
	struct rec_site_stats *stats;	/* nsites, or NULL */
	uint64_t *lost_wait;		/* nsites, or NULL (an older file) */
	uint64_t total_events, total_lost;
	char *snapshot;			/* why the flight recorder wrote, or NULL */
	/* REC_MAPS chunks, in file order: (offset of the payload, length) */
	size_t (*maps_at)[2];
	size_t nmaps;
	/* REC_PYCODE chunks, the same */
	size_t (*pycodes_at)[2];
	size_t npycodes;
	/* the sites in the bpf engine's order, for its decoder */
	const struct usc_site **bpf_sites;
	size_t nbpf;
};

__attribute__((format(printf, 3, 4)))
static int damaged(struct rec_file *f, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!f->damage[0]) {
		n = snprintf(f->damage, sizeof(f->damage), "at byte %zu: ", at);
		va_start(ap, fmt);
		vsnprintf(f->damage + n, sizeof(f->damage) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	f->end = at;
	return 0;
}

/* ---- metadata ----------------------------------------------------------- */

static struct usc_enum *get_enum(struct rec_file *f, struct rget *g, uint32_t n, bool flags)
{
	struct usc_enum *e, **v;
	struct usc_enumerator *ev;

	/* each enumerator takes 12 bytes at least (value, name's length) */
	if (n > 65536 || n > (g->len - g->at) / 12) {
		g->bad = true;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	ev = calloc(n + 1, sizeof(*ev));
	v = realloc(f->enums, (f->nenums + 1) * sizeof(*v));
	if (v)
		f->enums = v;
	if (!e || !ev || !v) {
		free(e);
		free(ev);
		g->bad = true;
		return NULL;
	}
	f->enums[f->nenums++] = e;
	e->n = n;
	e->flags = flags;
	e->v = ev;
	for (uint32_t k = 0; k < n && !g->bad; k++) {
		ev[k].value = rget_u64(g);
		ev[k].name = rget_str(g, NULL);
		if (!ev[k].name)
			g->bad = true;
	}
	return e;
}

static void get_arg(struct rec_file *f, struct rget *g, struct usc_fetcharg *a)
{
	char *name = rget_str(g, NULL);
	uint8_t fl;
	uint32_t ne;
	bool eflags;

	memset(a, 0, sizeof(*a));
	if (name)
		snprintf(a->name, sizeof(a->name), "%s", name);
	free(name);
	a->type = rget_u8(g);
	a->show = rget_u8(g);
	a->group_len = rget_u8(g);
	fl = rget_u8(g);
	a->named = fl & 1;
	a->group_first = fl & 2;
	a->unavailable = fl & 4;
	a->optimized_out = fl & 8;
	a->hidden = fl & 16;
	ne = rget_u32(g);
	eflags = rget_u8(g);
	if (ne)
		a->enums = get_enum(f, g, ne, eflags);
	a->insn[0].op = rget_u8(g);
	a->insn[1].op = FOP_END;
	a->ninsn = 2;
	/* output shows a member of a struct shown whole past "GROUP__" in
	 * its name */
	if ((unsigned)a->type >= USC_T_NR ||
	    (a->show > USC_SHOW_ARRAY && a->show != USC_SHOW_PYFUNC && a->show != USC_SHOW_PYVAL) ||
	    (a->show == USC_SHOW_ENUM && !a->enums) ||
	    (a->group_len && (size_t)a->group_len + 2 > strlen(a->name)))
		g->bad = true;
}

static int get_sites(struct rec_file *f, struct rget *g)
{
	uint32_t ns = rget_u32(g), n;

	/* a count is no larger than the bytes that follow can hold (a probe
	 * takes 8 at least, a site 60): a few damaged bytes must not have
	 * the reader allocate gigabytes */
	if (g->bad || ns > 100000 || ns > (g->len - g->at) / 8)
		return -EINVAL;
	f->specs = calloc(ns + 1, sizeof(*f->specs));
	if (!f->specs)
		return -ENOMEM;
	f->nspecs = ns;
	for (uint32_t i = 0; i < ns && !g->bad; i++) {
		struct usc_probe_spec *sp = &f->specs[i];
		char *text = rget_str(g, NULL);

		snprintf(sp->text, sizeof(sp->text), "%s", text ? text : "");
		free(text);
		sp->is_return = rget_u8(g);
		sp->loc_kind = rget_u8(g);
		sp->has_offset = rget_u8(g);
		sp->is_glob = rget_u8(g);
		if (sp->loc_kind > USC_LOC_PYTHON)
			g->bad = true;
	}
	n = rget_u32(g);
	if (g->bad || n > 1000000 || n > (g->len - g->at) / 60)
		return -EINVAL;
	f->sites = calloc(n + 1, sizeof(*f->sites));
	f->engine_of = calloc(n + 1, sizeof(*f->engine_of));
	if (!f->sites || !f->engine_of)
		return -ENOMEM;
	f->nsites = n;
	for (uint32_t i = 0; i < n && !g->bad; i++) {
		struct usc_site *s = &f->sites[i];
		uint32_t fl, nargs;
		char *label, *event;

		s->probe = rget_u32(g);
		fl = rget_u32(g);
		s->group = (int32_t)rget_u32(g);
		s->vaddr = rget_u64(g);
		s->func_vaddr = rget_u64(g);
		s->offset = rget_u64(g);
		s->path = rget_str(g, NULL);
		s->symbol = rget_str(g, NULL);
		label = rget_str(g, NULL);
		event = rget_str(g, NULL);
		snprintf(s->label, sizeof(s->label), "%s", label ? label : "");
		snprintf(s->event, sizeof(s->event), "%s", event ? event : "");
		free(label);
		free(event);
		s->is_return = fl & 1;
		s->ret_site = fl & 2;
		s->tail_call = fl & 4;
		s->hidden = fl & 8;
		s->cont = fl & 16;
		s->inlined = fl & 32;
		s->python = fl & 128;
		s->py_hook = fl & 256;
		s->py_final = fl & 512;
		s->agg_func = -1;
		s->filter_in_place = true;
		nargs = rget_u32(g);
		if (s->probe >= ns || nargs > USC_MAX_ARGS) {
			g->bad = true;
			break;
		}
		s->spec = &f->specs[s->probe];
		s->args = calloc(nargs + 1, sizeof(*s->args));
		if (!s->args)
			return -ENOMEM;
		s->nargs = nargs;
		for (uint32_t a = 0; a < nargs && !g->bad; a++)
			get_arg(f, g, &s->args[a]);
		f->engine_of[i] = rget_str(g, NULL);
		if (!s->path)
			s->path = strdup("");
	}
	return g->bad ? -EINVAL : 0;
}

/* The probes and sites read so far, forgotten (the enums stay f's). */
static void drop_sites(struct rec_file *f)
{
	for (size_t i = 0; f->sites && i < f->nsites; i++) {
		free(f->sites[i].path);
		free(f->sites[i].symbol);
		free(f->sites[i].args);
	}
	for (size_t i = 0; f->engine_of && i < f->nsites; i++)
		free(f->engine_of[i]);
	free(f->sites);
	free(f->engine_of);
	free(f->specs);
	f->sites = NULL;
	f->engine_of = NULL;
	f->specs = NULL;
	f->nsites = f->nspecs = 0;
}

/* The one SITES chunk: read whole, or not at all (a site cut short has
 * no probe, no arguments: nothing could use it). */
static int read_sites(struct rec_file *f, struct rget *g)
{
	int ret;

	if (f->specs)
		return -EINVAL;
	ret = get_sites(f, g);
	if (ret)
		drop_sites(f);
	return ret;
}

static int read_image(struct rec_file *f, const uint8_t *p, size_t len)
{
	const struct rec_image *h = (const void *)p;
	struct rec_image_info *v;

	if (len < sizeof(*h) || (len - sizeof(*h)) / 8 < h->nsites)
		return -EINVAL;
	v = realloc(f->images, (f->nimages + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	f->images = v;
	v[f->nimages++] = (struct rec_image_info){h->image, h->pid, (const uint64_t *)(h + 1),
						  h->nsites};
	return 0;
}

static int read_thread(struct rec_file *f, const uint8_t *p, size_t len)
{
	const struct rec_thread *t = (const void *)p;
	struct rec_thread_info *v;

	if (len < sizeof(*t))
		return -EINVAL;
	for (size_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].tid == t->tid) {
			f->threads[i].pid = t->pid;
			memcpy(f->threads[i].comm, t->comm, 16);
			return 0;
		}
	v = realloc(f->threads, (f->nthreads + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	f->threads = v;
	v = &v[f->nthreads++];
	v->pid = t->pid;
	v->tid = t->tid;
	memcpy(v->comm, t->comm, 16);
	v->comm[16] = 0;
	return 0;
}

static void read_clock(struct rec_file *f, const uint8_t *p, size_t len)
{
	for (size_t k = 0; k + sizeof(struct rec_clock_pair) <= len; k += sizeof(struct rec_clock_pair)) {
		const struct rec_clock_pair *c = (const void *)(p + k);

		tsc_add(f->clock, c->tsc, c->ns);
	}
}

static int read_stats(struct rec_file *f, const uint8_t *p, size_t len)
{
	struct rget g = {p, len, 0, false};
	uint64_t n = rget_u64(&g);

	f->total_events = rget_u64(&g);
	f->total_lost = rget_u64(&g);
	if (g.bad || n != f->nsites || (len - g.at) / sizeof(struct rec_site_stats) < n)
		return -EINVAL;
	free(f->stats);
	free(f->lost_wait);
	f->lost_wait = NULL;
	f->stats = calloc(n + 1, sizeof(*f->stats));
	if (!f->stats)
		return -ENOMEM;
	memcpy(f->stats, p + g.at, n * sizeof(*f->stats));
	/* the words added since, when the file has them (format.h) */
	g.at += n * sizeof(*f->stats);
	uint64_t nwords = rget_u64(&g);

	if (g.bad || nwords <= REC_STATS_LOST_WAIT || (len - g.at) / 8 / nwords < n)
		return 0;
	f->lost_wait = calloc(n + 1, sizeof(*f->lost_wait));
	if (!f->lost_wait)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		memcpy(&f->lost_wait[i], p + g.at + 8 * (i * nwords + REC_STATS_LOST_WAIT), 8);
	return 0;
}

/* Give back the pages of the file more than 8 MiB behind at (a read-only
 * private mapping refaults any still wanted), every 16 MiB: memory follows
 * the open calls and the sinks' tables, not the file's size. *dropped: how
 * far they were given back. */
static void give_back(const struct rec_file *f, size_t at, size_t *dropped)
{
	size_t upto;

	if (at - *dropped < (16u << 20))
		return;
	upto = (at - (8u << 20)) & ~(size_t)4095;
	madvise((void *)(f->map + *dropped), upto - *dropped, MADV_DONTNEED);
	*dropped = upto;
}

/* Pass one: the metadata, and where the readable part ends. */
/* A chunk to read later, in file order: (offset of its payload, length). */
static int keep_at(size_t (**at)[2], size_t *n, size_t off, size_t len)
{
	size_t (*v)[2] = realloc(*at, (*n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	*at = v;
	v[*n][0] = off;
	v[*n][1] = len;
	(*n)++;
	return 0;
}

static int scan(struct rec_file *f)
{
	size_t at = sizeof(struct rec_header), dropped = 0;

	f->end = f->size;
	while (at < f->end) {
		/* only the chunks' headers are read here */
		give_back(f, at, &dropped);
		const struct rec_chunk *c = (const void *)(f->map + at);
		const uint8_t *p = f->map + at + sizeof(*c);
		struct rget g;
		int ret = 0;

		if (f->end - at < sizeof(*c))
			return damaged(f, at, "the file ends in a chunk's header (cut short: a "
					   "crash, a short copy)");
		if (c->len > REC_CHUNK_MAX || (c->len & 7))
			return damaged(f, at, "a damaged chunk header (type %u, length %u)",
				       c->type, c->len);
		if (c->len > f->end - at - sizeof(*c)) {
			/* records are whole in their chunk: those before the cut read */
			if (f->specs && (c->type == REC_INJECT || c->type == REC_EVENT))
				f->cut_len = f->end - at - sizeof(*c);
			return damaged(f, at, "a chunk of %u bytes is cut short, the file ends at "
				       "byte %zu (a crash, a short copy)", c->len, f->end);
		}
		g = (struct rget){p, c->len, 0, false};
		switch (c->type) {
		case REC_SITES:
			ret = read_sites(f, &g);
			break;
		case REC_IMAGE:
			ret = read_image(f, p, c->len);
			break;
		case REC_THREAD:
			ret = read_thread(f, p, c->len);
			break;
		case REC_CLOCK:
			read_clock(f, p, c->len);
			break;
		case REC_STATS:
			ret = f->specs ? read_stats(f, p, c->len) : -EINVAL;
			break;
		case REC_SNAPSHOT: {
			/* each time it wrote, and why: "SIGUSR1, then the end of the run" */
			char *why = rget_str(&g, NULL), *both = NULL;

			if (why && f->snapshot && asprintf(&both, "%s, then %s", f->snapshot, why) > 0) {
				free(why);
				why = both;
			}
			if (why) {
				free(f->snapshot);
				f->snapshot = why;
			}
			break;
		}
		case REC_MAPS:
			ret = keep_at(&f->maps_at, &f->nmaps, (size_t)(p - f->map), c->len);
			break;
		case REC_PYCODE:
			ret = keep_at(&f->pycodes_at, &f->npycodes, (size_t)(p - f->map), c->len);
			break;
		case REC_END:
			f->clean_end = true;
			f->end = at + sizeof(*c);
			return 0;
		default:
			break;	/* records, and what this reader does not know */
		}
		if (ret == -ENOMEM)
			return ret;
		if (ret)
			return damaged(f, at, "a chunk of type %u that does not read as one",
				       c->type);
		if (!f->specs && c->type != REC_SITES)
			return damaged(f, at, "a chunk of type %u before the probes", c->type);
		at += sizeof(*c) + c->len;
	}
	if (!f->clean_end)
		damaged(f, at, "the recording has no end (cut short: a crash, a short copy)");
	return 0;
}

int rec_file_open(const char *path, struct rec_file **out)
{
	struct rec_file *f = calloc(1, sizeof(*f));
	struct stat st;
	int fd, ret;

	*out = NULL;
	if (!f || !(f->clock = calloc(1, sizeof(*f->clock)))) {
		free(f);
		log_error("out of memory");
		return -ENOMEM;
	}
	f->clock->unbounded = true;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		log_error("cannot read %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		rec_file_free(f);
		return ret;
	}
	f->size = (size_t)st.st_size;
	if (!S_ISREG(st.st_mode) || f->size < sizeof(struct rec_header)) {
		log_error("%s is not a uscope recording (%s)", path,
			  !S_ISREG(st.st_mode) ? "not a file" : !f->size ? "empty" : "too short");
		close(fd);
		rec_file_free(f);
		return -EINVAL;
	}
	f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f->map == MAP_FAILED) {
		ret = -errno;
		f->map = NULL;
		log_error("cannot read %s: %s", path, strerror(-ret));
		rec_file_free(f);
		return ret;
	}
	memcpy(&f->hdr, f->map, sizeof(f->hdr));
	if (memcmp(f->hdr.magic, REC_MAGIC, 8)) {
		log_error("%s is not a uscope recording", path);
		rec_file_free(f);
		return -EINVAL;
	}
	if (f->hdr.version < REC_VERSION_MIN || f->hdr.version > REC_VERSION ||
	    f->hdr.header_len != sizeof(struct rec_header)) {
		log_error("%s is a recording of version %u; this uscope reads versions %u to %u",
			  path, f->hdr.version, REC_VERSION_MIN, REC_VERSION);
		rec_file_free(f);
		return -EINVAL;
	}
	f->hdr.host[sizeof(f->hdr.host) - 1] = 0;
	f->hdr.command[sizeof(f->hdr.command) - 1] = 0;
	ret = scan(f);
	/* no site: nothing to read (and a session with no site to give its
	 * source would wait for it forever) */
	if (!ret && (!f->specs || !f->nsites)) {
		log_error("%s: no probes in the recording (%s)", path,
			  f->damage[0] ? f->damage : f->specs ? "not one site" : "empty");
		ret = -EINVAL;
	}
	if (ret) {
		if (ret == -ENOMEM)
			log_error("out of memory");
		rec_file_free(f);
		return ret;
	}
	/* the bpf engine's sites, in its order: every site it recorded */
	f->bpf_sites = calloc(f->nsites + 1, sizeof(*f->bpf_sites));
	if (!f->bpf_sites) {
		rec_file_free(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->nsites; i++)
		if (f->engine_of[i] && !strcmp(f->engine_of[i], "bpf"))
			f->bpf_sites[f->nbpf++] = &f->sites[i];
	/* the inject engine's too: its records number its own sites */
	f->inject_site = calloc(f->nsites + 1, sizeof(*f->inject_site));
	if (!f->inject_site) {
		rec_file_free(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->nsites; i++)
		if (f->engine_of[i] && !strcmp(f->engine_of[i], "inject"))
			f->inject_site[f->ninject++] = (uint32_t)i;
	*out = f;
	return 0;
}

void rec_file_free(struct rec_file *f)
{
	if (!f)
		return;
	if (f->map)
		munmap((void *)f->map, f->size);
	if (f->sites_taken)
		f->sites = NULL;	/* the session's now */
	drop_sites(f);
	free(f->inject_site);
	free(f->maps_at);
	free(f->pycodes_at);
	for (size_t i = 0; i < f->nenums; i++) {
		for (unsigned k = 0; k < f->enums[i]->n; k++)
			free((char *)f->enums[i]->v[k].name);
		free((void *)f->enums[i]->v);
		free(f->enums[i]);
	}
	free(f->enums);
	free(f->images);
	free(f->threads);
	tsc_free(f->clock);
	free(f->stats);
	free(f->lost_wait);
	free(f->snapshot);
	free(f->bpf_sites);
	free(f);
}

struct usc_probe_spec *rec_file_specs(struct rec_file *f, size_t *n)
{
	*n = f->nspecs;
	return f->specs;
}

struct usc_site *rec_file_take_sites(struct rec_file *f, size_t *n)
{
	*n = f->nsites;
	f->sites_taken = true;
	return f->sites;
}

const char *rec_file_damage(const struct rec_file *f)
{
	return f->damage[0] ? f->damage : NULL;
}

const char *rec_file_snapshot(const struct rec_file *f)
{
	return f->snapshot;
}

const struct rec_header *rec_file_header(const struct rec_file *f)
{
	return &f->hdr;
}

const struct rec_site_stats *rec_file_stats(const struct rec_file *f, uint64_t *events,
					    uint64_t *lost)
{
	*events = f->total_events;
	*lost = f->total_lost;
	return f->stats;
}

const uint64_t *rec_file_lost_wait(const struct rec_file *f)
{
	return f->stats ? f->lost_wait : NULL;
}

/* ---- events ------------------------------------------------------------- */

enum ref_kind { REF_INJECT, REF_BPF, REF_EVENT };

/* A record found, not decoded yet. */
struct ref {
	uint64_t time;
	const uint8_t *p;
	uint32_t len;
	uint8_t kind;
	const struct rec_inject *inj;	/* REF_INJECT: its chunk's header */
	uint64_t seq;			/* file order, for equal times */
};

struct events {
	struct rec_file *f;
	usc_event_fn fn;
	void *ctx;
	struct ref *refs;
	size_t n, cap;
	uint64_t seq;
	uint64_t last_round_max, round_max;
	uint64_t delivered, bad;
	int stop;
	struct usc_value vals[USC_MAX_ARGS];
	char comm[72];		/* the writer keeps 64 bytes of a comm (bpf: 17) */
};

static int push_ref(struct events *e, struct ref r)
{
	if (core_reserve(e->refs, e->cap, e->n + 1, 4096))
		return -ENOMEM;
	r.seq = e->seq++;
	e->refs[e->n++] = r;
	if (r.time > e->round_max)
		e->round_max = r.time;
	return 0;
}

static const struct rec_image_info *image_of(const struct rec_file *f, uint32_t image)
{
	for (size_t i = f->nimages; i-- > 0;)
		if (f->images[i].image == image)
			return &f->images[i];
	return NULL;
}

static const char *comm_of(const struct rec_file *f, int32_t tid)
{
	for (size_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].tid == tid)
			return f->threads[i].comm;
	return "";
}

/* A chunk's records into refs: its len bytes at p (cut: the chunk is cut
 * short there, and only its whole records are read). */
static int refs_of_chunk(struct events *e, uint32_t type, const uint8_t *p, size_t len, bool cut)
{
	struct rec_file *f = e->f;
	int ret = 0;

	switch (type) {
	case REC_INJECT: {
		const struct rec_inject *h = (const void *)p;
		const uint8_t *r = p + sizeof(*h);
		size_t left;

		if (len < sizeof(*h) || (h->nbytes > len - sizeof(*h) && !cut)) {
			e->bad += !cut;	/* cut: in its header */
			return 0;
		}
		left = h->nbytes < len - sizeof(*h) ? h->nbytes : len - sizeof(*h);
		while (left && !ret) {
			uint32_t site, rlen;
			uint64_t tsc;
			int kind = inject_raw_peek(r, left, &site, &tsc, &rlen);

			if (kind < 0) {
				e->bad += !cut;	/* cut: the record cut short */
				break;
			}
			if (kind == 0 && site < f->ninject)
				ret = push_ref(e, (struct ref){tsc_ns(f->clock, tsc), r, rlen,
							       REF_INJECT, h, 0});
			else if (kind == 0)
				e->bad++;
			r += rlen;
			left -= rlen;
		}
		return ret;
	}
	case REC_BPF: {
		uint32_t n, site;
		uint64_t ts;

		if (len < 8) {
			e->bad++;
			return 0;
		}
		n = *(const uint32_t *)p;
		if (n > len - 8 || bpf_raw_peek(p + 8, n, &site, &ts)) {
			e->bad++;
			return 0;
		}
		return push_ref(e, (struct ref){ts, p + 8, n, REF_BPF, NULL, 0});
	}
	case REC_EVENT:
		/* events one after the other, each 8-aligned */
		while (len && !ret) {
			const struct rec_event *ev = (const void *)p;

			if (len < sizeof(*ev) || ev->len > len) {
				e->bad += !cut;	/* cut: the record cut short */
				break;
			}
			if (ev->len < sizeof(*ev) || (ev->len & 7) || ev->site >= f->nsites) {
				e->bad++;
				break;
			}
			ret = push_ref(e, (struct ref){ev->time_ns, p, ev->len, REF_EVENT, NULL, 0});
			p += ev->len;
			len -= ev->len;
		}
		return ret;
	default:
		return 0;
	}
}

static int cmp_ref(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int decode(struct events *e, const struct ref *r, struct usc_event *ev)
{
	struct rec_file *f = e->f;

	switch (r->kind) {
	case REF_INJECT: {
		const struct rec_image_info *im = image_of(f, r->inj->image);
		uint32_t site, len;
		uint64_t tsc;

		if (inject_raw_peek(r->p, r->len, &site, &tsc, &len) != 0 || site >= f->ninject)
			return -EINVAL;
		/* its image's addresses are by the engine's index, the sites by the session's */
		return inject_raw_event(r->p, r->len, &f->sites[f->inject_site[site]],
					im && site < im->nips ? im->ips[site] :
					f->sites[f->inject_site[site]].vaddr,
					r->time, r->inj->pid, r->inj->tid, comm_of(f, r->inj->tid),
					e->vals, ev);
	}
	case REF_BPF:
		return bpf_raw_event(r->p, r->len, f->bpf_sites, f->nbpf, e->comm, e->vals, ev);
	default: {
		const struct rec_event *re = (const void *)r->p;
		const struct rec_value *v = (const void *)(re + 1);
		size_t strs = sizeof(*re) + (size_t)re->nvals * sizeof(*v);
		const struct usc_site *site = &f->sites[re->site];

		if (re->nvals > USC_MAX_ARGS || strs > r->len)
			return -EINVAL;
		memset(ev, 0, sizeof(*ev));
		ev->time_ns = re->time_ns;
		ev->pid = re->pid;
		ev->tid = re->tid;
		ev->cpu = re->cpu;
		ev->site = site;
		ev->ip = re->ip;
		ev->func = re->func;
		for (unsigned i = 0; i < re->nvals; i++) {
			e->vals[i] = (struct usc_value){.kind = v[i].kind, .u = v[i].u};
			if (v[i].kind == USC_V_STR || usc_value_is_raw_stack(v[i].kind)) {
				if (v[i].len > r->len - strs)
					return -EINVAL;
				if (v[i].kind == USC_V_USTACK) {
					/* what the engines wrote: its header, then its bytes */
					struct fetch_stack_hdr h;

					if (v[i].len < sizeof(h))
						return -EINVAL;
					memcpy(&h, r->p + strs, sizeof(h));
					if (h.len != v[i].len - sizeof(h))
						return -EINVAL;
				} else if (v[i].kind == USC_V_WALK &&
					   !fetch_walk_valid(r->p + strs, v[i].len)) {
					return -EINVAL;
				}
				/* $pystack: its header and its frames agree */
				if (v[i].kind == USC_V_PYSTACK &&
				    !python_stack_ok(r->p + strs, v[i].len))
					return -EINVAL;
				e->vals[i].str = (const char *)r->p + strs;
				e->vals[i].len = v[i].len;
				strs += v[i].len;
			} else if (v[i].kind > USC_V_NULL) {
				return -EINVAL;	/* USC_V_STACK is never written */
			}
		}
		if (re->comm_len > r->len - strs || re->comm_len >= sizeof(e->comm))
			return -EINVAL;
		memcpy(e->comm, r->p + strs, re->comm_len);
		e->comm[re->comm_len] = 0;
		ev->comm = e->comm;
		for (unsigned i = re->nvals; i < site->nargs && i < USC_MAX_ARGS; i++)
			e->vals[i] = (struct usc_value){.kind = USC_V_FAULT};
		ev->nvals = site->nargs < USC_MAX_ARGS ? site->nargs : USC_MAX_ARGS;
		ev->vals = e->vals;
		return 0;
	}
	}
}

/* Hand out, in time order, the records no later one can be older than. */
static int flush_refs(struct events *e, uint64_t limit)
{
	size_t k = 0;

	if (e->n > 1)
		qsort(e->refs, e->n, sizeof(*e->refs), cmp_ref);
	for (; k < e->n && e->refs[k].time <= limit && !e->stop; k++) {
		struct usc_event ev;

		if (decode(e, &e->refs[k], &ev)) {
			e->bad++;
			continue;
		}
		e->delivered++;
		e->stop = e->fn(&ev, e->ctx);
	}
	if (k && k < e->n)
		memmove(e->refs, e->refs + k, (e->n - k) * sizeof(*e->refs));
	e->n -= k;
	return e->stop;
}

int rec_file_maps(struct rec_file *f,
		  int (*fn)(void *ctx, pid_t pid, const struct proc_map *m, size_t n), void *ctx)
{
	int ret = 0;

	for (size_t i = 0; i < f->nmaps && !ret; i++) {
		struct rget g = {f->map + f->maps_at[i][0], f->maps_at[i][1], 0, false};
		pid_t pid = (pid_t)rget_u32(&g);
		uint32_t n = rget_u32(&g);
		struct proc_map *m;
		size_t k = 0;

		/* each entry takes at least 32 bytes: n cannot be more */
		if (g.bad || n > f->maps_at[i][1] / 32)
			continue;
		m = calloc((size_t)n + 1, sizeof(*m));
		if (!m)
			return -ENOMEM;
		for (; k < n; k++) {
			const char *perms;

			m[k].start = rget_u64(&g);
			m[k].end = rget_u64(&g);
			m[k].pgoff = rget_u64(&g);
			perms = rget_bytes(&g, 4);
			if (perms)
				memcpy(m[k].perms, perms, 4);
			m[k].path = rget_str(&g, NULL);
			if (g.bad || m[k].end <= m[k].start)
				break;
		}
		if (k == n && !g.bad)
			ret = fn(ctx, pid, m, n);
		for (size_t j = 0; j <= k && j < n; j++)
			free(m[j].path);
		free(m);
	}
	return ret;
}

int rec_file_pycodes(struct rec_file *f,
		     int (*fn)(void *ctx, pid_t pid, const struct python_code_info *ci), void *ctx)
{
	int ret = 0;

	for (size_t i = 0; i < f->npycodes && !ret; i++) {
		struct rget g = {f->map + f->pycodes_at[i][0], f->pycodes_at[i][1], 0, false};
		const struct rec_pycode *h = rget_bytes(&g, sizeof(*h));
		struct rec_pycode hh;
		struct python_code_info ci = {0};
		char *module, *qualname, *filename;
		bool module_null = false;
		uint32_t n;

		if (!h)
			continue;
		memcpy(&hh, h, sizeof(hh));
		module = rget_str(&g, &module_null);
		qualname = rget_str(&g, NULL);
		filename = rget_str(&g, NULL);
		n = rget_u32(&g);
		ci.linetable = n == 0xffffffffu ? NULL : rget_bytes(&g, n);
		ci.linetable_len = ci.linetable ? n : 0;
		if (!g.bad && qualname && filename && (module || module_null) &&
		    (ci.linetable || n == 0xffffffffu)) {
			ci.addr = hh.addr;
			ci.module = module;
			ci.qualname = qualname;
			ci.filename = filename;
			ci.firstlineno = hh.firstlineno;
			ci.firsttraceable = hh.firsttraceable;
			if (!ci.linetable && n == 0)
				ci.linetable = (const uint8_t *)"";	/* told, empty */
			ret = fn(ctx, hh.pid, &ci);
		}
		free(module);
		free(qualname);
		free(filename);
	}
	return ret;
}

int rec_file_events(struct rec_file *f, usc_event_fn fn, void *ctx, uint64_t *bad)
{
	struct events e = {.f = f, .fn = fn, .ctx = ctx};
	size_t at = sizeof(struct rec_header), dropped = 0;
	int ret = 0;

	while (at < f->end && !ret && !e.stop) {
		give_back(f, at, &dropped);
		const struct rec_chunk *c = (const void *)(f->map + at);
		const uint8_t *p = f->map + at + sizeof(*c);

		if (f->end - at < sizeof(*c) || c->len > f->end - at - sizeof(*c))
			break;	/* the damage the first pass found */
		if (c->type == REC_ROUND) {
			/* what the round before this one saw last: no later
			 * record is older */
			ret = flush_refs(&e, e.last_round_max);
			e.last_round_max = e.round_max;
		} else {
			ret = refs_of_chunk(&e, c->type, p, c->len, false);
		}
		at += sizeof(*c) + c->len;
	}
	/* the chunk cut short: its whole records */
	if (!ret && !e.stop && at == f->end && f->cut_len) {
		const struct rec_chunk *c = (const void *)(f->map + at);

		ret = refs_of_chunk(&e, c->type, f->map + at + sizeof(*c), f->cut_len, true);
	}
	if (!ret && !e.stop)
		ret = flush_refs(&e, UINT64_MAX);
	free(e.refs);
	if (bad)
		*bad = e.bad;
	return ret < 0 ? ret : 0;
}
