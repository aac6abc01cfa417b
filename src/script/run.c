/* The script in uscope: the executor every engine shares (vm.h), run here
 * on what engines that stream events deliver (tracefs; and inject and bpf
 * when they do not run it where the probe fires), and on BEGIN, END and
 * interval probes; the output records (printf ...) of engines that do run
 * it there; the maps at the end, this table's rows and the engines'
 * merged (script/table.h has the tables). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "agg/agg_shared.h"
#include "core/log.h"
#include "core/proc.h"
#include "resolve/resolve.h"
#include "script/print.h"
#include "script/run.h"
#include "script/table.h"
#include "script/vm.h"
#include "stack/stack.h"

#define MAX_SOURCES 4

struct script_rt {
	struct usc_script *s;
	const struct script_blob *b;
	struct stab **tabs;		/* nmaps: uscope's own */
	struct script_vm vm;
	struct script_printer pr;
	uint64_t start_ns;		/* elapsed's zero */
	uint64_t *next_tick;		/* nattach: interval probes' next run */
	uint64_t errs[SERR_NR];
	uint64_t *full;			/* nmaps */
	struct script_source src[MAX_SOURCES];
	size_t nsrc;
	bool exited;
	/* the proc status last read (uid, gid) */
	pid_t ids_pid;
	uint32_t uid, gid;
	uint64_t rand;
};

/* What the executor runs on: an event, or nothing (BEGIN ...). */
struct rt_env {
	struct script_rt *rt;
	const struct usc_event *ev;
	uint32_t attach;		/* a tracer probe's attach point */
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void ids_of(struct script_rt *rt, pid_t pid)
{
	struct proc_status st;

	if (pid == rt->ids_pid)
		return;
	rt->ids_pid = pid;
	rt->uid = rt->gid = 0;
	if (proc_status_read(pid, &st) == 0) {
		rt->uid = st.uid;
		rt->gid = st.gid;
	}
}

static uint64_t env_builtin(struct rt_env *e, uint32_t which)
{
	const struct usc_event *ev = e->ev;
	struct script_rt *rt = e->rt;

	switch (which) {
	case SB_PID: return ev ? (uint64_t)ev->pid : (uint64_t)getpid();
	case SB_TID: return ev ? (uint64_t)ev->tid : (uint64_t)syscall(SYS_gettid);
	case SB_NSECS: return ev ? ev->time_ns : mono_ns();
	case SB_ELAPSED: {
		uint64_t t = ev ? ev->time_ns : mono_ns();

		return t > rt->start_ns ? t - rt->start_ns : 0;
	}
	case SB_CPU: return ev ? (uint64_t)ev->cpu : (uint64_t)sched_getcpu();
	case SB_UID:
	case SB_GID:
		if (!ev)
			return which == SB_UID ? getuid() : getgid();
		ids_of(rt, ev->pid);
		return which == SB_UID ? rt->uid : rt->gid;
	case SB_SITE:
		if (!ev)
			return 0x80000000u | e->attach;
		return (uint64_t)(ev->site - rt->pr.sites);
	case SB_LIVE:
		return 0;	/* the hit is over: memory read now is later */
	default:
		return 0;
	}
}

static int env_in(struct rt_env *e, uint32_t k, uint64_t *u)
{
	const struct usc_event *ev = e->ev;
	const struct usc_value *v;
	const struct usc_fetcharg *a;

	if (!ev || k >= ev->nvals || k >= ev->site->nargs)
		return 1;
	v = &ev->vals[k];
	a = &ev->site->args[k];
	if (v->kind == USC_V_STACK) {
		*u = stack_intern(e->rt->pr.cache, ev->pid, v->stack);
		return *u == 0;
	}
	if (v->kind != USC_V_INT)
		return 1;
	/* as its type says: a USDT argument's size and sign */
	*u = (uint64_t)agg_value_of(v->u, fetch_type_size(a->type) == 0 ? 8 :
				    fetch_type_size(a->type), fetch_type_is_signed(a->type));
	return 0;
}

static long env_in_str(struct rt_env *e, uint32_t k, char *dst, uint32_t cap)
{
	const struct usc_event *ev = e->ev;
	const struct usc_value *v;
	size_t n;

	if (!ev || k >= ev->nvals)
		return -1;
	v = &ev->vals[k];
	if (v->kind == USC_V_NULL)
		return 0;
	if (v->kind != USC_V_STR)
		return -1;
	n = strnlen(v->str, v->len);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v->str, n);
	dst[n] = 0;
	return (long)n;
}

