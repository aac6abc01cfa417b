/* uscope script in the bpf engine, the tracer's side: which sites the
 * kernel runs the program of (script.bpf.c, an object of its own, loaded
 * beside the engine's and sharing its tgids and counts maps), the program
 * put in its maps, its output records read from its ring buffer and
 * delivered as events (usc_event.script_rec), and its maps' rows read
 * back (a per-CPU aggregation's copies combined), cleared, and their
 * errors counted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "agg/table.h"
#include "core/log.h"
#include "engine/bpf/bpf_int.h"
#include "engine/bpf/script_shared.h"
#include "probe/fetch.h"
#include "script/table.h"
#include "script_bpf.skel.h"
#include "uscope.skel.h"

struct bscript {
	struct uscope_script_bpf *skel;
	struct ring_buffer *rb;
	uint32_t val_max, key_len;
	int ncpu;
};

static const struct script_blob *blob_of(const struct bpfeng *u)
{
	return u->base.ctx->set->script;
}

/* What the kernel's program cannot run: uscope runs the program on the
 * events instead. */
static const char *unfit(const struct script_blob *b)
{
	if (b->ninsns > BSCRIPT_INSNS)
		return "too many instructions";
	if (b->nstrtab > BSCRIPT_STRTAB)
		return "too many strings";
	for (uint32_t i = 0; i < b->ninsns; i++)
		if (script_insns(b)[i].op == SOP_USTACK)
			return "ustack";
	for (uint32_t m = 0; m < b->nmaps; m++)
		if (script_maps(b)[m].vallen > BSCRIPT_VAL_MAX)
			return "a map's values are too large";
	return NULL;
}

int bscript_place(struct usc_engine *e, const struct usc_site *site)
{
	const struct usc_engine_ctx *s = e->ctx;
	const struct script_blob *b = s->set->script;
	const char *why;

	if (!b || site->script < 0 || site->python || s->set->record.on || site->tail_call ||
	    site->cont || site->nargs > BPFENG_MAX_ARGS)
		return -ENOTSUP;
	if (getenv("USCOPE_BPF_SCRIPT") && !strcmp(getenv("USCOPE_BPF_SCRIPT"), "0"))
		return -ENOTSUP;
	why = unfit(b);
	if (why) {
		log_info("bpf: the script runs in uscope, not in the kernel: %s", why);
		return -ENOTSUP;
	}
	for (unsigned a = 0; a < site->nargs; a++) {
		uint8_t op = site->args[a].ninsn ? site->args[a].insn[0].op : FOP_END;

		if (op == FOP_USTACK || op == FOP_PYSTACK || op == FOP_PYFUNC ||
		    op == FOP_PYARGS || op == FOP_PYARG || op == FOP_PYRETVAL)
			return -ENOTSUP;
	}
	return 0;
}

