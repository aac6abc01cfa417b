/* Writing a recording: see record.h and format.h. Records are appended to a
 * buffer written out at the end of each round (every engine drained) or
 * when it is full; a long piece (a thread's ring) goes out with writev,
 * without a copy. What reached the file reads back should uscope be killed
 * a moment later. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/outfile.h"
#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "record/buf.h"
#include "record/record.h"
#include "python/names.h"
#include "cache/cache.h"

#define WBUF (4u << 20)
#define DIRECT (64u << 10)	/* a chunk written from where it is, not buffered */

struct rec_writer {
	int fd;
	char *path;
	uint8_t *buf;
	size_t len;
	uint64_t written;
	int err;
	char **modules;		/* paths already described */
	size_t nmodules;
	pid_t *procs, *threads;
	size_t nprocs, nthreads;
};

static uint64_t clock_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int fail(struct rec_writer *w, int err)
{
	if (!w->err) {
		w->err = err;
		log_error("cannot write %s: %s", w->path, strerror(err));
	}
	return -err;
}

static int write_all(struct rec_writer *w, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t r = writev(w->fd, iov, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return fail(w, errno);
		}
		w->written += (uint64_t)r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

static int flush(struct rec_writer *w)
{
	struct iovec v = {w->buf, w->len};
	int ret;

	if (w->err)
		return -w->err;
	if (!w->len)
		return 0;
	ret = write_all(w, &v, 1);
	w->len = 0;
	return ret;
}

/* A chunk of type: head (hlen bytes) then body pieces, padded to 8. */
static int chunk(struct rec_writer *w, uint32_t type, const void *head, size_t hlen,
		 const void *a, size_t alen, const void *b, size_t blen)
{
	static const uint8_t zero[8];
	size_t body = hlen + alen + blen, pad = (8 - body % 8) % 8;
	struct rec_chunk c = {type, (uint32_t)(body + pad)};

	if (w->err)
		return -w->err;
	if (body + pad > REC_CHUNK_MAX)
		return fail(w, EFBIG);
	if (w->len + sizeof(c) + body + pad > WBUF) {
		int ret = flush(w);

		if (ret)
			return ret;
	}
	if (sizeof(c) + body + pad > DIRECT) {
		/* a large piece (a ring's records): straight from where it
		 * is, after what is buffered (chunks must stay in order: a
		 * ROUND's promise is about the chunks before it), not copied
		 * once more through the buffer */
		int ret = w->len ? flush(w) : 0;

		if (ret)
			return ret;
		struct iovec v[5] = {{&c, sizeof(c)}, {(void *)head, hlen}, {(void *)a, alen},
				     {(void *)b, blen}, {(void *)zero, pad}};

		return write_all(w, v, 5);
	}
	memcpy(w->buf + w->len, &c, sizeof(c));
	w->len += sizeof(c);
	if (hlen)
		memcpy(w->buf + w->len, head, hlen);
	w->len += hlen;
	if (alen)
		memcpy(w->buf + w->len, a, alen);
	w->len += alen;
	if (blen)
		memcpy(w->buf + w->len, b, blen);
	w->len += blen;
	memset(w->buf + w->len, 0, pad);
	w->len += pad;
	return 0;
}

static int chunk_rbuf(struct rec_writer *w, uint32_t type, struct rbuf *b)
{
	int ret;

	if (b->oom) {
		rbuf_free(b);
		return fail(w, ENOMEM);
	}
	ret = chunk(w, type, b->p, b->len, NULL, 0, NULL, 0);
	rbuf_free(b);
	return ret;
}

int rec_writer_open(const char *path, const char *command, struct rec_writer **out)
{
	struct rec_writer *w = calloc(1, sizeof(*w));
	struct rec_header h;
	struct iovec v = {&h, sizeof(h)};

	*out = NULL;
	if (!w || !(w->buf = malloc(WBUF)) || !(w->path = strdup(path))) {
		if (w)
			free(w->buf);
		free(w);
		log_error("out of memory");
		return -ENOMEM;
	}
	/* its user's alone: it holds the target's arguments and strings */
	w->fd = usc_outfile_open(path, false);
	if (w->fd < 0) {
		int err = -w->fd;

		log_error("cannot write %s: %s", path, usc_outfile_strerror(err));
		free(w->buf);
		free(w->path);
		free(w);
		return -err;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, REC_MAGIC, 8);
	h.version = REC_VERSION;
	h.header_len = sizeof(h);
	h.realtime_ns = clock_of(CLOCK_REALTIME);
	h.mono_ns = clock_of(CLOCK_MONOTONIC);
	gethostname(h.host, sizeof(h.host) - 1);
	snprintf(h.command, sizeof(h.command), "%s", command ? command : "");
	if (write_all(w, &v, 1)) {
		rec_writer_free(w);
		return -EIO;
	}
	*out = w;
	return 0;
}

void rec_writer_free(struct rec_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	for (size_t i = 0; i < w->nmodules; i++)
		free(w->modules[i]);
	free(w->modules);
	free(w->procs);
	free(w->threads);
	free(w->buf);
	free(w->path);
	free(w);
}

int rec_writer_close(struct rec_writer *w)
{
	int ret = chunk(w, REC_END, NULL, 0, NULL, 0, NULL, 0);

	if (!ret)
		ret = flush(w);
	if (!ret && close(w->fd)) {
		w->fd = -1;
		ret = fail(w, errno);
	}
	w->fd = -1;
	rec_writer_free(w);
	return ret;
}

uint64_t rec_written(const struct rec_writer *w)
{
	return w->written + w->len;
}

/* ---- metadata ----------------------------------------------------------- */

static void put_arg(struct rbuf *b, const struct usc_fetcharg *a)
{
	rbuf_str(b, a->name);
	rbuf_u8(b, (uint8_t)a->type);
	rbuf_u8(b, a->show);
	rbuf_u8(b, a->group_len);
	rbuf_u8(b, (uint8_t)(a->named | a->group_first << 1 | a->unavailable << 2 |
			     a->optimized_out << 3 | a->hidden << 4));
	rbuf_u32(b, a->enums ? a->enums->n : 0);
	rbuf_u8(b, a->enums ? a->enums->flags : 0);
	for (unsigned k = 0; a->enums && k < a->enums->n; k++) {
		rbuf_u64(b, a->enums->v[k].value);
		rbuf_str(b, a->enums->v[k].name);
	}
	/* the first instruction: what the value is ($pid, $comm...) */
	rbuf_u8(b, a->insn[0].op);
}

int rec_write_sites(struct rec_writer *w, const struct usc_probe_spec *specs, size_t nspecs,
		    const struct usc_site *sites, size_t nsites, const struct usc_placement *place,
		    const char *const *engine_names)
{
	struct rbuf b = {0};

	rbuf_u32(&b, (uint32_t)nspecs);
	for (size_t i = 0; i < nspecs; i++) {
		const struct usc_probe_spec *sp = &specs[i];

		rbuf_str(&b, sp->text);
		rbuf_u8(&b, sp->is_return);
		rbuf_u8(&b, (uint8_t)sp->loc_kind);
		rbuf_u8(&b, sp->has_offset);
		rbuf_u8(&b, sp->is_glob);
	}
	rbuf_u32(&b, (uint32_t)nsites);
	for (size_t i = 0; i < nsites; i++) {
		const struct usc_site *site = &sites[i];

		rbuf_u32(&b, site->probe);
		rbuf_u32(&b, (uint32_t)(site->is_return | site->ret_site << 1 | site->tail_call << 2 |
					site->hidden << 3 | site->cont << 4 | site->inlined << 5 |
					(place && place[i].engine < 0) << 6 | site->python << 7 |
					site->py_hook << 8 | site->py_final << 9));
		rbuf_u32(&b, (uint32_t)site->group);
		rbuf_u64(&b, site->vaddr);
		rbuf_u64(&b, site->func_vaddr);
		rbuf_u64(&b, site->offset);
		rbuf_str(&b, site->path);
		rbuf_str(&b, site->symbol);
		rbuf_str(&b, site->label);
		rbuf_str(&b, site->event);
		rbuf_u32(&b, site->nargs);
		for (unsigned a = 0; a < site->nargs; a++)
			put_arg(&b, &site->args[a]);
		rbuf_str(&b, place && place[i].engine >= 0 ? engine_names[place[i].engine] : NULL);
	}
	rbuf_align(&b);
	return chunk_rbuf(w, REC_SITES, &b);
}

static bool seen(pid_t *v, size_t n, pid_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static int remember(pid_t **v, size_t *n, pid_t x)
{
	pid_t *nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	nv[(*n)++] = x;
	*v = nv;
	return 0;
}

bool rec_knows_process(const struct rec_writer *w, pid_t pid)
{
	return seen(w->procs, w->nprocs, pid);
}

bool rec_knows_thread(const struct rec_writer *w, pid_t tid)
{
	return seen(w->threads, w->nthreads, tid);
}

/* A file's segments and function symbols, once per recording. */
static int write_module(struct rec_writer *w, struct usc_cache *c, const char *path)
{
	struct objfile *ef;
	struct rbuf b = {0};
	char **nv;

	for (size_t i = 0; i < w->nmodules; i++)
		if (!strcmp(w->modules[i], path))
			return 0;
	nv = realloc(w->modules, (w->nmodules + 1) * sizeof(*nv));
	if (!nv || !(nv[w->nmodules] = strdup(path))) {
		w->modules = nv ? nv : w->modules;
		return fail(w, ENOMEM);
	}
	w->modules = nv;
	w->nmodules++;
	if (cache_elf(c, path, &ef))
		return 0;	/* not an ELF file we read: no symbols */
	rbuf_str(&b, path);
	rbuf_u32(&b, (uint32_t)ef->nsegs);
	for (size_t i = 0; i < ef->nsegs; i++) {
		rbuf_u64(&b, ef->segs[i].vaddr);
		rbuf_u64(&b, ef->segs[i].memsz);
		rbuf_u64(&b, ef->segs[i].offset);
		rbuf_u64(&b, ef->segs[i].filesz);
		rbuf_u32(&b, ef->segs[i].flags);
	}
	rbuf_u32(&b, (uint32_t)ef->nsyms);
	for (size_t i = 0; i < ef->nsyms; i++) {
		rbuf_u64(&b, ef->syms[i].vaddr);
		rbuf_u64(&b, ef->syms[i].size);
		rbuf_str(&b, objfile_sym_pretty(&ef->syms[i]));
	}
	rbuf_align(&b);
	return chunk_rbuf(w, REC_MODULE, &b);
}

static int write_maps(struct rec_writer *w, struct usc_cache *c, pid_t pid, bool refresh);

int rec_write_process(struct rec_writer *w, struct usc_cache *c, pid_t pid)
{
	if (seen(w->procs, w->nprocs, pid))
		return 0;
	if (remember(&w->procs, &w->nprocs, pid))
		return fail(w, ENOMEM);
	return write_maps(w, c, pid, true);
}

int rec_write_maps(struct rec_writer *w, struct usc_cache *c, pid_t pid)
{
	return write_maps(w, c, pid, false);
}

static int write_maps(struct rec_writer *w, struct usc_cache *c, pid_t pid, bool refresh)
{
	size_t n = 0;
	const struct proc_map *maps = cache_maps(c, pid, refresh, &n);
	struct rbuf b = {0};
	int ret = 0;

	if (!maps)
		return 0;	/* gone already */
	for (size_t i = 0; i < n && !ret; i++)
		if (maps[i].path && maps[i].path[0] == '/' && maps[i].perms[2] == 'x')
			ret = write_module(w, c, maps[i].path);
	if (ret)
		return ret;
	rbuf_u32(&b, (uint32_t)pid);
	rbuf_u32(&b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		rbuf_u64(&b, maps[i].start);
		rbuf_u64(&b, maps[i].end);
		rbuf_u64(&b, maps[i].pgoff);
		rbuf_put(&b, maps[i].perms, 4);
		rbuf_str(&b, maps[i].path);
	}
	rbuf_align(&b);
	return chunk_rbuf(w, REC_MAPS, &b);
}

int rec_write_thread(struct rec_writer *w, pid_t pid, pid_t tid, const char *comm)
{
	struct rec_thread t = {pid, tid, {0}};

	if (!seen(w->threads, w->nthreads, tid) && remember(&w->threads, &w->nthreads, tid))
		return fail(w, ENOMEM);
	strncpy(t.comm, comm ? comm : "", sizeof(t.comm) - 1);
	return chunk(w, REC_THREAD, &t, sizeof(t), NULL, 0, NULL, 0);
}

int rec_write_pycode(struct rec_writer *w, pid_t pid, const struct python_code_info *ci)
{
	struct rec_pycode h = {pid, ci->firstlineno, ci->firsttraceable, 0, ci->addr};
	struct rbuf b = {0};

	rbuf_put(&b, &h, sizeof(h));
	rbuf_str(&b, ci->module);
	rbuf_str(&b, ci->qualname);
	rbuf_str(&b, ci->filename);
	rbuf_u32(&b, ci->linetable ? (uint32_t)ci->linetable_len : 0xffffffffu);
	if (ci->linetable)
		rbuf_put(&b, ci->linetable, ci->linetable_len);
	rbuf_align(&b);
	return chunk_rbuf(w, REC_PYCODE, &b);
}

int rec_write_clock(struct rec_writer *w, const struct rec_clock_pair *p, size_t n)
{
	return chunk(w, REC_CLOCK, p, n * sizeof(*p), NULL, 0, NULL, 0);
}

int rec_write_image(struct rec_writer *w, uint32_t image, pid_t pid, const uint64_t *ips,
		    size_t n)
{
	struct rec_image h = {image, pid, (uint32_t)n, 0};

	return chunk(w, REC_IMAGE, &h, sizeof(h), ips, n * sizeof(*ips), NULL, 0);
}

int rec_write_inject(struct rec_writer *w, const struct rec_inject *h, const void *a,
		     size_t alen, const void *b, size_t blen)
{
	return chunk(w, REC_INJECT, h, sizeof(*h), a, alen, b, blen);
}

int rec_write_bpf(struct rec_writer *w, const void *rec, size_t len)
{
	uint32_t n = (uint32_t)len, pad = 0;

	return chunk(w, REC_BPF, &n, sizeof(n), &pad, sizeof(pad), rec, len);
}

int rec_write_event(struct rec_writer *w, const struct usc_event *ev, uint32_t site)
{
	struct rbuf b = {0};
	struct rec_event e = {0};
	size_t comm = ev->comm ? strlen(ev->comm) : 0;

	e.site = site;
	e.time_ns = ev->time_ns;
	e.pid = ev->pid;
	e.tid = ev->tid;
	e.cpu = ev->cpu;
	e.nvals = (uint16_t)ev->nvals;
	e.comm_len = (uint16_t)(comm < 64 ? comm : 64);
	e.ip = ev->ip;
	e.func = ev->func;
	rbuf_put(&b, &e, sizeof(e));
	for (unsigned i = 0; i < ev->nvals; i++) {
		struct rec_value v = {.kind = ev->vals[i].kind, .u = ev->vals[i].u};

		if (usc_value_has_bytes(&ev->vals[i]))
			v.len = ev->vals[i].len;
		rbuf_put(&b, &v, sizeof(v));
	}
	/* a stack goes as it was copied: uscope unwinds it when it reads */
	for (unsigned i = 0; i < ev->nvals; i++)
		if (usc_value_has_bytes(&ev->vals[i]))
			rbuf_put(&b, ev->vals[i].str, ev->vals[i].len);
	rbuf_put(&b, ev->comm, e.comm_len);
	rbuf_align(&b);
	if (!b.oom)
		((struct rec_event *)b.p)->len = (uint32_t)b.len;
	return chunk_rbuf(w, REC_EVENT, &b);
}

int rec_write_round(struct rec_writer *w)
{
	int ret = chunk(w, REC_ROUND, NULL, 0, NULL, 0, NULL, 0);

	/* every engine was drained: what it gave goes to the file now, not
	 * when the buffer is full (uscope killed, the records would be lost
	 * with its memory) */
	return ret ? ret : flush(w);
}

int rec_write_stats(struct rec_writer *w, const struct usc_stats *st, size_t nsites)
{
	struct rbuf b = {0};

	rbuf_u64(&b, nsites);
	rbuf_u64(&b, st->events);
	rbuf_u64(&b, st->lost);
	for (size_t i = 0; i < nsites; i++) {
		struct rec_site_stats s = {st->sites[i].events, st->sites[i].lost, st->sites[i].hits,
					   st->sites[i].agg_full, st->sites[i].agg_fault};

		rbuf_put(&b, &s, sizeof(s));
	}
	/* the words added since (format.h) */
	rbuf_u64(&b, REC_STATS_NWORDS);
	for (size_t i = 0; i < nsites; i++)
		rbuf_u64(&b, st->sites[i].lost_wait);
	return chunk_rbuf(w, REC_STATS, &b);
}

int rec_writer_flush(struct rec_writer *w)
{
	return w->err ? -w->err : flush(w);
}

int rec_write_snapshot(struct rec_writer *w, const char *why)
{
	struct rbuf b = {0};

	rbuf_str(&b, why);
	rbuf_align(&b);
	return chunk_rbuf(w, REC_SNAPSHOT, &b);
}
