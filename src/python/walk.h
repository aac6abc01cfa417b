/* The Python frame walker, written once: from a thread's PyThreadState along
 * its _PyInterpreterFrame chain, innermost first. uscope includes it (tests,
 * and later the symbolizing side), the inject agent and the bpf program will
 * include it for $pystack, in the way of probe/fetch_eval.h, so that they
 * cannot drift apart.
 *
 * What a walk records of a frame is three values (struct python_frame): the
 * code object's address, the byte offset of the frame's instruction in the
 * code (prev_instr - co_code_adaptive; instr_ptr in 3.13) and flags. It reads
 * no string and no line table: uscope turns the triples into
 * `qualname (file:line)` afterwards (symbolize.h), from the process's memory.
 *
 * Frames are skipped as CPython's traceback skips them:
 *   - frames owned by the C stack (3.12, 3.13: the shim the evaluator pushes
 *     at each entry) are not recorded; they mark the frame inside them as
 *     the entry frame;
 *   - an incomplete frame (not yet past its first traceable instruction, as
 *     _PyFrame_IsIncomplete: making cells, a generator not yet made) is
 *     recorded, and the symbolizer hides it (it has the code object's
 *     _co_firsttraceable at hand; the walk does not read the code object).
 *     PYFRAME_GEN says the frame belongs to a generator, which is never
 *     incomplete. Hidden frames keep their PYFRAME_ENTRY for splicing.
 *
 * Reads: one of PYTHON_FRAME_HDR bytes a frame, plus one or two words to find
 * the first frame (and two to find the thread state from its key).
 *
 * The includer defines, before the inclusion:
 *   PYWALK_FN(name)                    the name of each function (a prefix)
 *   PYWALK_INLINE                      their storage and inlining
 *   PYWALK_READ(env, dst, addr, len)   read len bytes of the process's memory
 *                                      at addr: 0, or non-zero if unreadable
 * and may define:
 *   PYWALK_MAX_FRAMES                  a bound on max (PYTHON_FRAMES_MAX), which
 *                                      a verifier can see
 *   PYWALK_FIELDS                      read a frame's fields one word each (what
 *                                      plain loads do best), not its
 *                                      PYTHON_FRAME_HDR bytes in one read (what
 *                                      a read that costs a call does best)
 *   PYWALK_LIST_READ(env, dst, addr, len)  how tfind reads the thread lists
 *                                      (PYWALK_READ when not defined): other
 *                                      threads' states, which they may free
 *                                      under the walk, want a read that cannot
 *                                      fault where PYWALK_READ is a plain load
 * The macros are undefined at the end. The functions:
 *   start(off, tstate, w, env)         begin a walk of the thread state
 *   step(off, w, out, max, env)        one frame: 0 to go on, 1 when done
 *                                      (w->status says how); a bpf_loop
 *                                      callback can call it as is
 *   walk(off, tstate, w, out, max, env)  start, and step to the end
 *   tss(glibc, fsbase, key, tstate, env)  the thread's PyThreadState from
 *                                      CPython's thread-specific key, as
 *                                      pthread_getspecific(key) in that
 *                                      thread (py-spy's way)
 *   tfind_start(off, runtime, f, env)  begin looking for a thread's state in
 *                                      the interpreters' thread lists
 *   tfind_step(off, f, by, id, env)    one interpreter or thread state: 0 to go
 *                                      on, 1 when done (a bpf_loop callback's
 *                                      body); the state whose field at offset
 *                                      by (ts_native_thread_id: the TID;
 *                                      ts_thread_id: the pthread_t, the thread
 *                                      pointer in glibc and musl) is id
 *   tfind(off, runtime, by, id, env)   start, and step to the end: the state,
 *                                      or 0 (none, or unreadable); what the
 *                                      debug offsets give where the key is
 *                                      not known (3.14) */
#include "python/frame.h"

#ifndef PYWALK_MAX_FRAMES
#define PYWALK_MAX_FRAMES PYTHON_FRAMES_MAX
#endif
#ifndef PYWALK_LIST_READ
#define PYWALK_LIST_READ PYWALK_READ
#endif

/* The frame's bytes are read at once; a field is picked out of them at the
 * table's offset, bounded for a verifier (the table's offsets fit). */
PYWALK_INLINE uint64_t PYWALK_FN(u64)(const uint8_t *hdr, uint16_t o)
{
	uint64_t v = 0;

	if (o <= PYTHON_FRAME_HDR - 8)
		__builtin_memcpy(&v, hdr + o, 8);
	return v;
}

PYWALK_INLINE uint8_t PYWALK_FN(u8)(const uint8_t *hdr, uint16_t o)
{
	return o < PYTHON_FRAME_HDR ? hdr[o] : 0;
}

PYWALK_INLINE int PYWALK_FN(start)(const struct python_offsets *off, uint64_t tstate,
				   struct python_walk *w, void *env)
{
	uint64_t p = 0;

