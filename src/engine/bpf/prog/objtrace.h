/* Part of the bpf engine's program (engine/bpf/uscope.bpf.c includes it
 * once, in this place: it uses the maps, state and helpers defined above
 * it there and is no header of its own).
 *
 * Objtrace: whether a hit concerns a followed object. */

/* ---- objtrace ------------------------------------------------------------ */

/* The mask of the argument registers (rdi, rsi, rdx, rcx, r8, r9) among
 * those tested (the site's obj_regs) that hold a followed object. */
static __always_inline __u64 obj_mask(const __u64 *regs, __u32 tested)
{
	static const __u8 r[BPFENG_OBJ_NREGS] = {USC_REG_DI, USC_REG_SI, USC_REG_DX, USC_REG_CX,
					     USC_REG_R8, USC_REG_R9};
	__u64 mask = 0;

	for (int i = 0; i < BPFENG_OBJ_NREGS; i++) {
		__u64 k = regs[r[i]];

		if (k && (tested >> i & 1) && bpf_map_lookup_elem(&objs, &k))
			mask |= 1ULL << i;
	}
	return mask;
}

/* A site's verdict on a hit (enum bpfeng_obj_role), its arguments evaluated
 * into the record: FROM 1 (followed) or 2 (the set is full: counted),
 * UNTIL 1 (released), MATCH the mask; 0: no record. */
static __always_inline __u64 obj_verdict(const struct bpfeng_site *site, struct task_state *ts,
					 struct bpfeng_counts *cnt)
{
	const struct bpfeng_rec *rec = (const struct bpfeng_rec *)ts->buf;
	__u64 k;
	__u8 one = 1;
	long err;

	if (site->obj == BPFENG_OBJ_MATCH)
		return obj_mask(ts->regs, site->obj_regs);
	if (rec->vals[0].kind != BPFENG_INT || !(k = rec->vals[0].val))
		return 0;
	if (site->obj == BPFENG_OBJ_UNTIL)
		return bpf_map_delete_elem(&objs, &k) == 0;
	err = bpf_map_update_elem(&objs, &k, &one, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: followed already */) {
		__sync_fetch_and_add(&cnt->full, 1);
		return 2;
	}
	return 1;
}