static int env_comm(struct rt_env *e, char *dst)
{
	if (e->ev) {
		if (!e->ev->comm)
			return 1;
		strncpy(dst, e->ev->comm, 16);
		return 0;
	}
	char path[64];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/comm");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	n = read(fd, dst, 15);
	close(fd);
	if (n <= 0)
		return 1;
	dst[n - (dst[n - 1] == '\n')] = 0;
	return 0;
}

/* Memory of the event's process, read now: later than the hit (the
 * engine's inputs are read at it). */
static int env_read(struct rt_env *e, void *dst, uint64_t addr, uint32_t len)
{
	struct iovec l = {dst, len}, r = {(void *)(uintptr_t)addr, len};

	if (!e->ev || !addr)
		return 1;
	return process_vm_readv(e->ev->pid, &l, 1, &r, 1, 0) != (ssize_t)len;
}

static long env_read_str(struct rt_env *e, char *dst, uint64_t addr, uint32_t cap)
{
	uint32_t got = 0;

	if (!e->ev || !addr)
		return -1;
	/* a page at a time: the string may end before an unreadable one */
	while (got < cap) {
		uint64_t a = addr + got;
		uint32_t n = (uint32_t)(4096 - (a & 4095));
		struct iovec l, r;
		ssize_t k;

		if (n > cap - got)
			n = cap - got;
		l = (struct iovec){dst + got, n};
		r = (struct iovec){(void *)(uintptr_t)a, n};
		k = process_vm_readv(e->ev->pid, &l, 1, &r, 1, 0);
		if (k <= 0)
			return got ? (long)strnlen(dst, got) : -1;
		void *nul = memchr(dst + got, 0, (size_t)k);

		if (nul)
			return (long)((char *)nul - dst);
		got += (uint32_t)k;
	}
	dst[cap - 1] = 0;
	return (long)cap - 1;
}

static void *env_map(struct rt_env *e, uint32_t idx, const uint8_t *key, int create)
{
	return stab_get(e->rt->tabs[idx], key, create, 0);
}

static int handle(struct script_rt *rt, const struct usc_event *ev, uint32_t attach,
		  const struct script_rec *rec);

static int env_emit(struct rt_env *e, const struct script_rec *rec, uint32_t len)
{
	(void)len;
	return handle(e->rt, e->ev, e->attach, rec);
}

static void env_err(struct rt_env *e, uint32_t err, uint32_t idx)
{
	struct script_rt *rt = e->rt;

	if (err == SERR_FULL) {
		if (idx < rt->s->nmaps)
			rt->full[idx]++;
		return;
	}
	if (err < SERR_NR)
		rt->errs[err]++;
}

static uint32_t env_rand(struct rt_env *e)
{
	uint64_t x = e->rt->rand;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	e->rt->rand = x;
	return (uint32_t)(x >> 16);
}

#define SCRIPT_STEP rt_step
#define SCRIPT_INLINE static
#define SCRIPT_IN(env, k, u) env_in((struct rt_env *)(env), k, u)
#define SCRIPT_IN_STR(env, k, dst, cap) env_in_str((struct rt_env *)(env), k, dst, cap)
#define SCRIPT_BUILTIN(env, w) env_builtin((struct rt_env *)(env), w)
#define SCRIPT_COMM(env, dst) env_comm((struct rt_env *)(env), dst)
#define SCRIPT_READ(env, dst, addr, len) env_read((struct rt_env *)(env), dst, addr, len)
#define SCRIPT_READ_STR(env, dst, addr, cap) env_read_str((struct rt_env *)(env), dst, addr, cap)
#define SCRIPT_MAP(env, idx, m, key, create) env_map((struct rt_env *)(env), idx, key, create)
#define SCRIPT_MAP_DEL(env, idx, m, key) stab_del(((struct rt_env *)(env))->rt->tabs[idx], key)
#define SCRIPT_EMIT(env, rec, len) env_emit((struct rt_env *)(env), rec, len)
#define SCRIPT_USTACK(env, frames, id) 1
#define SCRIPT_ERR(env, err, idx) env_err((struct rt_env *)(env), err, idx)
#define SCRIPT_RAND(env) env_rand((struct rt_env *)(env))
#define SCRIPT_COPY(dst, src, n, max) memcpy(dst, src, n)
#include "script/vm.h"

