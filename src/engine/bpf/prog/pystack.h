/* Part of the bpf engine's program (engine/bpf/uscope.bpf.c includes it
 * once, in this place: it uses the maps, state and helpers defined above
 * it there and is no header of its own).
 *
 * $pystack: the CPython frame walker every engine shares (python/walk.h). */

/* ---- $pystack ---------------------------------------------------------------- */

/* The walker every engine shares (python/walk.h), twice: the sleepable
 * program's reads fault pages in. */
#define PYWALK_FN(n) pws_##n
#define PYWALK_INLINE static __always_inline
#define PYWALK_READ(env, dst, addr, len) \
	bpf_copy_from_user(dst, len, (const void *)(unsigned long)(addr))
#include "python/walk.h"

#define PYWALK_FN(n) pwn_##n
#define PYWALK_INLINE static __always_inline
#define PYWALK_READ(env, dst, addr, len) \
	bpf_probe_read_user(dst, len, (const void *)(unsigned long)(addr))
#include "python/walk.h"

struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct signal_struct {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct thread_struct thread;
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

struct py_ctx {
	const struct python_offsets *off;
	struct python_walk w;
	struct python_frame *out;
	__u32 max;
	bool sleepable;
};

/* Looking for the thread's state in the interpreters' thread lists (the
 * key not known: 3.14 on, or a glibc whose struct pthread is not known),
 * by its thread_id: pthread_self(), the thread pointer, the task's fs
 * base (not its TID: in a container the state holds the TID of the
 * container's PID namespace). One thread state a step. */
struct py_find {
	const struct python_offsets *off;
	struct python_tfind f;
	__u64 self;
	bool sleepable;
};

static long py_find_step(__u32 k, void *data)
{
	struct py_find *p = data;

	return p->sleepable ? pws_tfind_step(p->off, &p->f, p->off->ts_thread_id, p->self, NULL) :
			      pwn_tfind_step(p->off, &p->f, p->off->ts_thread_id, p->self, NULL);
}

/* The thread's PyThreadState: by CPython's key from the thread's fs base
 * (the task's), or where there is none known, from the thread lists by
 * that fs base; 0: none. */
static __always_inline __u64 py_tstate(struct bpfeng_py *py, bool sleepable)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	__u64 fsbase, tstate = 0;
	__u32 key = 0;
	int init = 0;

	if (py->off.rt_tss_key == PYOFF_NONE) {
		struct py_find p = {.off = &py->off, .self = BPF_CORE_READ(task, thread.fsbase),
				    .sleepable = sleepable};

		if (sleepable)
			pws_tfind_start(&py->off, py->runtime, &p.f, NULL);
		else
			pwn_tfind_start(&py->off, py->runtime, &p.f, NULL);
		bpf_loop(PYTHON_TSTATE_STEPS, py_find_step, &p, 0);
		return p.f.status == PYWALK_END ? p.f.found : 0;
	}
	fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (!bpf_probe_read_user(&init, 4, (void *)(py->runtime + py->off.rt_tss_init)) && init &&
	    !bpf_probe_read_user(&key, 4, (void *)(py->runtime + py->off.rt_tss_key)) &&
	    !pwn_tss(&py->glibc, fsbase, key, &tstate, NULL))
		return tstate;
	return 0;
}

/* One frame a step: bpf_loop runs it, so the verifier checks one step. */
static long py_step(__u32 k, void *data)
{
	struct py_ctx *p = data;

	return p->sleepable ? pws_step(p->off, &p->w, p->out, p->max, NULL) :
			      pwn_step(p->off, &p->w, p->out, p->max, NULL);
}

/* The thread's Python frames into the record at off (python_stack_hdr,
 * then the frames, as many as fit before the stack copy's place): the
 * thread state (py_tstate), then its frame chain. The record's new
 * length. */
static __noinline __u32 walk_python(struct task_state *ts, __u32 off, __u32 want, __u32 argi,
				    bool sleepable)
{
	struct bpfeng_rec *rec = (struct bpfeng_rec *)ts->buf;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, room, i;
	struct bpfeng_py *py = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct python_stack_hdr *h;
	struct py_ctx p = {};
	__u64 tstate;

	off = (off + 7) & ~7u;
	/* bounds the verifier sees on the register it checks */
	asm volatile("%0 &= 0x1fff" : "+r"(off));
	if (off > BPFENG_STK_OFF - sizeof(*h) || argi >= BPFENG_MAX_ARGS)
		return off;
	h = (struct python_stack_hdr *)(ts->buf + off);
	room = (BPFENG_STK_OFF - off - sizeof(*h)) / sizeof(struct python_frame);
	if (want > room)
		want = room;
	if (want > PYTHON_FRAMES_MAX)
		want = PYTHON_FRAMES_MAX;
	h->n = 0;
	h->want = (__u16)want;
	/* system-wide, a process not told of yet: its first hits */
	h->status = py || pystack_on != 2 ? PYWALK_NONE : PYWALK_NOTYET;
	h->pad = 0;
	if (py && want) {
		if ((tstate = py_tstate(py, sleepable))) {
			p.off = &py->off;
			p.out = (struct python_frame *)(h + 1);
			p.max = want;
			p.sleepable = sleepable;
			if (!(sleepable ? pws_start(&py->off, tstate, &p.w, NULL) :
					  pwn_start(&py->off, tstate, &p.w, NULL)))
				bpf_loop(2 * PYTHON_FRAMES_MAX + 2, py_step, &p, 0);
			if (p.w.status == PYWALK_MORE)
				p.w.status = PYWALK_FULL;
			h->n = p.w.n;
			h->status = (__u8)p.w.status;
		}
	}
	i = argi;
	asm volatile("%0 &= 15" : "+r"(i));	/* BPFENG_MAX_ARGS - 1, seen by the verifier */
	rec->vals[i].kind = BPFENG_PYSTACK;
	rec->vals[i].str_off = (__u16)off;
	rec->vals[i].str_len = (__u16)(sizeof(*h) + h->n * sizeof(struct python_frame));
	return off + sizeof(*h) + h->n * sizeof(struct python_frame);
}
