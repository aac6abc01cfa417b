/* The agent's Python (src/python): $pystack, the frames of the thread that
 * hits, walked where the probe runs with the walker every engine shares
 * (python/walk.h).
 *
 * The frames are read with plain loads: the chain belongs to the thread the
 * probe runs on, which is not running Python while it is inside our probe,
 * so every frame on it is mapped (a system call a frame would cost
 * microseconds: bench/pywalk.c). What could still be wrong is a pointer
 * that is not one (memory overwritten by a bug of the program's own): every
 * address the walk loads from must be a canonical user address past the
 * first page, 8-aligned, or the walk ends there as a fault. The thread
 * state comes from CPython's thread-specific key in the thread's own TCB
 * (glibc's struct pthread), the key from _PyRuntime, both mapped for the
 * process's life. Where the key is not known (3.14, whose _Py_DebugOffsets
 * do not carry it) the thread's state is looked for in the interpreters'
 * thread lists, by its thread_id (pthread_self(): the thread pointer): the
 * other threads' states there may be freed under the walk, so those reads
 * are process_vm_readv's, which cannot fault (a system call each); the
 * state found is kept in the thread's slot with the pthread key of the
 * thread's TCB that held it then, and checked at each hit by that key
 * (two loads), else by one such read (agent_py_tstate). */
#include "engine/inject/agent/pyagent.h"
#include "probe/filter_eval.h"	/* filter_glob_full alone */

static void seen_frames(struct inj_py *py, struct inj_slot *s, const struct python_frame *f,
			uint32_t n);

static inline const struct inj_py *py_of(const struct inj_ctl *c)
{
	return c->py_off ? (const struct inj_py *)((const char *)c + c->py_off) : 0;
}

/* Is ts this thread's state still? Its thread_id (pthread_self(): the
 * thread pointer) and native_thread_id (the TID, where the slot has it),
 * in one read that cannot fault: a state freed since reads otherwise. */
static int tstate_mine(const struct inj_ctl *c, const struct inj_py *py,
		       const struct inj_slot *s, uint64_t ts, uint64_t fs)
{
	uint64_t v[2] = {0, 0};
	struct py_iov l = {v, 16}, r[2] = {{(void *)(ts + py->off.ts_thread_id), 8},
					   {(void *)(ts + py->off.ts_native_thread_id), 8}};
	uint32_t tgid = *(volatile const uint32_t *)c->self;

	if (py->off.ts_native_thread_id == PYOFF_NONE)	/* (before 3.11: none) */
		r[1].base = r[0].base;
	return tgid && sys6(SYS_process_vm_readv, tgid, (long)&l, 1, (long)r, 2, 0) == 16 &&
	       v[0] == fs &&
	       (!s->tid || py->off.ts_native_thread_id == PYOFF_NONE || v[1] == s->tid);
}

/* glibc: the data of pthread key k (< 32) in the TCB at fs. */
ALWAYS uint64_t tcb_key_data(const struct inj_py *py, uint64_t fs, uint32_t k)
{
	return *(volatile const uint64_t *)(fs + py->glibc.specific_1stblock + 16 * k + 8);
}

/* Which of this thread's first 32 pthread keys holds ts (CPython binds a
 * thread's state to its own key, which the debug offsets do not say): the
 * key + 1, or 0. Plain loads of the thread's own TCB (glibc's: the tid at
 * the thread pointer was checked at attach). */
static uint32_t tcb_key_of(const struct inj_ctl *c, const struct inj_py *py, uint64_t fs,
			   uint64_t ts)
{
	if (c->key_mode != INJ_KEY_TID_AT_FS || !fs || !ts || !py->glibc.specific_1stblock)
		return 0;	/* (no glibc whose struct pthread is known) */
	for (uint32_t k = 0; k < 32; k++)
		if (tcb_key_data(py, fs, k) == ts)
			return k + 1;
	return 0;
}

/* The thread's PyThreadState, as pthread_getspecific(CPython's key) would
 * answer in it, or without the key (3.14) the one of its interpreter's
 * thread list whose thread_id is this thread's, kept in its slot: checked
 * at each use by the pthread key of its TCB that held it when found (two
 * loads: CPython clears it when the state goes, or binds another), else
 * by one read of it that cannot fault; 0: none (a thread that never ran
 * Python, or a runtime not initialized yet). */
uint64_t agent_py_tstate(const struct inj_ctl *c, const struct inj_py *py, struct inj_slot *s)
{
	int32_t init;
	uint32_t key;
	uint64_t ts = 0, fs;

	if (py->off.rt_tss_key == PYOFF_NONE) {
		fs = fs_base(c);
		if (s && s->py_ts) {
			if (s->py_key ? tcb_key_data(py, fs, s->py_key - 1) == s->py_ts :
					tstate_mine(c, py, s, s->py_ts, fs))
				return s->py_ts;
		}
		ts = pw_tfind(&py->off, py->runtime, py->off.ts_thread_id, fs, (void *)c);
		if (s) {
			s->py_ts = ts;
			s->py_key = tcb_key_of(c, py, fs, ts);
		}
		return ts;
	}
	init = *(volatile const int32_t *)(py->runtime + py->off.rt_tss_init);
	key = *(volatile const uint32_t *)(py->runtime + py->off.rt_tss_key);
	if (!init || pw_tss(&py->glibc, fs_base(c), key, &ts, 0))
		return 0;
	return ts;
}

