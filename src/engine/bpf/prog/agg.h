/* Part of the bpf engine's program (engine/bpf/uscope.bpf.c includes it
 * once, in this place: it uses the maps, state and helpers defined above
 * it there and is no header of its own).
 *
 * Aggregation: a hit counted or histogrammed in its key's row, and
 * latency's entry/return pairing per thread. */

/* ---- aggregation --------------------------------------------------------- */

struct key_ctx {
	const struct bpfeng_site *site;
	struct task_state *ts;
	__u32 at;
};

/* Key slot i from the record's value i (agg/agg_shared.h's layout). */
static long key_step(__u32 i, void *data)
{
	struct key_ctx *k = data;
	const struct bpfeng_site *site = k->site;
	const struct bpfeng_rec *rec = (const struct bpfeng_rec *)k->ts->buf;
	const struct bpfeng_val *v;
	__u32 str = site->arg_str[i & (BPFENG_MAX_ARGS - 1)], len;
	__u32 smax = site->agg_str_max & 255;
	struct agg_slot *sl;

	if (i >= BPFENG_MAX_ARGS || i >= site->agg_nkey)
		return 1;
	len = str ? 8 + smax : 16;
	if (k->at + len > BPFENG_KEY_MAX || k->at > BPFENG_KEY_MAX - 16)
		return 1;
	v = &rec->vals[i & (BPFENG_MAX_ARGS - 1)];
	sl = (struct agg_slot *)&k->ts->key.key[k->at & (BPFENG_KEY_MAX - 1)];
	if (v->kind == BPFENG_FAULT) {
		sl->kind = AGG_K_FAULT;
	} else if (v->kind == BPFENG_STACKID) {
		sl->kind = AGG_K_STACK;	/* the tracer makes it its own id */
		sl->pad = rec->pid;
		sl->v = v->val;
	} else if (v->kind == BPFENG_NULL) {
		sl->kind = AGG_K_NULL;
	} else if (str && v->kind == BPFENG_STR) {
		__u32 n = v->str_len < smax ? v->str_len : smax;
		__u32 at = (k->at + 8) & (BPFENG_KEY_MAX - 1);

		sl->kind = AGG_K_STR;
		sl->cut = v->str_len > smax;
		sl->len = n;
		if (n > 248 || at + n > BPFENG_KEY_MAX)
			return 1;
		bpf_probe_read_kernel(&k->ts->key.key[at], n & 255,
				      &k->ts->buf[v->str_off & (BPFENG_REC_MAX - 1)]);
	} else {
		sl->kind = AGG_K_INT;
		sl->v = (__u64)agg_value_of(v->val, site->arg_size[i & (BPFENG_MAX_ARGS - 1)], 0);
	}
	k->at += len;
	return 0;
}

static __always_inline void make_key(const struct bpfeng_site *site, __u32 idx,
				     struct task_state *ts)
{
	struct key_ctx k = {site, ts, 0};

	__builtin_memset(&ts->key, 0, sizeof(ts->key));
	ts->key.site = idx;
	bpf_loop(BPFENG_MAX_ARGS, key_step, &k, 0);
}

/* One value into the row of key. */
static __always_inline void row_add(struct bpfeng_agg_key *key, __s64 v, struct bpfeng_counts *cnt)
{
	struct agg_val *a = bpf_map_lookup_elem(&agg, key);
	__u64 ep = agg_epoch;
	__u64 b;

	if (!a) {
		long err = bpf_map_update_elem(&agg, key, agg_zeros, BPF_NOEXIST);

		if (err && err != -17 /* EEXIST: another CPU's just now */) {
			__sync_fetch_and_add(&cnt->full, 1);
			return;
		}
		a = bpf_map_lookup_elem(&agg, key);
		if (!a)
			return;
	}
	agg_val_add(a, v, ep);	/* this CPU's values */
	if (!agg_nbuckets)
		return;
	b = agg_linear ? agg_linear_bucket(v, agg_lmin, agg_lmax, agg_lstep, agg_nbuckets) :
			 agg_log_bucket(v);
	/* a 64-bit index, bounded where it is used: the value's size is the
	 * buckets' (agg_nbuckets, a constant to the verifier) */
	asm volatile("" : "+r"(b));
	if (b < agg_nbuckets && b < BPFENG_BUCKETS_MAX)
		__sync_fetch_and_add((__u64 *)(a + 1) + b, 1);
}

