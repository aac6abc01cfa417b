/* The agent's py: probes on 3.12 and later, through sys.monitoring (PEP
 * 669): a tool id is claimed (4, the first free for general use, else 3;
 * 0, 1, 2 and 5 are the debugger's, coverage's, the profiler's and the
 * optimizer's by convention) and C callbacks registered, as a profiler
 * written in C would, through sys.monitoring's own functions called from
 * C: PySys_GetObject("monitoring") and PyObject_CallMethod, no Python
 * source. PY_START is global: a code object no probe matches answers
 * DISABLE at its first call and costs nothing after; one that matches is
 * armed alone (set_local_events: PY_RESUME, PY_RETURN, PY_YIELD) and held
 * (a reference: its address stays its own until we leave). PY_UNWIND and
 * PY_THROW cannot be local: global, matched by verdict. A call is as
 * sys.setprofile's "call" (PY_START, PY_RESUME, PY_THROW), a return as its
 * "return" (PY_RETURN, PY_YIELD, and PY_UNWIND with no value: raised);
 * with no r:py: probe (none of latency, flow), the returns are not asked
 * for at all: a plain count pays for the calls alone.
 * Everything here runs with the GIL held: in a callback, the pending call,
 * or a hook where a thread has it. A pending exception is kept aside
 * while sys.monitoring is called. */
#include "engine/inject/agent/pyagent.h"

#define METH_FASTCALL 0x80

enum { EV_START, EV_RESUME, EV_THROW, EV_RETURN, EV_YIELD, EV_UNWIND, EV_N };

typedef uint64_t (*getobj_fn)(const char *name);
typedef uint64_t (*callm_fn)(uint64_t obj, const char *name, const char *fmt, ...);
typedef uint64_t (*getattr_fn)(uint64_t obj, const char *name);
typedef uint64_t (*cmnew_fn)(void *def, uint64_t self, uint64_t module, uint64_t cls);
typedef void (*ref_fn)(uint64_t obj);
typedef void (*fetch_fn)(uint64_t *t, uint64_t *v, uint64_t *tb);
typedef void (*restore_fn)(uint64_t t, uint64_t v, uint64_t tb);
typedef void (*clear_fn)(void);
typedef long (*aslong_fn)(uint64_t obj);

static const char *ev_name(int e)
{
	switch (e) {
	case EV_START: return "PY_START";
	case EV_RESUME: return "PY_RESUME";
	case EV_THROW: return "PY_THROW";
	case EV_RETURN: return "PY_RETURN";
	case EV_YIELD: return "PY_YIELD";
	default: return "PY_UNWIND";
	}
}

/* The callback an event goes to (mon_cb's index). */
static int ev_cb(int e)
{
	return e == EV_START ? 0 : e <= EV_THROW ? 1 : e <= EV_YIELD ? 2 : 3;
}

/* A call of sys.monitoring.NAME: 0, or -1 (its exception cleared). */
#define MON_CALL(py, name, ...) MON_CALL_ON(py, (py)->mon_mod, name, __VA_ARGS__)
#define MON_CALL_ON(py, mod, name, ...)                                                    \
	({                                                                                 \
		uint64_t r_ = ((callm_fn)(py)->call_method)(mod, name, __VA_ARGS__);      \
		if (r_)                                                                    \
			((ref_fn)(py)->decref)(r_);                                       \
		else                                                                       \
			((clear_fn)(py)->err_clear)();                                    \
		r_ ? 0 : -1;                                                               \
	})

/* The code objects this process armed, each with a reference held, in its
 * own memory (the self page): the table of verdicts is shared with the
 * processes it forks, whose interpreters are their own. A fork starts with
 * none: what it inherited armed is armed again (CPython sees the same
 * events and returns) the first time it calls it. */
static uint64_t *armed_set(void)
{
	return (uint64_t *)(my_ctl()->self + INJ_SELF_ARMED);
}