void agent_pystack(const struct inj_ctl *c, struct inj_slot *s, int64_t imm, char *rec,
		   uint32_t *off, struct inj_val *v)
{
	struct python_stack_hdr *h = (struct python_stack_hdr *)(rec + *off);
	struct python_frame *out = (struct python_frame *)(h + 1);
	const struct inj_py *py = py_of(c);
	uint32_t want = imm < 1 ? 1 : imm > PYTHON_FRAMES_MAX ? PYTHON_FRAMES_MAX : (uint32_t)imm;
	uint64_t ts;

	h->n = 0;
	h->want = (uint16_t)want;
	h->status = PYWALK_NONE;
	h->pad = 0;
	if (py && py->on && (ts = agent_py_tstate(c, py, s))) {
		struct python_walk w;

		pw_walk(&py->off, ts, &w, out, want, 0);
		h->n = w.n;
		h->status = (uint8_t)w.status;
		if (py->seen_off && s)
			seen_frames((struct inj_py *)py, s, out, w.n);
	}
	v->kind = INJ_PYSTACK;
	v->str_off = (uint16_t)*off;
	v->str_len = (uint16_t)(sizeof(*h) + h->n * sizeof(*out));
	*off += (uint32_t)(sizeof(*h) + h->n * sizeof(*out) + 7) & ~7u;
}

/* ---- py: probes --------------------------------------------------------------
 *
 * CPython calls agent_py_profile for every call and return of Python code
 * in a thread whose state has it as its C profile function (CPython's own
 * API, _PyEval_SetProfile: what sys.setprofile and cProfile use). It gets
 * there three ways, always with the GIL held: Py_AddPendingCall(
 * agent_py_pending), which the tracer schedules when it attaches to a
 * running interpreter (the main thread runs it at its next eval breaker);
 * the returns of PyEval_RestoreThread and PyEval_AcquireThread (a thread
 * takes the GIL: a new thread, or one back from a blocking call), hidden
 * sites of kind INJ_PYHOOK; and there, every thread state of every
 * interpreter is given it, not only the caller's. A thread state with a
 * profile function of someone else's (cProfile) is left alone. At detach
 * (or when the tracer has died) each thread takes it out at its next
 * event, and a pending call takes it out of all. Where no probe needs a
 * return or a stack, 3.11's calls come through the agent's frame
 * evaluator instead (pyeval.c: the same calls, a third of the cost), and
 * on 3.12 and later through sys.monitoring (pymon.c).
 *
 * Which functions fire is decided once a code object, at its first call:
 * its qualname and its module's __name__ against every probe's globs; the
 * verdict (a mask of probes) is kept by address with its identity
 * (py_code_ident: co_qualname, co_filename, co_firstlineno), which
 * a code object made later at the same address would not share. The
 * objects read here are alive and the thread holds the GIL: plain loads. */

#define VERDICT_PROBES 32	/* slots a verdict is looked for in */
#define MOD_ENTRIES 64		/* module dict entries __name__ is looked for in */

typedef int (*pytrace_fn)(uint64_t obj, uint64_t frame, int what, uint64_t arg);
typedef int (*setprofile_fn)(uint64_t tstate, pytrace_fn fn, uint64_t obj);

int agent_py_profile(uint64_t obj, uint64_t frame, int what, uint64_t arg) HIDDEN;

__asm__(".text\n.globl agent_trap\n.hidden agent_trap\n.type agent_trap, @function\n"
	"agent_trap:\n\tint3\n\tint3\n.size agent_trap, .-agent_trap\n");

/* ---- strings ---- */

/* A str's text as UTF-8 into out (max bytes, NUL-ended, cut): its length,
 * or -1 when it is not a ready compact str. */