/* Probe pi on an event (or none). */
static void run(struct script_rt *rt, unsigned pi, const struct usc_event *ev, uint32_t attach)
{
	const struct script_probe *p = &script_probes(rt->b)[pi];
	const struct script_insn *insns = script_insns(rt->b) + p->first;
	struct rt_env env = {rt, ev, attach};
	struct script_vm *vm = &rt->vm;

	uint32_t pc = 0;

	if (p->flags & SCRIPT_PROBE_UPDATES) {
		for (uint32_t i = 0; i < p->n; i = rt_step_unit(insns, p->n, i, script_maps(rt->b),
								 rt->b->nmaps, &env))
			;
		return;
	}
	vm->strlen = rt->b->strlen >= 2 && rt->b->strlen <= SCRIPT_STR_CAP ? rt->b->strlen :
		     SCRIPT_STRLEN;
	vm->back = 0;
	if (p->flags & SCRIPT_PROBE_TID)
		vm->r[SCRIPT_REG_TID] = (int64_t)env_builtin(&env, SB_TID);
	if (p->flags & SCRIPT_PROBE_PID)
		vm->r[SCRIPT_REG_PID] = (int64_t)env_builtin(&env, SB_PID);
	while (pc < p->n)
		pc = rt_step(vm, &insns[pc], pc, script_maps(rt->b), rt->b->nmaps,
			     script_strtab(rt->b), rt->b->nstrtab, &env);
}

/* ---- the maps, merged --------------------------------------------------------- */

struct merge {
	struct stab *tab;
	const struct script_map *m;
	bool oom;
};

static void merge_row(void *arg, int mi, const uint8_t *key, const uint8_t *val)
{
	struct merge *mg = arg;
	struct stab_ent *e;
	uint8_t *v;

	(void)mi;
	e = stab_find(mg->tab, key, 0);
	v = stab_get(mg->tab, key, 1, 0);
	if (!v) {
		mg->oom = true;
		return;
	}
	stab_combine(mg->m, v, val, !e);
}

/* uscope's own rows of map mi. */
static void own_rows(struct script_rt *rt, int mi, void (*fn)(void *, int, const uint8_t *,
							       const uint8_t *), void *arg)
{
	struct stab *t = rt->tabs[mi];

	for (uint32_t i = 0; i < t->nent; i++) {
		struct stab_ent *e = stab_ent(t, i);
		uint64_t *c;

		if (e->state != STAB_READY)
			continue;
		if (!t->aggsize) {
			fn(arg, mi, stab_key(e), stab_val(t, e));
			continue;
		}
		c = stab_copy(t, 0, e->row);
		if (*c == e->gen)
			fn(arg, mi, stab_key(e), (const uint8_t *)(c + 1));
	}
}

static struct stab *table_new(const struct script_map *m, uint32_t max)
{
	struct stab t, *p;
	struct script_map mm = *m;
	uint64_t size;

	mm.max = max;
	size = stab_layout(&t, &mm, 1);
	p = calloc(1, size);
	if (p)
		*p = t;
	return p;
}