	w->frame = 0;
	w->n = 0;
	w->status = PYWALK_MORE;
	if (!tstate)
		return 0;
	if (PYWALK_READ(env, &p, tstate + off->ts_frame, 8))
		goto fault;
	/* 3.11, 3.12: tstate->cframe->current_frame; 3.13: current_frame */
	if ((off->flags & PYOFF_CFRAME) && p &&
	    PYWALK_READ(env, &p, p + off->cf_current_frame, 8))
		goto fault;
	w->frame = p;
	return 0;
fault:
	w->status = PYWALK_FAULT;
	return -1;
}

/* What a step needs of a frame: 0, or non-zero when it cannot be read. */
struct PYWALK_FN(fields) {
	uint64_t code, previous, instr;
	uint8_t owner, is_entry;
};

#ifdef PYWALK_FIELDS
/* the byte at o of a frame, from the aligned word that holds it */
PYWALK_INLINE int PYWALK_FN(byte)(uint64_t frame, uint16_t o, uint8_t *b, void *env)
{
	uint64_t wd;

	if (PYWALK_READ(env, &wd, frame + (o & ~7u), 8))
		return -1;
	*b = (uint8_t)(wd >> 8 * (o & 7));
	return 0;
}

PYWALK_INLINE int PYWALK_FN(read)(const struct python_offsets *off, uint64_t frame,
				  struct PYWALK_FN(fields) *f, void *env)
{
	f->is_entry = 0;
	f->owner = 0;
	if (off->flags & PYOFF_FRAMEOBJ)	/* (a PyFrameObject: no owner) */
		return PYWALK_READ(env, &f->previous, frame + off->fr_previous, 8) ||
		       PYWALK_READ(env, &f->code, frame + off->fr_code, 8) ||
		       PYWALK_READ(env, &f->instr, frame + off->fr_instr, 8);
	return PYWALK_READ(env, &f->previous, frame + off->fr_previous, 8) ||
	       PYWALK_FN(byte)(frame, off->fr_owner, &f->owner, env) ||
	       PYWALK_READ(env, &f->code, frame + off->fr_code, 8) ||
	       PYWALK_READ(env, &f->instr, frame + off->fr_instr, 8) ||
	       ((off->flags & PYOFF_IS_ENTRY) && PYWALK_FN(byte)(frame, off->fr_is_entry,
								 &f->is_entry, env));
}
#else
PYWALK_INLINE int PYWALK_FN(read)(const struct python_offsets *off, uint64_t frame,
				  struct PYWALK_FN(fields) *f, void *env)
{
	uint8_t hdr[PYTHON_FRAME_HDR];

	/* a PyFrameObject (3.8 to 3.10): its three fields, f_lasti further
	 * than the specials of an _PyInterpreterFrame (a bpf program's stack
	 * has no room for more bytes at once) */
	if (off->flags & PYOFF_FRAMEOBJ) {
		if (PYWALK_READ(env, hdr, frame + off->fr_previous, 8) ||
		    PYWALK_READ(env, hdr + 8, frame + off->fr_code, 8) ||
		    PYWALK_READ(env, hdr + 16, frame + off->fr_instr, 8))
			return -1;
		f->previous = PYWALK_FN(u64)(hdr, 0);
		f->code = PYWALK_FN(u64)(hdr, 8);
		f->instr = PYWALK_FN(u64)(hdr, 16);
		f->is_entry = f->owner = 0;
		return 0;
	}
	if (PYWALK_READ(env, hdr, frame, PYTHON_FRAME_HDR))
		return -1;
	f->owner = PYWALK_FN(u8)(hdr, off->fr_owner);
	f->previous = PYWALK_FN(u64)(hdr, off->fr_previous);
	f->code = PYWALK_FN(u64)(hdr, off->fr_code);
	f->instr = PYWALK_FN(u64)(hdr, off->fr_instr);
	f->is_entry = (off->flags & PYOFF_IS_ENTRY) ? PYWALK_FN(u8)(hdr, off->fr_is_entry) : 0;
	return 0;
}
#endif

PYWALK_INLINE int PYWALK_FN(step)(const struct python_offsets *off, struct python_walk *w,
				  struct python_frame *out, uint32_t max, void *env)
{
	struct PYWALK_FN(fields) f;
	uint32_t n = w->n, flags = 0;

	if (w->status != PYWALK_MORE)
		return 1;
	if (!w->frame) {
		w->status = PYWALK_END;
		return 1;
	}
	if (PYWALK_FN(read)(off, w->frame, &f, env)) {
		w->status = PYWALK_FAULT;
		return 1;
	}
	if (f.owner >= off->owner_cstack) {
		/* a shim of the C stack (3.14: the interpreter's entry frame,
		 * or one on the C stack): the frame inside it is where C
		 * entered the evaluator */
		if (n > 0 && n <= max && n <= PYWALK_MAX_FRAMES)
			out[n - 1].flags |= PYFRAME_ENTRY;
		w->frame = f.previous;
		return 0;
	}
	if (n >= max || n >= PYWALK_MAX_FRAMES) {
		w->status = PYWALK_FULL;
		return 1;
	}
	if (off->flags & PYOFF_FRAMEOBJ) {
		/* f_lasti: the last instruction started, -1 before the
		 * first; every frame its own evaluator call, never
		 * incomplete */
		int32_t lasti = (int32_t)f.instr;

		out[n].code = f.code;
		out[n].instr = (off->flags & PYOFF_LASTI_UNITS) && lasti >= 0 ? 2 * lasti : lasti;
		out[n].flags = PYFRAME_ENTRY | PYFRAME_WHOLE;
		w->n = n + 1;
		w->frame = f.previous;
		return 0;
	}
	if (f.is_entry)
		flags |= PYFRAME_ENTRY;
	if (f.owner == off->owner_generator)
		flags |= PYFRAME_GEN;
	if (off->flags & PYOFF_STACKREF)
		f.code &= ~(uint64_t)3;	/* _PyStackRef's tag bits */
	out[n].code = f.code;
	out[n].instr = (int32_t)(f.instr - (f.code + off->co_code_adaptive));
	out[n].flags = flags;
	w->n = n + 1;
	w->frame = f.previous;
	return 0;
}