/* code's slot: where it is, or a free one (NULL: none). */
static uint64_t *armed_slot(uint64_t code)
{
	uint64_t *set = armed_set();
	uint32_t h = (uint32_t)(code >> 4) * 2654435761u;

	for (uint32_t k = 0; k < INJ_SELF_ARMED_PROBES; k++) {
		uint64_t *sl = &set[(h + k) & (INJ_SELF_NARMED - 1)];

		if (*sl == code || !*sl)
			return sl;
	}
	return NULL;
}

/* The code objects armed here: local events off, references dropped. */
static void disarm_codes(struct inj_py *py, uint64_t mod, int tool)
{
	uint64_t *set = armed_set();

	for (uint32_t k = 0; k < INJ_SELF_NARMED; k++) {
		if (!set[k])
			continue;
		MON_CALL_ON(py, mod, "set_local_events", "iOi", tool, set[k], 0);
		((ref_fn)py->decref)(set[k]);
		set[k] = 0;
		__atomic_sub_fetch(&py->mon_armed, 1, __ATOMIC_RELAXED);
	}
}

/* Our tool out: no event, no callback, no code object armed, the id
 * freed; in a callback (in_cb) our own references to the callbacks stay
 * (the one running is one of them). */
static void mon_release(struct inj_py *py, int in_cb)
{
	int tool = py->mon_tool;

	if (tool >= 0 && py->mon_mod) {
		py->mon_left_tool = tool;
		py->mon_left_mod = py->mon_mod;	/* (the pointer: a fork's copy has it) */
		MON_CALL(py, "set_events", "ii", tool, 0);
		for (int e = 0; e < EV_N; e++)
			if (py->mon_ev[e])
				MON_CALL(py, "register_callback", "iiO", tool, (int)py->mon_ev[e],
					 py->none);
		disarm_codes(py, py->mon_mod, tool);
		MON_CALL(py, "free_tool_id", "i", tool);
	}
	py->mon_tool = -1;
	if (in_cb)
		return;
	for (int k = 0; k < INJ_MON_CBS; k++)
		if (py->mon_cb[k]) {
			((ref_fn)py->decref)(py->mon_cb[k]);
			py->mon_cb[k] = 0;
		}
	if (py->mon_mod)
		((ref_fn)py->decref)(py->mon_mod);
	py->mon_mod = 0;
}

static uint64_t mon_start(uint64_t self, const uint64_t *args, int64_t n);
static uint64_t mon_resume(uint64_t self, const uint64_t *args, int64_t n);
static uint64_t mon_return(uint64_t self, const uint64_t *args, int64_t n);
static uint64_t mon_unwind(uint64_t self, const uint64_t *args, int64_t n);