static int print_map(struct script_rt *rt, int mi, uint32_t top, uint32_t div)
{
	const struct script_map *m = &script_maps(rt->b)[mi];
	struct merge mg = {.m = m};
	struct script_row *rows = NULL;
	size_t n = 0;
	int ret;

	/* room for every source's keys */
	mg.tab = table_new(m, m->max * (uint32_t)(1 + rt->nsrc));
	if (!mg.tab)
		return -ENOMEM;
	own_rows(rt, mi, merge_row, &mg);
	for (size_t k = 0; k < rt->nsrc; k++)
		rt->src[k].rows(rt->src[k].ctx, mi, merge_row, &mg);
	rows = calloc(mg.tab->used + 1, sizeof(*rows));
	if (!rows || mg.oom) {
		free(rows);
		free(mg.tab);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < mg.tab->nent; i++) {
		struct stab_ent *e = stab_ent(mg.tab, i);

		if (e->state != STAB_READY)
			continue;
		rows[n].key = stab_key(e);
		rows[n].val = mg.tab->aggsize ? (const uint8_t *)(stab_copy(mg.tab, 0, e->row) + 1) :
			      stab_val(mg.tab, e);
		n++;
	}
	ret = script_print_map(&rt->pr, mi, rows, n, top, div);
	free(rows);
	free(mg.tab);
	return ret;
}

static void clear_map(struct script_rt *rt, int mi, bool zero)
{
	if (rt->s->maps[mi].shadow > 0)
		clear_map(rt, rt->s->maps[mi].shadow, zero);
	stab_clear(rt->tabs[mi], zero);
	for (size_t k = 0; k < rt->nsrc; k++)
		if (rt->src[k].clear)
			rt->src[k].clear(rt->src[k].ctx, mi, zero);
}

/* ---- output records ----------------------------------------------------------- */

static int handle(struct script_rt *rt, const struct usc_event *ev, uint32_t attach,
		  const struct script_rec *rec)
{
	const struct usc_script *s = rt->s;
	const uint8_t *vals = (const uint8_t *)(rec + 1);
	pid_t pid = ev ? ev->pid : getpid();
	struct sbuf b = {0};
	int ret = 0;

	(void)attach;
	switch (rec->kind) {
	case SOUT_PRINTF:
	case SOUT_CAT:
		if (rec->id >= s->nfmts)
			return 0;
		script_format(&rt->pr, &s->fmts[rec->id], vals, rec->len, pid, &b);
		if (rec->kind == SOUT_CAT && b.p) {
			/* cat(PATH): the file's bytes */
			FILE *f = fopen(b.p, "re");
			struct sbuf c = {0};
			char chunk[4096];
			size_t n;

			if (!f) {
				log_warn("cat(): cannot open %s: %s", b.p, strerror(errno));
			} else {
				while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && c.n < (1u << 20))
					sbuf_add(&c, chunk, n);
				fclose(f);
				ret = script_emit_text(&rt->pr, "cat", c.p ? c.p : "", c.n);
			}
			sbuf_free(&c);
			sbuf_free(&b);
			return ret;
		}
		ret = script_emit_text(&rt->pr, "printf", b.p ? b.p : "", b.n);
		break;
	case SOUT_TIME: {
		/* the time of the hit, as time() prints it */
		struct timespec rt_now, mt;
		uint64_t t = ev ? ev->time_ns : mono_ns();
		int64_t wall;
		time_t secs;
		struct tm tm;
		char buf[512];
		size_t n;

		if (rec->id >= s->nfmts)
			return 0;
		clock_gettime(CLOCK_REALTIME, &rt_now);
		clock_gettime(CLOCK_MONOTONIC, &mt);
		wall = (int64_t)rt_now.tv_sec * 1000000000LL + rt_now.tv_nsec -
		       ((int64_t)mt.tv_sec * 1000000000LL + mt.tv_nsec - (int64_t)t);
		secs = (time_t)(wall / 1000000000LL);
		localtime_r(&secs, &tm);
		sbuf_add(&b, s->fmts[rec->id].text, s->fmts[rec->id].ntext);
		n = b.p ? strftime(buf, sizeof(buf), b.p, &tm) : 0;
		ret = script_emit_text(&rt->pr, "time", buf, n);
		break;
	}
	case SOUT_PRINT_MAP: {
		int64_t top, div;

		if (rec->id >= s->nfmts || rec->len < 16)
			return 0;
		memcpy(&top, vals, 8);
		memcpy(&div, vals + 8, 8);
		ret = print_map(rt, s->fmts[rec->id].map, top > 0 ? (uint32_t)top : 0,
				div > 0 ? (uint32_t)div : 0);
		break;
	}
	case SOUT_PRINT:
		if (rec->id >= s->nfmts)
			return 0;
		script_value_str(&rt->pr, &s->fmts[rec->id].ty, vals, pid, 8, &b);
		if (!rt->pr.json)
			sbuf_add(&b, "\n", 1);
		ret = script_emit_text(&rt->pr, "value", b.p ? b.p : "", b.n);
		break;
	case SOUT_CLEAR:
	case SOUT_ZERO:
		if (rec->id < s->nmaps)
			clear_map(rt, rec->id, rec->kind == SOUT_ZERO);
		break;
	case SOUT_EXIT:
		rt->exited = true;
		break;
	default:
		break;
	}
	sbuf_free(&b);
	return ret;
}