bool bscript_on(const struct bpfeng *u)
{
	for (size_t i = 0; i < u->base.nsites; i++)
		if (u->base.sites[i]->script_in_place)
			return true;
	return false;
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static int fill(struct bpfeng *u, struct bscript *bs)
{
	const struct script_blob *b = blob_of(u);
	struct uscope_script_bpf *k = bs->skel;
	struct bscript_insns *ins = calloc(1, sizeof(*ins));
	struct bscript_strtab *st = calloc(1, sizeof(*st));
	struct bscript_maps *ms = calloc(1, sizeof(*ms));
	uint8_t *zero = calloc(1, bs->val_max > bs->key_len ? bs->val_max : bs->key_len);
	__u32 zk = 0;
	int err = -ENOMEM;

	if (!ins || !st || !ms || !zero)
		goto out;
	memcpy(ins->i, script_insns(b), b->ninsns * sizeof(struct script_insn));
	memcpy(st->s, script_strtab(b), b->nstrtab);
	memcpy(ms->m, script_maps(b), b->nmaps * sizeof(struct script_map));
	err = -errno;
	if (bpf_map_update_elem(bpf_map__fd(k->maps.sinsns), &zk, ins, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(k->maps.sstr), &zk, st, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(k->maps.sdesc), &zk, ms, BPF_ANY) ||
	    bpf_map_update_elem(bpf_map__fd(k->maps.szero), &zk, zero, BPF_ANY))
		goto out;
	for (__u32 p = 0; p < b->nprobes; p++)
		if (bpf_map_update_elem(bpf_map__fd(k->maps.sprobes), &p, &script_probes(b)[p],
					BPF_ANY))
			goto out;
	for (size_t i = 0; i < u->base.nsites; i++) {
		const struct usc_site *site = u->base.sites[i];
		struct bscript_site bsite;
		__u32 key = (__u32)i;

		memset(&bsite, 0, sizeof(bsite));
		bsite.vaddr = site->vaddr;
		bsite.offset = site->offset;
		bsite.probe = site->script >= 0 ? (unsigned)site->script : 0;
		bsite.session_site = (unsigned)(site - u->base.ctx->sites);
		bsite.nargs = site->nargs;
		for (unsigned a = 0; a < site->nargs && a < BPFENG_MAX_ARGS; a++) {
			const struct usc_fetcharg *fa = &site->args[a];

			for (unsigned n = 0; n < fa->ninsn && n < BPFENG_MAX_INSN; n++)
				memcpy(&bsite.args[a].insn[n], &fa->insn[n], sizeof(bsite.args[a].insn[n]));
			bsite.args[a].ninsn = fa->ninsn;
			bsite.arg_size[a] = (unsigned char)agg_arg_size(fa);
			bsite.arg_sign[a] = fetch_type_is_signed(fa->type);
		}
		if (bpf_map_update_elem(bpf_map__fd(k->maps.ssites), &key, &bsite, BPF_ANY))
			goto out;
	}
	err = 0;
out:
	if (err)
		log_error("bpf: cannot store the script's program: %s", strerror(-err));
	free(ins);
	free(st);
	free(ms);
	free(zero);
	return err;
}

int bscript_load(struct bpfeng *u)
{
	const struct script_blob *b = blob_of(u);
	struct bscript *bs = calloc(1, sizeof(*bs));
	struct uscope_script_bpf *k;
	uint64_t keys = 0, t0;
	int err;

	if (!bs)
		return -ENOMEM;
	u->script = bs;
	bs->ncpu = libbpf_num_possible_cpus();
	bs->val_max = 16;	/* min() and avg()'s pairs, whatever the maps are */
	bs->key_len = 8;
	for (uint32_t m = 0; m < b->nmaps; m++) {
		const struct script_map *sm = &script_maps(b)[m];

		if (sm->vallen > bs->val_max)
			bs->val_max = sm->vallen;
		if (sm->keylen > bs->key_len)
			bs->key_len = sm->keylen;
		keys += sm->max;
	}
	bs->val_max = (bs->val_max + 7) & ~7u;
	bs->skel = k = uscope_script_bpf__open();
	if (!k)
		return -errno;
	k->rodata->follow = u->follow;
	k->rodata->ninsns = b->ninsns;
	k->rodata->nprobes = b->nprobes;
	k->rodata->nmaps = b->nmaps;
	k->rodata->nstrtab = b->nstrtab;
	k->rodata->str_len = b->strlen;
	k->rodata->val_max = bs->val_max;
	k->rodata->key_len = bs->key_len;
	k->rodata->start_ns = mono_ns();
	k->rodata->ops_used = 0;
	k->rodata->mops_used = 0;
	for (uint32_t i = 0; i < b->ninsns; i++) {
		const struct script_insn *in = &script_insns(b)[i];

		k->rodata->ops_used |= 1u << (in->op & 31);
		if (in->op == SOP_MAP)
			k->rodata->mops_used |= 1u << (in->imm & 31);
	}
	if (u->multi)
		bpf_program__set_expected_attach_type(k->progs.usc_script, BPFENG_UPROBE_MULTI);
	if (bpf_map__set_max_entries(k->maps.ssites, u->base.nsites ? (__u32)u->base.nsites : 1) ||
	    bpf_map__set_max_entries(k->maps.sprobes, b->nprobes ? b->nprobes : 1) ||
	    bpf_map__set_key_size(k->maps.svals, 8 + bs->key_len) ||
	    bpf_map__set_key_size(k->maps.saggs, 8 + bs->key_len) ||
	    bpf_map__set_value_size(k->maps.svals, bs->val_max) ||
	    bpf_map__set_value_size(k->maps.saggs, bs->val_max) ||
	    bpf_map__set_max_entries(k->maps.svals, keys ? (__u32)keys : 1) ||
	    bpf_map__set_max_entries(k->maps.saggs, keys ? (__u32)keys : 1) ||
	    bpf_map__set_value_size(k->maps.szero, bs->val_max > bs->key_len ? bs->val_max :
						  bs->key_len) ||
	    bpf_map__reuse_fd(k->maps.tgids, bpf_map__fd(u->skel->maps.tgids)) ||
	    bpf_map__reuse_fd(k->maps.counts, bpf_map__fd(u->skel->maps.counts)))
		return -EINVAL;
	t0 = mono_ns();
	/* USCOPE_BPF_SCRIPT_ALL=1: every case of the executor verified, as
	 * a program that has every op would be (the tests load it so) */
	if (getenv("USCOPE_BPF_SCRIPT_ALL") && !strcmp(getenv("USCOPE_BPF_SCRIPT_ALL"), "1")) {
		k->rodata->ops_used = ~0u;
		k->rodata->mops_used = ~0u;
	}
	if (uscope_script_bpf__load(k)) {
		err = -errno;
		log_error("cannot load the bpf engine's script program: %s", strerror(-err));
		return err;
	}
	{
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(k->progs.usc_script), &info, &len))
			info.verified_insns = 0;
		log_debug("bpf: the script's program loaded in %.1f ms (%u instructions verified)",
			  (double)(mono_ns() - t0) / 1e6, info.verified_insns);
	}
	return fill(u, bs);
}

