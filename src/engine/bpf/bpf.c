/* The bpf engine: eBPF uprobes through libbpf.
 *
 * One BPF program (uscope.bpf.c), attached to every site with the site's
 * index as the attach cookie, interprets the site's fetch programs, so it
 * computes what uprobe_events cannot (a USDT base+index operand) and turns a
 * bad pointer into a fault marker. Probes attach to the target process
 * only (a uprobe perf event with a pid filters on the process's memory map,
 * so all its threads), or to every process without one. The kernel counts
 * each site's hits and lost records itself, per CPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/log.h"
#include "engine/bpf/bpf_shared.h"
#include "engine/engine.h"
#include "uscope.skel.h"

struct ub {
	struct usc_engine base;
	struct uscope_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links;
	size_t nsites;
	struct usc_site_stats *stats;
	int *ret_idx;		/* per site: the hidden return-address arg, or -1 */
	/* delivery */
	usc_event_fn fn;
	void *ctx;
	int delivered, stop_asked;
	struct usc_value vals[UB_MAX_ARGS];
};

static struct ub *ub_of(struct usc_engine *e)
{
	return container_of(e, struct ub, base);
}

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[1024];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	if (level != LIBBPF_DEBUG)
		log_debug("%s", buf);	/* the verifier's log, with -v */
	return 0;
}

static int ub_open(struct usc_session *s, struct usc_engine **out)
{
	struct ub *u;
	int err;

	if (s->nsites > UB_MAX_SITES) {
		log_error("the bpf engine takes at most %d sites (%zu asked)", UB_MAX_SITES,
			  s->nsites);
		return -E2BIG;
	}
	libbpf_set_print(libbpf_log);
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->base.ops = &bpf_engine_ops;
	u->base.session = s;
	u->nsites = s->nsites;
	u->stats = calloc(s->nsites + 1, sizeof(*u->stats));
	u->links = calloc(s->nsites + 1, sizeof(*u->links));
	u->ret_idx = calloc(s->nsites + 1, sizeof(*u->ret_idx));
	if (!u->stats || !u->links || !u->ret_idx) {
		err = -ENOMEM;
		goto fail;
	}
	u->skel = uscope_bpf__open();
	if (u->skel) {
		u->skel->rodata->count_only = s->count_only;
		if (uscope_bpf__load(u->skel)) {
			err = -errno;
			uscope_bpf__destroy(u->skel);
			u->skel = NULL;
			errno = -err;
		}
	}
	if (!u->skel) {
		err = -errno;
		if (err == -EPERM)
			log_error("the bpf engine needs root (or CAP_BPF and CAP_PERFMON)");
		else
			log_error("cannot load the bpf engine's program: %s (kernel BPF with BTF "
				  "and uprobe cookies, 5.15 or later, is needed)", strerror(-err));
		goto fail;
	}
	*out = &u->base;
	return 0;
fail:
	free(u->stats);
	free(u->links);
	free(u->ret_idx);
	free(u);
	return err ? err : -EINVAL;
}

/* A site's programs into the map; a return site gets a hidden last
 * argument, the word at the stack pointer: the return address. */
static int ub_fill_site(struct ub *u, size_t i, struct ub_site *us)
{
	const struct usc_site *site = &u->base.session->sites[i];
	unsigned n = site->nargs;

	memset(us, 0, sizeof(*us));
	us->vaddr = site->vaddr;
	us->offset = site->offset;
	if (n + (site->ret_site ? 1 : 0) > UB_MAX_ARGS) {
		log_error("%s: the bpf engine takes at most %d fetch arguments", site->spec->text,
			  UB_MAX_ARGS - 1);
		return -E2BIG;
	}
	for (unsigned a = 0; a < n; a++) {
		const struct usc_fetcharg *fa = &site->args[a];

		for (unsigned k = 0; k < fa->ninsn && k < UB_MAX_INSN; k++) {
			if (fa->insn[k].op == FOP_ARG) {
				log_error("%s: internal error: an unbound $arg", site->spec->text);
				return -EINVAL;
			}
			memcpy(&us->args[a].insn[k], &fa->insn[k], sizeof(us->args[a].insn[k]));
		}
		us->args[a].ninsn = fa->ninsn;
	}
	u->ret_idx[i] = -1;
	if (site->ret_site) {
		struct ub_arg *ra = &us->args[n];

		ra->insn[0] = (struct ub_insn){.op = FOP_REG, .reg = USC_REG_SP};
		ra->insn[1] = (struct ub_insn){.op = FOP_ST_MEM, .size = 8};
		ra->insn[2] = (struct ub_insn){.op = FOP_END};
		ra->ninsn = 3;
		u->ret_idx[i] = (int)n++;
	}
	us->nargs = n;
	return 0;
}

static int ub_attach(struct usc_engine *e)
{
	struct ub *u = ub_of(e);
	struct usc_session *s = e->session;
	int fd = bpf_map__fd(u->skel->maps.sites);

	for (size_t i = 0; i < s->nsites; i++) {
		struct ub_site us;
		__u32 key = (__u32)i;
		int ret;

		if (s->sites[i].is_return && !s->sites[i].ret_site) {
			log_error("%s: the bpf engine probes returns on their return sites only; "
				  "--uretprobe needs -e tracefs", s->sites[i].spec->text);
			return -ENOTSUP;
		}
		ret = ub_fill_site(u, i, &us);
		if (ret)
			return ret;
		if (bpf_map_update_elem(fd, &key, &us, BPF_ANY)) {
			ret = -errno;
			log_error("cannot store the programs of %s: %s", s->sites[i].event,
				  strerror(errno));
			return ret;
		}
	}
	return 0;
}