static int str_utf8(const struct inj_py *py, uint64_t s, char *out, uint32_t max)
{
	const struct python_offsets *o = &py->off;
	uint32_t state, kind, n = 0;
	uint64_t len, data;

	if (!s || ld64(s + o->ob_type) != py->unicode_type || max < 5)
		return -1;
	state = ld32(s + o->str_state);
	kind = (state >> o->str_kind_shift) & 7;
	if (!((state >> o->str_compact_bit) & 1) || (kind != 1 && kind != 2 && kind != 4))
		return -1;
	len = ld64(s + o->str_length);
	data = s + ((state >> o->str_ascii_bit) & 1 ? o->str_ascii_size : o->str_compact_size);
	for (uint64_t i = 0; i < len && n + 4 < max; i++) {
		uint32_t ch = kind == 1 ? ld8(data + i) :
			      kind == 2 ? *(volatile const uint16_t *)(data + 2 * i) :
					  ld32(data + 4 * i);

		if (ch < 0x80) {
			out[n++] = (char)ch;
		} else if (ch < 0x800) {
			out[n++] = (char)(0xc0 | ch >> 6);
			out[n++] = (char)(0x80 | (ch & 63));
		} else if (ch < 0x10000) {
			out[n++] = (char)(0xe0 | ch >> 12);
			out[n++] = (char)(0x80 | ((ch >> 6) & 63));
			out[n++] = (char)(0x80 | (ch & 63));
		} else {
			out[n++] = (char)(0xf0 | ch >> 18);
			out[n++] = (char)(0x80 | ((ch >> 12) & 63));
			out[n++] = (char)(0x80 | ((ch >> 6) & 63));
			out[n++] = (char)(0x80 | (ch & 63));
		}
	}
	out[n] = 0;
	return (int)n;
}

static uint32_t cstrlen(const char *s, uint32_t max)
{
	uint32_t n = 0;

	while (n < max && s[n])
		n++;
	return n;
}

