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
 * process's life. */
#include "engine/inject/agent/agent.h"

/* Guarded plain loads of whole words. */
ALWAYS int load(void *dst, uint64_t addr, uint32_t len)
{
	if (addr < 4096 || addr + len > (1ULL << 47) || (addr & 7) || (len & 7))
		return -1;
	for (uint32_t i = 0; i < len / 8; i++)
		((uint64_t *)dst)[i] = ((volatile const uint64_t *)addr)[i];
	return 0;
}

#define PYWALK_FN(n) pw_##n
#define PYWALK_INLINE ALWAYS
#define PYWALK_READ(env, dst, addr, len) ((void)(env), load((dst), (addr), (len)))
#include "python/walk.h"

static inline const struct inj_py *py_of(const struct inj_ctl *c)
{
	return c->py_off ? (const struct inj_py *)((const char *)c + c->py_off) : 0;
}

/* The thread's PyThreadState, as pthread_getspecific(CPython's key) would
 * answer in it; 0: none (a thread that never ran Python, or a runtime not
 * initialized yet). */
static uint64_t tstate_of(const struct inj_ctl *c, const struct inj_py *py)
{
	int32_t init = *(volatile const int32_t *)(py->runtime + py->off.rt_tss_init);
	uint32_t key = *(volatile const uint32_t *)(py->runtime + py->off.rt_tss_key);
	uint64_t ts = 0;

	if (!init || pw_tss(&py->glibc, fs_base(c), key, &ts, 0))
		return 0;
	return ts;
}

void agent_pystack(const struct inj_ctl *c, int64_t imm, char *rec, uint32_t *off,
		   struct inj_val *v)
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
	if (py && py->on && (ts = tstate_of(c, py))) {
		struct python_walk w;

		pw_walk(&py->off, ts, &w, out, want, 0);
		h->n = w.n;
		h->status = (uint8_t)w.status;
	}
	v->kind = INJ_PYSTACK;
	v->str_off = (uint16_t)*off;
	v->str_len = (uint16_t)(sizeof(*h) + h->n * sizeof(*out));
	*off += (uint32_t)(sizeof(*h) + h->n * sizeof(*out) + 7) & ~7u;
}