static int ub_start(struct usc_engine *e, pid_t pid, int follow_children)
{
	struct ub *u = ub_of(e);
	struct usc_session *s = e->session;

	if (pid > 0 && follow_children)
		log_info("the bpf engine traces COMMAND's own process, not the processes it "
			 "starts");
	for (size_t i = 0; i < s->nsites; i++) {
		const struct usc_site *site = &s->sites[i];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = i,
			    .ref_ctr_offset = (size_t)site->ref_ctr_offset);

		u->links[i] = bpf_program__attach_uprobe_opts(u->skel->progs.usc_probe,
							      pid > 0 ? pid : -1, site->path,
							      site->offset, &opts);
		if (!u->links[i]) {
			int err = -errno;

			log_error("cannot attach %s at %s:0x%llx: %s", site->label, site->path,
				  (unsigned long long)site->offset, strerror(-err));
			return err;
		}
	}
	return 0;
}

static int ub_record(void *ctx, void *data, size_t size)
{
	struct ub *u = ctx;
	struct usc_session *s = u->base.session;
	const struct ub_rec *r = data;
	const struct usc_site *site;
	struct usc_event ev;
	char comm[17];

	if (size < sizeof(*r) || r->site >= s->nsites || u->stop_asked)
		return 0;
	site = &s->sites[r->site];
	memset(&ev, 0, sizeof(ev));
	memcpy(comm, r->comm, 16);
	comm[16] = 0;
	ev.time_ns = r->ts;
	ev.pid = (int32_t)r->pid;
	ev.tid = (int32_t)r->tid;
	ev.cpu = (int32_t)r->cpu;
	ev.comm = comm;
	ev.site = site;
	ev.ip = r->ip;
	for (unsigned a = 0; a < site->nargs && a < UB_MAX_ARGS; a++) {
		const struct ub_val *v = &r->vals[a];
		struct usc_value *o = &u->vals[a];

		memset(o, 0, sizeof(*o));
		if (v->kind == UB_STR && (size_t)v->str_off + v->str_len < size) {
			o->kind = USC_V_STR;
			o->str = (const char *)data + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == UB_INT) {
			o->kind = USC_V_INT;
			o->u = v->val;
		} else {
			o->kind = USC_V_FAULT;
		}
	}
	if (u->ret_idx[r->site] >= 0) {
		/* a return site: report where it returns to, and the function */
		const struct ub_val *rv = &r->vals[u->ret_idx[r->site]];

		ev.func = r->ip - (site->vaddr - site->func_vaddr);
		ev.ip = rv->kind == UB_INT ? rv->val : 0;
	}
	ev.nvals = site->nargs;
	ev.vals = u->vals;
	u->stats[r->site].events++;
	u->delivered++;
	if (u->fn(&ev, u->ctx))
		u->stop_asked = 1;
	return 0;
}

static int ub_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct ub *u = ub_of(e);
	int n;

	if (!u->rb) {
		u->rb = ring_buffer__new(bpf_map__fd(u->skel->maps.events), ub_record, u, NULL);
		if (!u->rb)
			return -errno;
	}
	u->fn = fn;
	u->ctx = ctx;
	u->delivered = 0;
	n = ring_buffer__poll(u->rb, timeout_ms);
	if (n < 0 && n != -EINTR)
		return n;
	return u->delivered;
}

static void ub_stop(struct usc_engine *e)
{
	struct ub *u = ub_of(e);

	/* no new hits; what is in the ring buffer can still be read */
	for (size_t i = 0; i < u->nsites; i++) {
		bpf_link__destroy(u->links[i]);
		u->links[i] = NULL;
	}
}

static int ub_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct ub *u = ub_of(e);
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(u->skel->maps.counts);
	struct ub_counts *per = calloc(ncpu > 0 ? (size_t)ncpu : 1, sizeof(*per));

	st->events = st->lost = 0;
	for (size_t i = 0; i < u->nsites; i++) {
		__u32 key = (__u32)i;
		uint64_t hits = 0, lost = 0;

		if (per && bpf_map_lookup_elem(fd, &key, per) == 0)
			for (int c = 0; c < ncpu; c++) {
				hits += per[c].hits;
				lost += per[c].lost;
			}
		u->stats[i].hits = (int64_t)hits;
		u->stats[i].lost = (int64_t)lost;
		st->events += u->stats[i].events;
		st->lost += lost;
	}
	free(per);
	st->sites = u->stats;
	return 0;
}

static void ub_detach(struct usc_engine *e)
{
	ub_stop(e);
}

static void ub_destroy(struct usc_engine *e)
{
	struct ub *u = ub_of(e);

	ub_detach(e);
	ring_buffer__free(u->rb);
	uscope_bpf__destroy(u->skel);
	free(u->links);
	free(u->stats);
	free(u->ret_idx);
	free(u);
}

const struct usc_engine_ops bpf_engine_ops = {
	.name = "bpf",
	.open = ub_open,
	.attach = ub_attach,
	.start = ub_start,
	.poll = ub_poll,
	.stop = ub_stop,
	.stats = ub_stats,
	.detach = ub_detach,
	.destroy = ub_destroy,
};