/* ---- the runtime -------------------------------------------------------------- */

struct script_rt *script_rt_new(struct usc_script *s, FILE *fp, bool json)
{
	struct script_rt *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return NULL;
	rt->s = s;
	rt->b = s->blob;
	rt->pr = (struct script_printer){.fp = fp, .json = json, .s = s};
	rt->tabs = calloc(s->nmaps + 1, sizeof(*rt->tabs));
	rt->full = calloc(s->nmaps + 1, sizeof(*rt->full));
	rt->next_tick = calloc(s->nattach + 1, sizeof(*rt->next_tick));
	if (!rt->tabs || !rt->full || !rt->next_tick) {
		script_rt_free(rt);
		return NULL;
	}
	for (size_t i = 0; i < s->nmaps; i++) {
		rt->tabs[i] = table_new(&script_maps(rt->b)[i], script_maps(rt->b)[i].max);
		if (!rt->tabs[i]) {
			script_rt_free(rt);
			return NULL;
		}
	}
	rt->start_ns = mono_ns();
	rt->rand = rt->start_ns | 1;
	return rt;
}

void script_rt_free(struct script_rt *rt)
{
	if (!rt)
		return;
	for (size_t i = 0; rt->tabs && i < rt->s->nmaps; i++)
		free(rt->tabs[i]);
	free(rt->tabs);
	free(rt->full);
	free(rt->next_tick);
	free(rt);
}

void script_rt_session(struct script_rt *rt, struct usc_cache *c, const struct usc_site *sites,
		       size_t nsites, const struct usc_probe_spec *specs)
{
	(void)specs;
	rt->pr.cache = c;
	rt->pr.sites = sites;
	rt->pr.nsites = nsites;
}

int script_rt_add_source(struct script_rt *rt, const struct script_source *src)
{
	if (rt->nsrc >= MAX_SOURCES)
		return -ENOSPC;
	rt->src[rt->nsrc++] = *src;
	return 0;
}

bool script_rt_exited(const struct script_rt *rt)
{
	return rt->exited;
}

/* The probes of attach points of kind k, each once. */
static void run_kind(struct script_rt *rt, enum sp_kind k)
{
	const struct usc_script *s = rt->s;

	for (size_t i = 0; i < s->nattach && !rt->exited; i++)
		if (s->attach[i].kind == k)
			run(rt, s->attach[i].probe, NULL, (uint32_t)i);
}

int script_rt_begin(struct script_rt *rt)
{
	uint64_t now = mono_ns();

	rt->start_ns = now;
	for (size_t i = 0; i < rt->s->nattach; i++)
		if (rt->s->attach[i].kind == SP_INTERVAL)
			rt->next_tick[i] = now + rt->s->attach[i].interval_ns;
	run_kind(rt, SP_BEGIN);
	fflush(rt->pr.fp);	/* as bpftrace: what BEGIN printed is out at once */
	return rt->exited;
}

int script_rt_event(struct script_rt *rt, const struct usc_event *ev)
{
	const struct usc_site *site = ev->site;
	size_t spec = site->probe;

	if (rt->exited)
		return 1;
	if (spec >= rt->s->nspecs)
		return 0;
	run(rt, rt->s->spec_probe[spec], ev, rt->s->spec_attach[spec]);
	return rt->exited;
}