static int same(const char *a, uint32_t na, const char *b, uint32_t nb)
{
	if (na != nb)
		return 0;
	for (uint32_t i = 0; i < na; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

/* The str of "__name__" in a module's dict: 0 when there is none. */
static uint64_t module_name(const struct inj_py *py, uint64_t dict)
{
	const struct python_offsets *o = &py->off;
	uint64_t keys, entries, n;
	uint32_t esz, koff;
	char name[16];

	if (!dict || !(keys = ld64(dict + o->dict_keys)) || ld64(dict + o->dict_values))
		return 0;	/* (a split table: an object's __dict__, not a module's) */
	if (o->flags & PYOFF_DICT_OLD) {
		/* 3.8 to 3.10: dk_size slots, each index 1, 2, 4 or 8 bytes
		 * (DK_IXSIZE), then the entries (hash, key, value) */
		uint64_t size = ld64(keys + o->dk_log2_size);

		if (size > (1ULL << 32))
			return 0;
		entries = keys + o->dk_indices +
			  size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffULL ? 4 : 8);
		esz = o->dk_entry;
		koff = 8;
	} else {
		entries = keys + o->dk_indices + (1ULL << ld8(keys + o->dk_log2_index_bytes));
		esz = ld8(keys + o->dk_kind) ? o->dk_str_entry : o->dk_entry;
		koff = ld8(keys + o->dk_kind) ? 0 : 8;
	}
	n = ld64(keys + o->dk_nentries);
	for (uint64_t i = 0; i < n && i < MOD_ENTRIES; i++) {
		uint64_t k = ld64(entries + i * esz + koff);

		if (k && str_utf8(py, k, name, sizeof(name)) == 8 && same(name, 8, "__name__", 8))
			return ld64(entries + i * esz + koff + 8);
	}
	return 0;
}

/* ---- verdicts ---- */

struct debuginfo_names {
	char module[INJ_PY_STR], qualname[INJ_PY_STR], filename[INJ_PY_STR];
	int nm, nq, nf;
};

/* A code object's names (and line table) copied into the arena, for the
 * tracer, under key (its address, or a py: probe's py_func_key). lines:
 * its bytes, nlines of them (INJ_PY_NOLINES: none). */
static void arena_add(struct inj_py *py, uint64_t code, uint64_t key,
		      const struct debuginfo_names *n, uint64_t lines, uint32_t nlines)
{
	uint32_t nl = nlines == INJ_PY_NOLINES ? 0 : nlines;
	uint32_t need = (uint32_t)(sizeof(struct inj_py_name) + n->nm + n->nq + n->nf + 3 + nl + 7) &
			~7u;
	uint32_t at = py->arena_used;
	char *base = (char *)py + py->arena_off;
	struct inj_py_name *r;
	char *d;

	do {
		if (at + need > INJ_PY_ARENA)
			return;	/* full: the tracer reads the names from memory */
	} while (!__atomic_compare_exchange_n(&py->arena_used, &at, at + need, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	r = (struct inj_py_name *)(base + at);
	r->firstlineno = (int32_t)ld32(code + py->off.co_firstlineno);
	r->nmodule = (uint16_t)n->nm;
	r->nqualname = (uint16_t)n->nq;
	r->nfilename = (uint16_t)n->nf;
	r->ncode = 0;
	if (py->off.flags & PYOFF_FRAMEOBJ) {
		/* 3.8 to 3.10: no incomplete frames; the code's size in code
		 * units, where 3.8's and 3.9's last line ends */
		uint64_t bytes = ld64(ld64(code + py->off.co_code) + py->off.ob_size) / 2;

		r->firsttraceable = 0;
		r->ncode = (uint16_t)(bytes > 0xffff ? 0xffff : bytes);
	} else {
		r->firsttraceable = (int32_t)ld32(code + py->off.co_firsttraceable);
	}
	r->nlinetable = nlines;
	r->pid = *(volatile const uint32_t *)my_ctl()->self;
	d = (char *)(r + 1);
	for (int i = 0; i <= n->nm; i++)
		*d++ = n->module[i];
	for (int i = 0; i <= n->nq; i++)
		*d++ = n->qualname[i];
	for (int i = 0; i <= n->nf; i++)
		*d++ = n->filename[i];
	for (uint32_t i = 0; i < nl; i++)
		*d++ = (char)ld8(lines + i);
	__atomic_store_n(&r->code, key, __ATOMIC_RELEASE);	/* last: it is whole */
}

/* key: the code object's py_func_key, its names are told under */
static uint64_t decide(struct inj_py *py, uint64_t code, uint64_t key, uint64_t iframe)
{
	const struct python_offsets *o = &py->off;
	struct debuginfo_names n;
	uint64_t mask = 0;

	n.nq = str_utf8(py, ld64(code + o->co_qualname), n.qualname, INJ_PY_STR);
	n.nf = str_utf8(py, ld64(code + o->co_filename), n.filename, INJ_PY_STR);
	n.nm = iframe ? str_utf8(py, module_name(py, ld64(iframe + o->fr_globals)), n.module,
				 INJ_PY_STR) : -1;
	if (n.nq < 0)
		return 0;	/* no qualname: nothing matches */
	if (n.nf < 0)
		n.filename[n.nf = 0] = 0;
	if (n.nm < 0)
		n.module[n.nm = 0] = 0;	/* (globals without __name__: exec's) */
	for (uint32_t k = 0; k < py->nprobes && k < INJ_PY_PROBES; k++) {
		const struct inj_py_probe *p = &py->probes[k];

		if (filter_glob_full(p->qualname, cstrlen(p->qualname, INJ_PY_PAT), n.qualname,
				     (uint32_t)n.nq) &&
		    filter_glob_full(p->module, cstrlen(p->module, INJ_PY_PAT), n.module,
				     (uint32_t)n.nm))
			mask |= 1ULL << k;
	}
	if (mask)
		arena_add(py, code, key, &n, 0, INJ_PY_NOLINES);
	return mask;
}

/* The probes code matches: kept (*e: where), or decided now. */
uint64_t agent_py_verdict(struct inj_py *py, uint64_t code, uint64_t iframe, struct inj_py_code **ep)
{
	struct inj_py_code *t = (struct inj_py_code *)((char *)py + py->codes_off);
	uint64_t qn = py_code_ident(py, code), h = code * 0x9e3779b97f4a7c15ULL;

	/* the verdict depends on the module too, which is the frame's globals':
	 * module code exec'd and freed (a .pth line site.py runs, then a
	 * script's exec in globals of its own) may be made again at the same
	 * address with the same names. With a frame at every call (the
	 * profile function, the evaluator: not sys.monitoring's kept
	 * verdicts, looked up by code alone) the globals are its identity
	 * too. */
	if (iframe && !py->mon)
		qn ^= ld64(iframe + py->off.fr_globals) * 0xff51afd7ed558ccdULL;
	uint32_t mask = py->ncodes - 1, me = agent_self(my_ctl());

	/* an entry is a process's (the processes a -p process forks share the
	 * table: the same address may hold another code object in each) */
	for (uint32_t i = 0; i < VERDICT_PROBES; i++) {
		struct inj_py_code *e = &t[((uint32_t)(h >> 40) + i) & mask];
		uint64_t k = __atomic_load_n(&e->code, __ATOMIC_ACQUIRE);

		if (k == code && e->pid != me)
			continue;	/* another process's (or being claimed) */
		if (k == code && e->ident == qn) {
			*ep = e;
			return e->mask;
		}
		if (k == code || (!k && __atomic_compare_exchange_n(&e->code, &k, code, 0,
								      __ATOMIC_ACQ_REL,
								      __ATOMIC_ACQUIRE))) {
			/* new, or another code object at the same address (a
			 * module's or class's body run once, freed, its memory
			 * taken by the next): a generation of its own, so a row
			 * and names of its own (py_func_key) */
			e->gen = k ? (e->gen + 1) & PY_GEN_MASK : 0;
			e->row1 = e->row1_site = 0;
			e->pid = me;
			e->mask = decide(py, code, code | (uint64_t)e->gen << PY_GEN_SHIFT, iframe);
			e->ident = qn;
			py->codes_used++;
			*ep = e;
			return e->mask;
		}
	}
	py->undecided++;
	*ep = 0;
	return decide(py, code, code, iframe);
}

/* The verdict kept for code, or 0 (none yet: verdict decides). */
struct inj_py_code *agent_py_verdict_kept(const struct inj_py *py, uint64_t code)
{
	struct inj_py_code *t = (struct inj_py_code *)((char *)py + py->codes_off);
	uint64_t qn = py_code_ident(py, code), h = code * 0x9e3779b97f4a7c15ULL;
	uint32_t mask = py->ncodes - 1, me = agent_self(my_ctl());

	for (uint32_t i = 0; i < VERDICT_PROBES; i++) {
		struct inj_py_code *e = &t[((uint32_t)(h >> 40) + i) & mask];
		uint64_t k = __atomic_load_n(&e->code, __ATOMIC_ACQUIRE);

		if (!k)
			return 0;
		if (k == code && e->pid == me && e->ident == qn)
			return e;
	}
	return 0;
}

/* Do the sites of mask (a call's, or a return's) count by function alone
 * (inj_site.py_count)? Then no hit reads the frame. */
int agent_py_count_only(const struct inj_ctl *c, const struct inj_py *py, uint64_t mask, int what)
{
	const struct inj_site *sites = (const struct inj_site *)((const char *)c + c->sites_off);

	while (mask) {
		uint32_t k = (uint32_t)__builtin_ctzll(mask);
		uint32_t site = what == PYTRACE_CALL ? py->probes[k].entry : py->probes[k].ret;

		mask &= mask - 1;
		if (site != ~0u && site < c->nsites && !sites[site].py_count)
			return 0;
	}
	return 1;
}

/* ---- $pystack's code objects, described once ----
 *
 * uscope names a walk's frames afterwards, from the process's memory; a
 * code object freed meanwhile (a module's body once imported, exec'd code,
 * everything once the process ends) would have no name. So the first time
 * a walk sees a code object (as it is now: its address and its identity,
 * py_code_ident), its names and line table are copied into the arena. A
 * thread remembers the last few it saw described; the shared table holds
 * the rest (a compare-and-swap claims an entry: threads walk without the
 * GIL). */

#define SEEN_PROBES 8

static void describe(struct inj_py *py, uint64_t code)
{
	const struct python_offsets *o = &py->off;
	uint64_t lt = ld64(code + o->co_linetable), nlt = 0;
	struct debuginfo_names n;

	n.nq = str_utf8(py, ld64(code + o->co_qualname), n.qualname, INJ_PY_STR);
	n.nf = str_utf8(py, ld64(code + o->co_filename), n.filename, INJ_PY_STR);
	if (n.nq < 0 || n.nf < 0)
		return;
	n.module[n.nm = 0] = 0;
	if (lt)
		nlt = ld64(lt + o->ob_size);
	arena_add(py, code, code, &n, lt + o->bytes_sval,
		  lt && nlt <= INJ_PY_LINES ? (uint32_t)nlt : INJ_PY_NOLINES);
}

static void seen_frames(struct inj_py *py, struct inj_slot *s, const struct python_frame *f,
			uint32_t n)
{
	struct inj_py_seen *t = (struct inj_py_seen *)((char *)py + py->seen_off);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t code = f[i].code, qn, h;
		uint32_t c = (uint32_t)(code >> 4) & (INJ_PY_SEEN_THREAD - 1), k;

		if (code < 4096 || code >= (1ULL << 47) || (code & 7))
			continue;
		qn = py_code_ident(py, code);
		if (s->pyseen[c].code == code && s->pyseen[c].ident == qn)
			continue;
		h = (code * 0x9e3779b97f4a7c15ULL) >> 50;	/* INJ_PY_SEEN: 2^14 */
		for (k = 0; k < SEEN_PROBES; k++) {
			struct inj_py_seen *e = &t[(h + k) & (INJ_PY_SEEN - 1)];
			uint64_t was = __atomic_load_n(&e->code, __ATOMIC_ACQUIRE);

			if (was == code && __atomic_load_n(&e->ident, __ATOMIC_ACQUIRE) == qn)
				break;
			if (was && was != code)
				continue;
			/* new here, or another code object at this address */
			if (__atomic_compare_exchange_n(&e->code, &was, code, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE) ||
			    was == code) {
				__atomic_store_n(&e->ident, qn, __ATOMIC_RELEASE);
				describe(py, code);
				break;
			}
		}
		s->pyseen[c].code = code;
		s->pyseen[c].ident = qn;
	}
}

/* ---- the profile function ---- */

/* The profile function of thread state ts: ours (on) or none. Through
 * _PyEval_SetProfile (3.9 on); 3.8 has it for the current thread only
 * (PyEval_SetProfile), so its fields are set as it sets them (no object:
 * nothing to count references of), the GIL held. */
static void set_profile(const struct inj_py *py, uint64_t ts, int on)
{
	const struct python_offsets *o = &py->off;

	if (py->set_profile) {
		((setprofile_fn)py->set_profile)(ts, on ? (pytrace_fn)&agent_py_profile : 0, 0);
		return;
	}
	*(volatile uint64_t *)(ts + o->ts_c_profileobj) = 0;
	*(volatile uint64_t *)(ts + o->ts_c_profilefunc) = on ? (uint64_t)&agent_py_profile : 0;
	/* use_tracing: a trace or a profile function (c_tracefunc follows
	 * c_profilefunc) */
	*(volatile int32_t *)(ts + o->ts_use_tracing) =
		on || *(volatile const uint64_t *)(ts + o->ts_c_profilefunc + 8) != 0;
}

/* Can the profile function be set (3.8 to 3.11)? */
ALWAYS int can_profile(const struct inj_py *py)
{
	return py->set_profile || (py->off.flags & PYOFF_EVAL_38);
}

/* A Python call or return (frame: not 0). */
static __attribute__((noinline)) int py_profile(uint64_t frame, int what, uint64_t arg)
{
	struct inj_ctl *c;
	struct inj_py *py;
	struct py_hit h;
	uint64_t mask, ts;

	c = my_ctl();
	py = py_mut(c);
	if (!py || !py->on)
		return 0;
	/* no r:py: probe: a return is nobody's hit (and the next call sees
	 * a detach), without a look at anything else */
	if (what == PYTRACE_RETURN && !py->nret)
		return 0;
	if (py->state != INJ_PY_ON || owner_died(c->owner)) {
		/* detached, or the tracer has gone: out of this thread */
		if (can_profile(py) && (ts = agent_py_tstate(c, py, 0)) &&
		    ld64(ts + py->off.ts_c_profilefunc) == (uint64_t)&agent_py_profile) {
			set_profile(py, ts, 0);
			__atomic_add_fetch(&py->removes, 1, __ATOMIC_RELAXED);
		}
		return 0;
	}
	h.frame = frame;
	/* 3.11: the frame object's _PyInterpreterFrame; before, itself */
	h.iframe = py->off.pyframe_frame == PYOFF_NONE ? frame : ld64(frame + py->off.pyframe_frame);
	h.code = h.iframe ? ld64(h.iframe + py->off.fr_code) : 0;
	h.retval = what == PYTRACE_RETURN ? arg : 0;
	h.py = py;
	if (!h.code || !(mask = agent_py_verdict(py, h.code, h.iframe, &h.verdict)))
		return 0;
	py_hits(c, py, mask, what, &h);
	return 0;
}

int agent_py_profile(uint64_t obj, uint64_t frame, int what, uint64_t arg)
{
	(void)obj;
	/* first, and nothing saved before: C functions' calls and returns
	 * come here too, as many as the Python ones */
	if ((what != PYTRACE_CALL && what != PYTRACE_RETURN) || !frame)
		return 0;
	return py_profile(frame, what, arg);
}

/* Every thread state of every interpreter: the profile function in (on),
 * or ours out (off). */
void agent_py_profile_all(struct inj_py *py, int on)
{
	const struct python_offsets *o = &py->off;
	uint64_t interp = ld64(py->runtime + o->rt_interp_head), mine = (uint64_t)&agent_py_profile;

	for (uint32_t i = 0; interp && i < 256; i++) {
		uint64_t ts = ld64(interp + o->is_threads_head);

		for (uint32_t k = 0; ts && k < 65536; k++) {
			uint64_t f = ld64(ts + o->ts_c_profilefunc);

			if (on && !f) {
				set_profile(py, ts, 1);
				__atomic_add_fetch(&py->installs, 1, __ATOMIC_RELAXED);
			} else if (on && f != mine) {
				__atomic_add_fetch(&py->foreign, 1, __ATOMIC_RELAXED);
			} else if (!on && f == mine) {
				set_profile(py, ts, 0);
				__atomic_add_fetch(&py->removes, 1, __ATOMIC_RELAXED);
			}
			ts = ld64(ts + o->ts_next);
		}
		interp = ld64(interp + o->is_next);
	}
}

void agent_py_hook(struct inj_ctl *c)
{
	struct inj_py *py = py_mut(c);
	uint64_t ts;

	if (py && py->on && py->mon) {
		agent_pymon_hook(c, py);
		return;
	}
	if (!py || !py->on || py->state != INJ_PY_ON || !can_profile(py))
		return;
	if (py->eval && !py->eval_off && !agent_pyeval_set(py, 1))
		return;		/* (3.11: the frame evaluator, pyeval.c) */
	/* the common case: this thread has it, and so had every thread then */
	if (!(ts = agent_py_tstate(c, py, 0)) ||
	    ld64(ts + py->off.ts_c_profilefunc) == (uint64_t)&agent_py_profile)
		return;
	agent_py_profile_all(py, 1);
}

int agent_py_pending(uint64_t arg)
{
	struct inj_ctl *c = (struct inj_ctl *)arg;
	struct inj_py *py = py_mut(c);
	int on = py && py->state == INJ_PY_ON && !owner_died(c->owner);

	if (py && py->on && py->mon) {
		if (on)
			agent_pymon_arm(py);
		else
			agent_pymon_disarm(py, 0);
	} else if (py && py->on && can_profile(py)) {
		if (py->eval && (!on || !py->eval_off))
			on = agent_pyeval_set(py, on) < 0 && on;
		agent_py_profile_all(py, on);
	}
	return 0;
}

/* ---- values ---- */

#define REPR_STR 60		/* characters of a str shown */
#define ARGS_MAX 255		/* bytes of $params' text */

/* An int that fits int64: 1 with *v; 0 (a bigger one). */
static int long_value(const struct inj_py *py, uint64_t obj, int64_t *v)
{
	const struct python_offsets *o = &py->off;
	uint64_t size = ld64(obj + o->long_size), ndig, u = 0;
	int neg;

	if (py->off.flags & PYOFF_LONG_TAG) {
		ndig = size >> 3;
		neg = (size & 3) == 2;
	} else {
		neg = (int64_t)size < 0;
		ndig = neg ? (uint64_t)-(int64_t)size : size;
	}
	if (ndig > 3)
		return 0;
	for (uint64_t i = ndig; i-- > 0;) {
		uint64_t d = ld32(obj + o->long_digit + 4 * i) & 0x3fffffff;

		if (u >> 33)
			return 0;	/* would pass 63 bits */
		u = u << 30 | d;
	}
	if (u >> 63)
		return 0;
	*v = neg ? -(int64_t)u : (int64_t)u;
	return 1;
}

struct text {
	char *p;
	uint32_t n, max;
};

static void put_c(struct text *t, char c)
{
	if (t->n + 1 < t->max)
		t->p[t->n++] = c;
}

static void put_s(struct text *t, const char *s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		put_c(t, s[i]);
}

static void put_i(struct text *t, int64_t v)
{
	char d[24];
	uint64_t u = v < 0 ? (uint64_t)-v : (uint64_t)v;
	int n = 0;

	do {
		d[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		put_c(t, '-');
	while (n)
		put_c(t, d[--n]);
}

/* A str as Python shows it: quoted, escaped, cut. */
static void put_str(const struct inj_py *py, struct text *t, uint64_t s)
{
	static const char hex[] = "0123456789abcdef";
	char buf[4 * REPR_STR + 8];
	int n = str_utf8(py, s, buf, sizeof(buf));
	uint32_t shown = 0;
	int i;

	put_c(t, '\'');
	for (i = 0; i < n && shown < REPR_STR; i++, shown++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch == '\'' || ch == '\\') {
			put_c(t, '\\');
			put_c(t, (char)ch);
		} else if (ch == '\n' || ch == '\t' || ch == '\r') {
			put_c(t, '\\');
			put_c(t, ch == '\n' ? 'n' : ch == '\t' ? 't' : 'r');
		} else if (ch < 0x20 || ch == 0x7f) {
			put_s(t, "\\x", 2);
			put_c(t, hex[ch >> 4]);
			put_c(t, hex[ch & 15]);
		} else {
			put_c(t, (char)ch);
		}
	}
	put_c(t, '\'');
	if (i < n || (n >= 0 && (uint32_t)n >= sizeof(buf) - 5))	/* cut short */
		put_s(t, "...", 3);
}

/* obj as shown: 1 with *iv for an int, else its text into t (None, True,
 * False, a str's repr, <type> for the rest); an argument's cell (one an
 * inner function closes over) shows its value. */
static int repr(const struct inj_py *py, struct text *t, uint64_t obj, int64_t *iv, int arg)
{
	const struct python_offsets *o = &py->off;
	uint64_t type;
	char name[48];

	if (!obj) {
		put_s(t, "<NULL>", 6);
		return 0;
	}
	type = ld64(obj + o->ob_type);
	if (obj == py->none || obj == py->true_ || obj == py->false_) {
		put_s(t, obj == py->none ? "None" : obj == py->true_ ? "True" : "False",
		      obj == py->none ? 4 : obj == py->true_ ? 4 : 5);
		return 0;
	}
	if (type == py->long_type && long_value(py, obj, iv))
		return 1;
	if (type == py->unicode_type) {
		put_str(py, t, obj);
		return 0;
	}
	{
		const char *tn = (const char *)ld64(type + o->type_name);
		uint32_t n = tn ? cstrlen(tn, sizeof(name) - 1) : 0;

		if (arg && n == 4 && same(tn, 4, "cell", 4))
			return repr(py, t, ld64(obj + 16), iv, 0);
		put_c(t, '<');
		put_s(t, tn ? tn : "?", tn ? n : 1);
		put_c(t, '>');
	}
	return 0;
}

/* The arguments' count: positional, keyword-only, *args, **kwargs. */
static uint32_t nargs_of(const struct inj_py *py, uint64_t code)
{
	const struct python_offsets *o = &py->off;
	uint32_t flags = ld32(code + o->co_flags);
	uint32_t n = ld32(code + o->co_argcount) + ld32(code + o->co_kwonlyargcount) +
		     ((flags & 4) != 0) + ((flags & 8) != 0);
	uint32_t all = ld32(code + o->co_nlocalsplus);

	return n < all ? n : all;
}

/* An argument's object: 3.14's localsplus are _PyStackRefs, tagged in
 * their low bits (a NULL one is 1: none). */
static uint64_t arg_obj(const struct inj_py *py, uint64_t code, uint64_t locals, uint32_t i)
{
	const struct python_offsets *o = &py->off;
	uint64_t v = ld64(locals + 8 * i) & ref_mask(py), c2a, ncell;

	if (v || !(o->flags & PYOFF_FRAMEOBJ) || !(c2a = ld64(code + o->co_cell2arg)))
		return v;
	/* 3.8 to 3.10: an argument an inner function closes over was moved
	 * into its cell (co_cell2arg[k] == i), after the locals */
	ncell = ld64(ld64(code + o->co_cellvars) + o->ob_size);
	for (uint64_t k = 0; k < ncell && k < 256; k++)
		if (ld64(c2a + 8 * k) == i)
			return ld64(locals + 8 * (ld32(code + o->co_nlocalsplus) + k));
	return 0;
}

static uint64_t arg_name(const struct inj_py *py, uint64_t code, uint32_t i)
{
	return ld64(ld64(code + py->off.co_localsplusnames) + py->off.tuple_item + 8 * i);
}

/* One value into v: an int, or text into the record. */
/* The text written at rec + *off is v, a string. */
static void text_value(struct text *t, struct inj_val *v, uint32_t *off)
{
	t->p[t->n] = 0;
	v->kind = INJ_STR;
	v->str_off = (uint16_t)*off;
	v->str_len = (uint16_t)t->n;
	*off += (t->n + 1 + 7) & ~7u;
}

static void value_into(const struct inj_py *py, uint64_t obj, struct inj_val *v, char *rec,
		       uint32_t *off, int arg)
{
	struct text t = {rec + *off, 0, INJ_STR_MAX};
	int64_t iv;

	if (repr(py, &t, obj, &iv, arg)) {
		v->kind = INJ_INT;
		v->val = (uint64_t)iv;
		return;
	}
	text_value(&t, v, off);
}

void agent_py_value(const struct inj_ctl *c, const struct py_hit *h, const struct fetch_insn *in,
		    struct inj_val *v, char *rec, uint32_t *off)
{
	const struct inj_py *py = h->py;
	uint64_t locals = h->iframe + py->off.fr_localsplus;
	uint32_t n = nargs_of(py, h->code);
	char name[INJ_PY_STR];

	(void)c;
	v->kind = INJ_FAULT;
	if (!h->iframe && (in->op == FOP_PYARG || in->op == FOP_PYARGS))
		return;		/* (no frame to read them in) */
	if (in->op == FOP_PYFUNC) {
		v->kind = INJ_INT;
		v->val = py_func_key(h);
	} else if (in->op == FOP_PYRETVAL) {
		if (h->retval) {
			value_into(py, h->retval, v, rec, off, 0);
		} else {
			/* CPython returns NULL out of a frame an exception leaves
			 * (the exception is put aside while we run: not named) */
			struct text t = {rec + *off, 0, INJ_STR_MAX};

			put_s(&t, "(raised)", 8);
			text_value(&t, v, off);
		}
	} else if (in->op == FOP_PYARG) {
		const char *want = py->names + (uint32_t)in->imm;
		uint32_t wn = (uint32_t)((uint64_t)in->imm >> 32);

		if ((uint32_t)in->imm + wn > INJ_PY_NAMES)
			return;
		for (uint32_t i = 0; i < n; i++) {
			int l = str_utf8(py, arg_name(py, h->code, i), name, sizeof(name));

			if (l >= 0 && same(name, (uint32_t)l, want, wn)) {
				value_into(py, arg_obj(py, h->code, locals, i), v, rec, off, 1);
				break;
			}
		}
	} else if (in->op == FOP_PYARGS) {
		struct text t = {rec + *off, 0, ARGS_MAX + 1};

		for (uint32_t i = 0; i < n; i++) {
			int l = str_utf8(py, arg_name(py, h->code, i), name, sizeof(name));
			int64_t iv;

			if (i)
				put_c(&t, ' ');
			put_s(&t, name, l > 0 ? (uint32_t)l : 0);
			put_c(&t, '=');
			if (repr(py, &t, arg_obj(py, h->code, locals, i), &iv, 1))
				put_i(&t, iv);
		}
		text_value(&t, v, off);
	}
}

/* ---- the end ---- */

#define SYS_nanosleep 35

void agent_py_sync(struct inj_ctl *c)
{
	uint64_t p0 = __atomic_load_n(&c->progress, __ATOMIC_ACQUIRE);
	uint64_t waited = 0, step = 1000000;	/* 1 ms */
	struct {
		long sec, nsec;
	} ts = {0, (long)step};

	if (!c->enabled || !c->max_wait_ns || owner_died(c->owner))
		return;
	agent_ring(c);
	/* two passes: one wholly after this point */
	while (__atomic_load_n(&c->progress, __ATOMIC_ACQUIRE) < p0 + 2 && waited < c->max_wait_ns &&
	       !owner_died(c->owner)) {
		sys6(SYS_nanosleep, (long)&ts, 0, 0, 0, 0, 0);
		waited += step;
	}
}