/* Claim a tool id, register the callbacks, PY_START on. */
void agent_pymon_arm(struct inj_py *py)
{
	uint64_t et = 0, ev = 0, etb = 0, events, v;
	uint32_t step = 1;
	int tool = -1;

	if (py->mon_state != INJ_MON_NONE)
		return;
	py->mon_state = INJ_MON_BUSY;
	((fetch_fn)py->err_fetch)(&et, &ev, &etb);
	if (!(py->mon_mod = ((getobj_fn)py->sys_getobject)("monitoring"))) {
		py->mon_state = INJ_MON_NONE;	/* sys is not there yet: later */
		goto out;
	}
	((ref_fn)py->incref)(py->mon_mod);
	for (int t = 4; t >= 3 && tool < 0; t--)
		if (!MON_CALL(py, "use_tool_id", "is", t, "uscope"))
			tool = t;
	if (tool < 0) {
		((ref_fn)py->decref)(py->mon_mod);
		py->mon_mod = 0;
		py->mon_state = INJ_MON_TAKEN;
		goto out;
	}
	py->mon_tool = tool;
	step = 2;
	if (!(events = ((getattr_fn)py->getattr)(py->mon_mod, "events")))
		goto fail;
	for (int e = 0; e < EV_N; e++) {
		v = ((getattr_fn)py->getattr)(events, ev_name(e));
		py->mon_ev[e] = v ? (uint64_t)((aslong_fn)py->long_as_long)(v) : 0;
		if (v)
			((ref_fn)py->decref)(v);
	}
	((ref_fn)py->decref)(events);
	for (int e = 0; e < EV_N; e++)
		if (!py->mon_ev[e] || (py->mon_ev[e] & (py->mon_ev[e] - 1)) || py->mon_ev[e] >> 30)
			goto fail;	/* one bit each, as PEP 669 has them */
	step = 3;
	if (!(py->mon_disable = ((getattr_fn)py->getattr)(py->mon_mod, "DISABLE")))
		goto fail;
	step = 4;
	for (int k = 0; k < INJ_MON_CBS; k++) {
		struct inj_py_methoddef *d = &py->mon_def[k];

		d->name = (uint64_t)"uscope";
		d->meth = k == 0 ? (uint64_t)&mon_start : k == 1 ? (uint64_t)&mon_resume :
			  k == 2 ? (uint64_t)&mon_return : (uint64_t)&mon_unwind;
		d->flags = METH_FASTCALL;
		d->doc = 0;
		if (!(py->mon_cb[k] = ((cmnew_fn)py->cmethod_new)(d, 0, 0, 0)))
			goto fail;
	}
	step = 5;
	for (int e = 0; e < EV_N; e++)
		if (MON_CALL(py, "register_callback", "iiO", tool, (int)py->mon_ev[e],
			     py->mon_cb[ev_cb(e)]))
			goto fail;
	step = 6;
	/* PY_UNWIND is a return: none wanted with no r:py: probe */
	if (MON_CALL(py, "set_events", "ii", tool,
		     (int)(py->mon_ev[EV_START] | py->mon_ev[EV_THROW] |
			   (py->nret ? py->mon_ev[EV_UNWIND] : 0))))
		goto fail;
	py->mon_state = INJ_MON_ARMED;
	goto out;
fail:
	((clear_fn)py->err_clear)();
	py->mon_step = step;
	mon_release(py, 0);
	py->mon_state = INJ_MON_FAILED;
out:
	((restore_fn)py->err_restore)(et, ev, etb);
}

/* Taken out (detached, or the tracer has gone). */
void agent_pymon_disarm(struct inj_py *py, int in_cb)
{
	uint64_t et = 0, ev = 0, etb = 0;

	if (py->mon_state != INJ_MON_ARMED)
		return;
	py->mon_state = INJ_MON_BUSY;
	((fetch_fn)py->err_fetch)(&et, &ev, &etb);
	mon_release(py, in_cb);
	((restore_fn)py->err_restore)(et, ev, etb);
	py->mon_state = INJ_MON_DONE;
}

/* A callback of ours called once the tool was let go: this process is a
 * copy of the one that let go (a fork of it, or it of a fork: the state is
 * in the memory they share), whose interpreter still has the tool and our
 * callbacks. Taken out of this one too: no event, no callback, the id
 * freed (its references to our callbacks stay: one of them runs). */
static void mon_release_copy(struct inj_py *py)
{
	uint64_t et = 0, ev = 0, etb = 0, mod = py->mon_left_mod;
	int tool = py->mon_left_tool;

	if (!mod || tool < 0)
		return;
	((fetch_fn)py->err_fetch)(&et, &ev, &etb);
	MON_CALL_ON(py, mod, "set_events", "ii", tool, 0);
	for (int e = 0; e < EV_N; e++)
		if (py->mon_ev[e])
			MON_CALL_ON(py, mod, "register_callback", "iiO", tool, (int)py->mon_ev[e],
				    py->none);
	disarm_codes(py, mod, tool);
	MON_CALL_ON(py, mod, "free_tool_id", "i", tool);
	((restore_fn)py->err_restore)(et, ev, etb);
}

static uint64_t mon_ret(const struct inj_py *py, uint64_t obj)
{
	((ref_fn)py->incref)(obj);
	return obj;
}

typedef uint64_t (*tsget_fn)(void);

/* The thread's state in a callback of CPython's (the GIL held): without
 * the key (3.14), CPython's own answer (PyThreadState_GetUnchecked, 3.13
 * on: the thread-local current state), else as a hit finds it. */
static uint64_t tstate_cb(const struct inj_ctl *c, const struct inj_py *py)
{
	if (py->off.rt_tss_key == PYOFF_NONE && py->tstate_get)
		return ((tsget_fn)py->tstate_get)();
	return agent_py_tstate(c, py, 0);
}