struct bpf_program *bscript_prog(struct bpfeng *u)
{
	return u->script ? u->script->skel->progs.usc_script : NULL;
}

/* An output record: struct bscript_out, then the program's. */
static int record(void *ctx, void *data, size_t size)
{
	struct bpfeng *u = ctx;
	const struct bscript_out *h = data;
	struct usc_event ev;
	char comm[17];

	if (u->stop_asked || size < sizeof(*h) + sizeof(struct script_rec) ||
	    h->site >= u->base.nsites)
		return 0;
	memcpy(comm, h->comm, 16);
	comm[16] = 0;
	memset(&ev, 0, sizeof(ev));
	ev.time_ns = h->ts;
	ev.pid = (int32_t)h->pid;
	ev.tid = (int32_t)h->tid;
	ev.cpu = (int32_t)h->cpu;
	ev.comm = comm;
	ev.site = u->base.sites[h->site];
	ev.script_rec = h + 1;
	ev.script_len = (uint32_t)(size - sizeof(*h));
	u->stats[h->site].events++;
	u->delivered++;
	if (u->fn(&ev, u->ctx))
		u->stop_asked = 1;
	return 0;
}

int bscript_poll(struct bpfeng *u, int timeout_ms)
{
	struct bscript *bs = u->script;
	int n;

	if (!bs->rb) {
		bs->rb = ring_buffer__new(bpf_map__fd(bs->skel->maps.sout), record, u, NULL);
		if (!bs->rb)
			return -errno;
	}
	n = ring_buffer__poll(bs->rb, timeout_ms);
	return n < 0 && n != -EINTR ? n : 0;
}

void bscript_free(struct bpfeng *u)
{
	if (!u->script)
		return;
	ring_buffer__free(u->script->rb);
	uscope_script_bpf__destroy(u->script->skel);
	free(u->script);
	u->script = NULL;
}

/* ---- the maps read back ------------------------------------------------------ */

struct walk {
	struct bscript *bs;
	const struct script_map *m;
	int fd;
	bool agg;
	uint8_t *key, *next, *val, *sum;
	size_t klen;
};

