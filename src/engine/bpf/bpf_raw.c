/* The bpf program's records turned into events (engine/raw.h): what the
 * engine does as it reads its ring buffer, and what a recording's reader
 * does with the records in the file. Apart from the rest of the engine so
 * that the reader (and its fuzzer) link it alone. */
#include <errno.h>
#include <string.h>

#include "engine/bpf/bpf_shared.h"
#include "python/frame.h"
#include "engine/raw.h"

int bpf_raw_peek(const void *rec, size_t len, uint32_t *site, uint64_t *time_ns)
{
	const struct bpfeng_rec *r = rec;

	if (len < sizeof(*r) || r->nargs > BPFENG_MAX_ARGS)
		return -EINVAL;
	*site = r->site;
	*time_ns = r->ts;
	return 0;
}

int bpf_raw_event(const void *data, size_t size, const struct usc_site *const *sites,
		  size_t nsites, char *comm, struct usc_value *vals, struct usc_event *ev)
{
	const struct bpfeng_rec *r = data;
	const struct usc_site *site, *via;

	if (size < sizeof(*r) || r->site >= nsites || r->via >= nsites)
		return -EINVAL;
	site = sites[r->site];
	via = sites[r->via];
	memset(ev, 0, sizeof(*ev));
	memcpy(comm, r->comm, 16);
	comm[16] = 0;
	ev->time_ns = r->ts;
	ev->pid = (int32_t)r->pid;
	ev->tid = (int32_t)r->tid;
	ev->cpu = (int32_t)r->cpu;
	ev->comm = comm;
	ev->site = site;
	ev->ip = r->ip;
	for (unsigned a = 0; a < site->nargs && a < BPFENG_MAX_ARGS; a++) {
		const struct bpfeng_val *v = &r->vals[a];
		struct usc_value *o = &vals[a];

		memset(o, 0, sizeof(*o));
		if (a >= r->nargs) {
			o->kind = USC_V_FAULT;
		} else if (v->kind == BPFENG_STR && (size_t)v->str_off + v->str_len < size) {
			o->kind = USC_V_STR;
			o->str = (const char *)data + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == BPFENG_STACK && v->str_len >= sizeof(struct fetch_stack_hdr) &&
			   (size_t)v->str_off + v->str_len <= size &&
			   ((const struct fetch_stack_hdr *)((const char *)data + v->str_off))->len ==
				   v->str_len - sizeof(struct fetch_stack_hdr)) {
			o->kind = USC_V_USTACK;
			o->str = (const char *)data + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == BPFENG_WALK && (size_t)v->str_off + v->str_len <= size &&
			   fetch_walk_valid((const char *)data + v->str_off, v->str_len)) {
			o->kind = USC_V_WALK;
			o->str = (const char *)data + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == BPFENG_PYSTACK && (size_t)v->str_off + v->str_len <= size &&
			   python_stack_ok((const char *)data + v->str_off, v->str_len)) {
			o->kind = USC_V_PYSTACK;
			o->str = (const char *)data + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == BPFENG_INT) {
			o->kind = USC_V_INT;
			o->u = v->val;
		} else if (v->kind == BPFENG_NULL) {
			o->kind = USC_V_NULL;
		} else {
			o->kind = USC_V_FAULT;
		}
	}
	if (site->ret_site && site->nargs < BPFENG_MAX_ARGS) {
		/* a return site: report where it returns to, and the function (a
		 * tail call delivered at its callee's ret: the module is the
		 * same, its load bias is that ret's); the return address is the
		 * hidden last argument */
		const struct bpfeng_val *rv = &r->vals[site->nargs];

		ev->func = r->ip - via->vaddr + site->func_vaddr;
		ev->ip = site->nargs < r->nargs && rv->kind == BPFENG_INT ? rv->val : 0;
	}
	ev->nvals = site->nargs < BPFENG_MAX_ARGS ? site->nargs : BPFENG_MAX_ARGS;
	ev->vals = vals;
	return 0;
}