/* A chain that loops (memory changing under the walk, or corrupt) ends when
 * the steps run out: every recorded frame takes a step, and so does each
 * shim, of which there is at most one a recorded frame, plus one. */
PYWALK_INLINE uint32_t PYWALK_FN(walk)(const struct python_offsets *off, uint64_t tstate,
				       struct python_walk *w, struct python_frame *out,
				       uint32_t max, void *env)
{
	if (PYWALK_FN(start)(off, tstate, w, env))
		return w->status;
	if (max > PYWALK_MAX_FRAMES)
		max = PYWALK_MAX_FRAMES;
	for (uint32_t i = 0; i < 2 * max + 2; i++)
		if (PYWALK_FN(step)(off, w, out, max, env))
			break;
	if (w->status == PYWALK_MORE)
		w->status = PYWALK_FULL;
	return w->status;
}

PYWALK_INLINE int PYWALK_FN(tss)(const struct python_glibc *g, uint64_t fsbase, uint32_t key,
				 uint64_t *tstate, void *env)
{
	uint64_t blk = 0, addr;

	*tstate = 0;
	if (key < 32) {
		addr = fsbase + g->specific_1stblock + key * 16 + 8;
	} else {
		if (key >= 1024)	/* PTHREAD_KEYS_MAX */
			return -1;
		if (PYWALK_READ(env, &blk, fsbase + g->specific + (key / 32) * 8, 8))
			return -1;
		if (!blk)	/* the thread never set a key of this block */
			return 0;
		addr = blk + (key % 32) * 16 + 8;
	}
	return PYWALK_READ(env, tstate, addr, 8) ? -1 : 0;
}

PYWALK_INLINE void PYWALK_FN(tfind_start)(const struct python_offsets *off, uint64_t runtime,
					  struct python_tfind *f, void *env)
{
	f->interp = 0;
	f->ts = 0;
	f->found = 0;
	f->pad = 0;
	f->status = PYWALK_MORE;
	if (!runtime || PYWALK_LIST_READ(env, &f->interp, runtime + off->rt_interp_head, 8))
		f->status = PYWALK_FAULT;
}

PYWALK_INLINE int PYWALK_FN(tfind_step)(const struct python_offsets *off, struct python_tfind *f,
					uint16_t by, uint64_t id, void *env)
{
	uint64_t v = 0;

	if (f->status != PYWALK_MORE)
		return 1;
	if (!f->ts) {
		/* the next interpreter's list (its next read now: the list
		 * is walked from a copy of where it goes on) */
		if (!f->interp) {
			f->status = PYWALK_END;
			return 1;
		}
		if (PYWALK_LIST_READ(env, &f->ts, f->interp + off->is_threads_head, 8) ||
		    PYWALK_LIST_READ(env, &f->interp, f->interp + off->is_next, 8)) {
			f->status = PYWALK_FAULT;
			return 1;
		}
		return 0;
	}
	if (PYWALK_LIST_READ(env, &v, f->ts + by, 8)) {
		f->status = PYWALK_FAULT;
		return 1;
	}
	if (v == id) {
		f->found = f->ts;
		f->status = PYWALK_END;
		return 1;
	}
	if (PYWALK_LIST_READ(env, &f->ts, f->ts + off->ts_next, 8)) {
		f->status = PYWALK_FAULT;
		return 1;
	}
	return 0;
}

/* A list that loops (changing under the walk, or corrupt) ends when the
 * steps run out. */
PYWALK_INLINE uint64_t PYWALK_FN(tfind)(const struct python_offsets *off, uint64_t runtime,
					uint16_t by, uint64_t id, void *env)
{
	struct python_tfind f;

	PYWALK_FN(tfind_start)(off, runtime, &f, env);
	for (uint32_t i = 0; i < PYTHON_TSTATE_STEPS; i++)
		if (PYWALK_FN(tfind_step)(off, &f, by, id, env))
			break;
	return f.status == PYWALK_END ? f.found : 0;
}

#undef PYWALK_FN
#undef PYWALK_INLINE
#undef PYWALK_LIST_READ
#undef PYWALK_READ
#undef PYWALK_MAX_FRAMES
#undef PYWALK_FIELDS