struct lat_ctx {
	struct task_state *ts;
	__u32 func;
	__s32 found;
};

static long lat_find(__u32 k, void *data)
{
	struct lat_ctx *l = data;
	__u32 n = l->ts->nlat, i;

	if (k >= n || k >= BPFENG_LAT_DEPTH)
		return 1;
	i = (n - 1 - k) & (BPFENG_LAT_DEPTH - 1);
	if (l->ts->lat[i].func == l->func) {
		l->found = i;
		return 1;
	}
	return 0;
}

/* Latency: the call of func ends; its frame, and those above it (calls
 * whose return was not seen: a longjmp), go. As src/flow pairs events. */
__noinline int lat_return(const struct bpfeng_site *site, struct bpfeng_counts *cnt)
{
	struct task_state *ts = ts_map();	/* the frame's key: a map value's */
	struct lat_ctx l = {ts, 0, -1};
	struct lat_frame *f;
	__u64 dt;

	if (!ts || !site || !cnt || !ts->nlat)
		return 0;
	l.func = site->agg_func;
	bpf_loop(BPFENG_LAT_DEPTH, lat_find, &l, 0);
	if (l.found < 0)
		return 0;	/* no entry seen: tracing began inside the call */
	f = &ts->lat[l.found & (BPFENG_LAT_DEPTH - 1)];
	ts->nlat = l.found;
	if (f->nokey)
		return 0;
	dt = bpf_ktime_get_ns() - f->ts;
	row_add(&f->key, (__s64)(dt / (agg_unit_ns ? agg_unit_ns : 1)), cnt);
	return 0;
}

__noinline int aggregate(const struct bpfeng_site *site, __u32 idx, struct bpfeng_counts *cnt)
{
	struct task_state *ts = ts_map();	/* the key: a map value's */
	const struct bpfeng_rec *rec;
	__s32 vi;
	__s64 v = 0;

	if (!ts || !site || !cnt)
		return 0;
	rec = (const struct bpfeng_rec *)ts->buf;
	vi = site->agg_value;

	if (site->agg == BPFENG_AGG_ROW && vi >= 0) {
		const struct bpfeng_val *val = &rec->vals[vi & (BPFENG_MAX_ARGS - 1)];

		if (vi >= BPFENG_MAX_ARGS || val->kind != BPFENG_INT) {
			__sync_fetch_and_add(&cnt->fault, 1);
			return 0;
		}
		v = agg_value_of(val->val, site->arg_size[vi & (BPFENG_MAX_ARGS - 1)],
				 site->arg_sign[vi & (BPFENG_MAX_ARGS - 1)]);
	}
	make_key(site, idx, ts);
	if (site->agg == BPFENG_AGG_ENTRY) {
		__u32 n = ts->nlat;
		struct lat_frame *f;

		if (n >= BPFENG_LAT_DEPTH) {
			__sync_fetch_and_add(&cnt->lost, 1);	/* deeper than we keep */
			return 0;
		}
		f = &ts->lat[n & (BPFENG_LAT_DEPTH - 1)];
		f->func = site->agg_func;
		f->nokey = 0;
		__builtin_memcpy(&f->key, &ts->key, sizeof(f->key));
		ts->nlat = n + 1;
		f->ts = bpf_ktime_get_ns();
		return 0;
	}
	row_add(&ts->key, v, cnt);
	return 0;
}