/* An event of code: a call (what PYTRACE_CALL) or a return (retval, 0:
 * raised); start: PY_START, which DISABLE may answer. */
static uint64_t mon_event(uint64_t code, int what, uint64_t retval, int start)
{
	struct inj_ctl *c = my_ctl();
	struct inj_py *py = py_mut(c);
	struct python_walk w;
	struct py_hit h;
	uint64_t mask, *sl;

	if (py->mon_state != INJ_MON_ARMED) {
		if (py->mon_state == INJ_MON_DONE)
			mon_release_copy(py);	/* another process let go: this one too */
		return mon_ret(py, py->none);
	}
	if (py->state != INJ_PY_ON || owner_died(c->owner)) {
		agent_pymon_disarm(py, 1);	/* detached, or the tracer has gone */
		return mon_ret(py, py->none);
	}
	h.frame = 0;
	h.code = code;
	h.retval = retval;
	h.py = py;
	h.iframe = 0;
	/* a verdict kept and hits that read no frame (a count by function):
	 * the frame is not looked for */
	if ((h.verdict = agent_py_verdict_kept(py, code)) &&
	    agent_py_count_only(c, py, h.verdict->mask, what)) {
		mask = h.verdict->mask;
	} else {
		pw_start(&py->off, tstate_cb(c, py), &w, 0);
		h.iframe = w.frame && (ld64(w.frame + py->off.fr_code) & ref_mask(py)) == code ?
				   w.frame : 0;
		/* kept: its mask (no second lookup); else decided now */
		mask = h.verdict ? h.verdict->mask : agent_py_verdict(py, code, h.iframe, &h.verdict);
	}
	if (!mask) {
		if (start)
			__atomic_add_fetch(&py->mon_disabled, 1, __ATOMIC_RELAXED);
		return mon_ret(py, start ? py->mon_disable : py->none);
	}
	if (what == PYTRACE_CALL && h.verdict && (!(sl = armed_slot(code)) || *sl != code)) {
		uint64_t set = py->mon_ev[EV_RESUME] |
			       (py->nret ? py->mon_ev[EV_RETURN] | py->mon_ev[EV_YIELD] : 0);

		/* (no room: armed again at each call, no reference held) */
		if (!MON_CALL(py, "set_local_events", "iOi", py->mon_tool, code, (int)set) && sl) {
			((ref_fn)py->incref)(code);
			*sl = code;
			__atomic_add_fetch(&py->mon_armed, 1, __ATOMIC_RELAXED);
		}
	}
	py_hits(c, py, mask, what, &h);
	return mon_ret(py, py->none);
}

/* The callbacks (METH_FASTCALL): (code, offset[, value]). */
static uint64_t mon_start(uint64_t self, const uint64_t *args, int64_t n)
{
	(void)self;
	return mon_event(n >= 1 ? args[0] : 0, PYTRACE_CALL, 0, 1);
}

static uint64_t mon_resume(uint64_t self, const uint64_t *args, int64_t n)
{
	(void)self;
	return mon_event(n >= 1 ? args[0] : 0, PYTRACE_CALL, 0, 0);
}

static uint64_t mon_return(uint64_t self, const uint64_t *args, int64_t n)
{
	(void)self;
	return mon_event(n >= 1 ? args[0] : 0, PYTRACE_RETURN, n >= 3 ? args[2] : 0, 0);
}

static uint64_t mon_unwind(uint64_t self, const uint64_t *args, int64_t n)
{
	(void)self;
	return mon_event(n >= 1 ? args[0] : 0, PYTRACE_RETURN, 0, 0);
}

/* A hook (the GIL held): sys.monitoring is set once CPython is ready. */
void agent_pymon_hook(struct inj_ctl *c, struct inj_py *py)
{
	int32_t init;

	if (py->mon_state != INJ_MON_NONE)
		return;
	init = *(volatile const int32_t *)(py->runtime + py->off.rt_initialized);
	if (init && py->state == INJ_PY_ON && !owner_died(c->owner))
		agent_pymon_arm(py);
}