int script_rt_record(struct script_rt *rt, const struct usc_event *ev, const void *rec,
		     uint32_t len)
{
	struct script_rec h;
	uint8_t *copy;
	int ret;

	if (rt->exited)
		return 1;
	if (len < sizeof(h))
		return 0;
	memcpy(&h, rec, sizeof(h));
	if (h.len > len - sizeof(h))
		return 0;
	/* aligned, for the values' reads */
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, rec, len);
	ret = handle(rt, ev, 0, (const struct script_rec *)copy);
	free(copy);
	return ret < 0 ? ret : rt->exited;
}

int script_rt_tick(struct script_rt *rt, uint64_t now)
{
	const struct usc_script *s = rt->s;

	for (size_t i = 0; i < s->nattach && !rt->exited; i++) {
		if (s->attach[i].kind != SP_INTERVAL || !rt->next_tick[i] || now < rt->next_tick[i])
			continue;
		rt->next_tick[i] += s->attach[i].interval_ns;
		if (rt->next_tick[i] <= now)	/* late: no catching up */
			rt->next_tick[i] = now + s->attach[i].interval_ns;
		run(rt, s->attach[i].probe, NULL, (uint32_t)i);
	}
	/* a drain is over: what it printed is out (a pipe's reader sees it
	 * now, as bpftrace's does, not when the buffer fills) */
	fflush(rt->pr.fp);
	return rt->exited;
}

static const char *const err_what[SERR_NR] = {
	[SERR_READ] = "reads of the process's memory failed (0 or \"\" instead)",
	[SERR_DIV] = "divisions by zero (0 instead)",
	[SERR_STEPS] = "hits stopped after 100000 turns of their loops (a loop that ran too long)",
	[SERR_OUT] = "outputs (printf ...) lost: no room where the probe ran",
	[SERR_STACK] = "stacks could not be taken",
};

int script_rt_end(struct script_rt *rt)
{
	const struct usc_script *s = rt->s;
	uint64_t errs[SERR_NR];
	uint64_t *full = calloc(s->nmaps + 1, sizeof(*full));
	int ret = 0;

	rt->exited = false;	/* END runs after exit() too */
	run_kind(rt, SP_END);
	if (!rt->pr.json && fwrite("\n\n", 1, 2, rt->pr.fp) != 2)
		ret = -EIO;
	/* bpftrace prints the maps by name */
	{
		size_t *order = calloc(s->nmaps + 1, sizeof(*order));

		for (size_t i = 0; order && i < s->nmaps; i++)
			order[i] = i;
		for (size_t i = 1; order && i < s->nmaps; i++)
			for (size_t k = i; k > 0 && strcmp(s->maps[order[k - 1]].name,
							   s->maps[order[k]].name) > 0; k--) {
				size_t t = order[k];

				order[k] = order[k - 1];
				order[k - 1] = t;
			}
		for (size_t i = 0; order && i < s->nmaps && !ret; i++)
			if (!s->maps[order[i]].hidden)
				ret = print_map(rt, (int)order[i], 0, 0);
		free(order);
	}
	fflush(rt->pr.fp);
	memcpy(errs, rt->errs, sizeof(errs));
	for (size_t i = 0; full && i < s->nmaps; i++)
		full[i] = rt->full[i];
	for (size_t k = 0; k < rt->nsrc; k++)
		if (rt->src[k].errors)
			rt->src[k].errors(rt->src[k].ctx, errs, full);
	for (int e = 1; e < SERR_NR; e++)
		if (errs[e] && err_what[e]) {
			/* one: its first word without its plural's s */
			int w = (int)strcspn(err_what[e], " ");

			log_warn("script: %llu %.*s%s", (unsigned long long)errs[e],
				 errs[e] == 1 ? w - 1 : w, err_what[e], err_what[e] + w);
		}
	for (size_t i = 0; full && i < s->nmaps; i++)
		if (full[i] && !s->maps[i].hidden)
			log_warn("script: @%s: %llu updates lost: the map holds %u keys (--max-keys "
				 "sets it)", s->maps[i].name, (unsigned long long)full[i],
				 script_maps(rt->b)[i].max);
	free(full);
	return ret;
}