static int walk_map(struct bpfeng *u, int mi, bool agg,
		    int (*each)(struct walk *w, void *arg), void *arg)
{
	struct bscript *bs = u->script;
	const struct script_blob *b = blob_of(u);
	struct walk w = {.bs = bs, .m = &script_maps(b)[mi], .agg = agg};
	size_t vals = agg ? (size_t)bs->ncpu * bs->val_max : bs->val_max;
	bool first = true;
	int ret = 0;

	w.fd = bpf_map__fd(agg ? bs->skel->maps.saggs : bs->skel->maps.svals);
	w.klen = 8 + bs->key_len;
	w.key = calloc(1, w.klen);
	w.next = calloc(1, w.klen);
	w.val = calloc(1, vals);
	w.sum = calloc(1, bs->val_max);
	if (!w.key || !w.next || !w.val || !w.sum) {
		ret = -ENOMEM;
		goto out;
	}
	while (!ret && !bpf_map_get_next_key(w.fd, first ? NULL : w.key, w.next)) {
		uint32_t map;

		first = false;
		memcpy(w.key, w.next, w.klen);
		memcpy(&map, w.key, 4);
		if (map != (uint32_t)mi)
			continue;
		ret = each(&w, arg);
	}
out:
	free(w.key);
	free(w.next);
	free(w.val);
	free(w.sum);
	return ret;
}

struct rows_arg {
	int mi;
	void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val);
	void *arg;
};

static int each_row(struct walk *w, void *p)
{
	struct rows_arg *a = p;

	if (bpf_map_lookup_elem(w->fd, w->key, w->val))
		return 0;	/* deleted meanwhile */
	if (w->agg) {
		memset(w->sum, 0, w->bs->val_max);
		for (int c = 0; c < w->bs->ncpu; c++)
			stab_combine(w->m, w->sum, w->val + (size_t)c * w->bs->val_max, c == 0);
		a->fn(a->arg, a->mi, w->key + 8, w->sum);
	} else {
		a->fn(a->arg, a->mi, w->key + 8, w->val);
	}
	return 0;
}

int bscript_rows(struct usc_engine *e, int mi,
		 void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val), void *arg)
{
	struct bpfeng *u = bpfeng_of(e);
	const struct script_blob *b = blob_of(u);
	struct rows_arg a = {mi, fn, arg};

	if (!u->script || !b || mi < 0 || (uint32_t)mi >= b->nmaps)
		return 0;
	return walk_map(u, mi, script_vk_agg(script_maps(b)[mi].vk), each_row, &a);
}

static int each_clear(struct walk *w, void *p)
{
	bool zero = *(bool *)p;
	__u32 mi;

	if (zero) {
		memset(w->val, 0, w->agg ? (size_t)w->bs->ncpu * w->bs->val_max : w->bs->val_max);
		bpf_map_update_elem(w->fd, w->key, w->val, BPF_EXIST);
		return 0;
	}
	if (!bpf_map_delete_elem(w->fd, w->key)) {
		__u64 n = 0;

		memcpy(&mi, w->key, 4);
		/* the map's count of keys: one fewer */
		if (!bpf_map_lookup_elem(bpf_map__fd(w->bs->skel->maps.snkeys), &mi, &n) && n) {
			n--;
			bpf_map_update_elem(bpf_map__fd(w->bs->skel->maps.snkeys), &mi, &n, BPF_ANY);
		}
	}
	return 0;
}

void bscript_clear(struct usc_engine *e, int mi, bool zero)
{
	struct bpfeng *u = bpfeng_of(e);
	const struct script_blob *b = blob_of(u);

	if (!u->script || !b || mi < 0 || (uint32_t)mi >= b->nmaps)
		return;
	walk_map(u, mi, script_vk_agg(script_maps(b)[mi].vk), each_clear, &zero);
}

static uint64_t percpu_sum(int fd, __u32 key, int ncpu)
{
	uint64_t *v = calloc((size_t)(ncpu > 0 ? ncpu : 1), 8), sum = 0;

	if (v && !bpf_map_lookup_elem(fd, &key, v))
		for (int c = 0; c < ncpu; c++)
			sum += v[c];
	free(v);
	return sum;
}

void bscript_errors(struct usc_engine *e, uint64_t *errs, uint64_t *full)
{
	struct bpfeng *u = bpfeng_of(e);
	const struct script_blob *b = blob_of(u);
	struct bscript *bs = u->script;

	if (!bs || !b)
		return;
	for (__u32 k = 1; k < SERR_NR; k++)
		errs[k] += percpu_sum(bpf_map__fd(bs->skel->maps.serrs), k, bs->ncpu);
	for (__u32 m = 0; full && m < b->nmaps; m++)
		full[m] += percpu_sum(bpf_map__fd(bs->skel->maps.sfull), m, bs->ncpu);
}
