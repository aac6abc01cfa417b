/* $ustack unwinding: a copied stack, walked with the CFI by libdw's
 * dwfl_frame, the thread state being the copy (stack.h); where libdw finds
 * no CFI, with the unwind tables the engines walk with. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "core/log.h"
#include "objfile/modules.h"
#include "cache/cache.h"
#include "stack/stack.h"
#include "stack/stack_int.h"
#include "stack/stack_walk.h"	/* STACK_FP_SPAN */
#include "stack/unwjit.h"
#include "stack/unwstore.h"

/* ---- a process: its modules in a Dwfl, and the stack being unwound ------ */

static const Dwfl_Callbacks dwfl_cbs = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

static pid_t t_next(Dwfl *d, void *arg, void **targ)
{
	struct unw_proc *p = arg;

	(void)d;
	if (*targ)
		return 0;
	*targ = p;
	return p->tid;
}

static bool t_get(Dwfl *d, pid_t tid, void *arg, void **targ)
{
	(void)d;
	(void)tid;
	*targ = arg;
	return true;
}

/* The unwinder reads the stack: only the copy is there. */
static bool t_mem(Dwfl *d, Dwarf_Addr addr, Dwarf_Word *res, void *arg)
{
	struct unw_proc *p = arg;
	uint64_t sp = p->h.regs[USC_REG_SP];

	(void)d;
	if (addr >= sp && addr - sp <= p->len && p->len - (addr - sp) >= 8) {
		memcpy(res, p->bytes + (addr - sp), 8);
		return true;
	}
	p->missed = true;
	return false;
}

/* The registers at the hit, in DWARF's x86-64 numbering. */
static bool t_regs(Dwfl_Thread *t, void *targ)
{
	struct unw_proc *p = targ;
	const uint64_t *r = p->h.regs;
	Dwarf_Word w[17] = {
		r[USC_REG_AX], r[USC_REG_DX], r[USC_REG_CX], r[USC_REG_BX],
		r[USC_REG_SI], r[USC_REG_DI], r[USC_REG_BP], r[USC_REG_SP],
		r[USC_REG_R8], r[USC_REG_R9], r[USC_REG_R10], r[USC_REG_R11],
		r[USC_REG_R12], r[USC_REG_R13], r[USC_REG_R14], r[USC_REG_R15],
		r[USC_REG_IP],
	};

	if (!dwfl_thread_state_registers(t, 0, 17, w))
		return false;
	dwfl_thread_state_register_pc(t, r[USC_REG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = t_next,
	.get_thread = t_get,
	.memory_read = t_mem,
	.set_initial_registers = t_regs,
};

/* The process's file mappings, as /proc/PID/maps text for libdwfl (which
 * groups a file's mappings into one module at its load bias). */
static Dwfl *proc_dwfl(struct usc_cache *c, struct unw_proc *p, bool refresh)
{
	size_t n = 0, tlen = 0;
	const struct proc_map *m = cache_maps(c, p->pid, refresh, &n);
	char *text = NULL;
	FILE *f;
	Dwfl *d;

	f = open_memstream(&text, &tlen);
	if (!f)
		return NULL;
	for (size_t i = 0; m && i < n; i++) {
		uint64_t ino = m[i].inode;

		/* files only (not the agent's memfd, nor a file deleted since:
		 * libdwfl would read those from the process) */
		if (!m[i].path || m[i].path[0] != '/' || !strncmp(m[i].path, "/memfd:", 7) ||
		    strstr(m[i].path, " (deleted)"))
			continue;
		/* libdwfl groups a file's mappings by device and inode: a
		 * recording keeps neither, the path tells files apart */
		if (!ino)
			for (const char *q = m[i].path; *q; q++)
				ino = (ino ^ (unsigned char)*q) * 0x100000001b3ULL;
		fprintf(f, "%llx-%llx %s %llx %x:%x %llu %s\n", (unsigned long long)m[i].start,
			(unsigned long long)m[i].end, m[i].perms, (unsigned long long)m[i].pgoff,
			major((dev_t)m[i].dev), minor((dev_t)m[i].dev), (unsigned long long)ino,
			m[i].path);
	}
	if (fclose(f) || !text)
		return free(text), NULL;
	p->maps_gen = cache_maps_gen(c, p->pid);
	d = dwfl_begin(&dwfl_cbs);
	if (d && tlen) {
		FILE *in = fmemopen(text, tlen, "r");

		dwfl_report_begin(d);
		if (in) {
			dwfl_linux_proc_maps_report(d, in);
			fclose(in);
		}
		dwfl_report_end(d, NULL, NULL);
	}
	free(text);
	if (d && !dwfl_attach_state(d, NULL, p->pid, &thread_cbs, p)) {
		log_debug("stack: no unwinder for process %d: %s", p->pid, dwfl_errmsg(-1));
		dwfl_end(d);
		return NULL;
	}
	return d;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static struct unw_proc *proc_get(struct usc_cache *c, struct stack_cache *sc, pid_t pid)
{
	struct unw_proc *p = NULL, *old = &sc->procs[0];

	for (size_t i = 0; i < STACK_PROCS; i++) {
		if (sc->procs[i].dwfl && sc->procs[i].pid == pid) {
			p = &sc->procs[i];
			break;
		}
		if (!sc->procs[i].dwfl || sc->procs[i].used < old->used)
			old = &sc->procs[i];
	}
	if (!p) {
		p = old;
		if (p->dwfl)
			dwfl_end(p->dwfl);
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		p->dwfl = proc_dwfl(c, p, false);
		if (!p->dwfl)
			return NULL;
	}
	p->used = ++sc->tick;
	return p;
}

/* A module mapped since the maps were read (dlopen): made again from the
 * maps as the cache has them when someone read them since (the inject
 * engine, at a dlopen: the maps this dwfl was made of may have been read
 * in the middle of one, a module's mappings not all there yet), else read
 * again, at most once a second a process (code outside every file, a
 * JIT's, would otherwise read them at every stack). */
static bool proc_refresh(struct usc_cache *c, struct unw_proc *p)
{
	uint64_t t = now_ms();
	bool newer = cache_maps_gen(c, p->pid) != p->maps_gen;
	Dwfl *d;

	if (!newer && p->refreshed && t - p->refreshed < 1000)
		return false;
	if (!newer)
		p->refreshed = t;
	d = proc_dwfl(c, p, !newer);
	if (!d)
		return false;
	dwfl_end(p->dwfl);
	p->dwfl = d;
	return true;
}

/* ---- the walk ----------------------------------------------------------- */

/* Has the code at pc (a lookup address: exact, or a return address - 1)
 * CFI? 1 (and *sig: a signal frame), 0 none, -1 pc is in no module. */
int unw_cfi_at(Dwfl *d, uint64_t pc, bool *sig)
{
	Dwfl_Module *mod = dwfl_addrmodule(d, pc);
	Dwarf_Addr bias;
	Dwarf_CFI *cfi;
	Dwarf_Frame *fr;

	*sig = false;
	/* a module whose file libdwfl could not read (its mappings seen
	 * half made, in a dlopen) is as good as none: read the maps again */
	if (!mod || !dwfl_module_getelf(mod, &bias))
		return -1;
	for (int k = 0; k < 2; k++) {
		cfi = k ? dwfl_module_dwarf_cfi(mod, &bias) : dwfl_module_eh_cfi(mod, &bias);
		if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &fr) == 0) {
			Dwarf_Addr start, end;

			dwarf_frame_info(fr, &start, &end, sig);
			free(fr);
			return 1;
		}
		log_debug("stack: no CFI at 0x%llx (%s): %s", (unsigned long long)pc,
			  k ? "debug_frame" : "eh_frame", cfi ? dwarf_errmsg(-1) : dwfl_errmsg(-1));
	}
	return 0;
}

/* Does the CFI at pc (a lookup address) say that its caller's return
 * address is undefined: the outermost frame (_start, a thread's clone)? */
static bool ra_undefined(Dwfl *d, uint64_t pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(d, pc);
	Dwarf_Addr bias;
	Dwarf_CFI *cfi;
	Dwarf_Frame *fr;

	for (int k = 0; mod && k < 2; k++) {
		cfi = k ? dwfl_module_dwarf_cfi(mod, &bias) : dwfl_module_eh_cfi(mod, &bias);
		if (cfi && dwarf_cfi_addrframe(cfi, pc - bias, &fr) == 0) {
			Dwarf_Op mem[3], *ops = NULL;
			size_t nops = 1;
			int ra = dwarf_frame_info(fr, NULL, NULL, NULL);
			bool undef = ra >= 0 && dwarf_frame_register(fr, ra, mem, &ops, &nops) == 0 &&
				     nops == 0 && ops == mem;

			free(fr);
			return undef;
		}
	}
	return false;
}

struct walk {
	struct unw_proc *p;
	struct usc_stack *out;
	uint32_t max, want;
	bool ended;
	bool nomodule;
	struct usc_cache *c;	/* the process's mappings */
	pid_t pid;
	bool fp_known;		/* the last frame's rsp and rbp, as libdw has them */
	uint64_t fp_sp, fp_bp;
};

static void set_bit(uint64_t *bits, uint32_t i)
{
	bits[i / 64] |= 1ULL << (i % 64);
}

static void end_at(struct walk *w, enum usc_stack_end why, uint64_t pc)
{
	w->out->end = (uint8_t)why;
	w->out->end_pc = pc;
	w->ended = true;
}

static uint64_t lookup_pc(const struct usc_stack *st, uint32_t i)
{
	return usc_stack_exact(st, i) ? st->pc[i] : st->pc[i] - 1;
}

/* Is addr in anonymous executable memory (JIT code)? Its mapping, or
 * NULL. */
static const struct proc_map *in_anon_code(struct walk *w, uint64_t addr)
{
	size_t n = 0;
	const struct proc_map *m = w->c ? cache_maps(w->c, w->pid, false, &n) : NULL;

	for (size_t i = 0; m && i < n; i++)
		if (addr >= m[i].start && addr < m[i].end)
			return m[i].perms[2] == 'x' &&
			       (!m[i].path || !m[i].path[0] || !strncmp(m[i].path, "/memfd:", 7) ||
				!strncmp(m[i].path, "[anon:", 6)) ? &m[i] : NULL;
	return NULL;
}

/* Frame i - 1 has CFI: frame i is its caller by the CFI, not by a guess.
 * Or it has none, being JIT code (anonymous memory) or in a module without
 * CFI for it (not frame 0 there: a probe at a function's entry has not
 * pushed rbp yet): frame i is its caller by its frame pointer, which libdw
 * steps as the walker does (stack_walk.h), when the frame pointer passes
 * the walker's checks. */
static bool caller_ok(struct walk *w, uint32_t i)
{
	uint64_t look = lookup_pc(w->out, i - 1);
	const struct proc_map *jit = NULL;
	const struct stack_utab *u;
	bool sig, anon;
	int r = unw_cfi_at(w->p->dwfl, look, &sig);

	if (r == 1) {
		if (sig)
			set_bit(w->out->sigframe, i - 1);
		return true;
	}
	anon = r < 0 && (jit = in_anon_code(w, look));
	if (jit && !cache_frozen(w->c) && stack_jit_tab(w->pid, jit, &u) == 0) {
		/* JIT code of a known shape (CPython's trampolines), whose
		 * frame pointer libdw would follow wrongly: the tables, which
		 * know it, go on from the copy (walk_tables) */
		end_at(w, USC_STACK_END_NOCFI, w->out->pc[i - 1]);
		return false;
	}
	if ((r == 0 || anon) && (i >= 2 || anon) && w->fp_known && !(w->fp_bp & 7) &&
	    w->fp_bp >= w->fp_sp && w->fp_bp - w->fp_sp < STACK_FP_SPAN)
		return true;
	if (r < 0)
		w->nomodule = true;
	end_at(w, r < 0 ? USC_STACK_END_NOMODULE : USC_STACK_END_NOCFI, w->out->pc[i - 1]);
	return false;
}

static int on_frame(Dwfl_Frame *f, void *arg)
{
	struct walk *w = arg;
	struct usc_stack *st = w->out;
	Dwarf_Addr pc;
	bool act = false;

	if (!dwfl_frame_pc(f, &pc, &act))
		return DWARF_CB_ABORT;
	if (st->n && !caller_ok(w, st->n))
		return DWARF_CB_ABORT;
	if (st->n && pc == 0) {		/* a zero return address: the end */
		end_at(w, USC_STACK_END_OUTERMOST, 0);
		return DWARF_CB_ABORT;
	}
	if (st->n == w->want || st->n == w->max) {
		end_at(w, USC_STACK_END_LIMIT, pc);
		return DWARF_CB_ABORT;
	}
	if (act || !st->n)
		set_bit(st->exact, st->n);
	st->pc[st->n++] = pc;
	w->fp_known = dwfl_frame_reg(f, 7, &w->fp_sp) == 0 && dwfl_frame_reg(f, 6, &w->fp_bp) == 0;
	return DWARF_CB_OK;
}

static int walk(struct usc_cache *c, pid_t pid, struct unw_proc *p, struct usc_stack *out,
		uint32_t max, bool *nomodule)
{
	struct walk w = {p, out, max, p->h.frames ? p->h.frames : USC_STACK_FRAMES, false, false,
			 c, pid, false, 0, 0};
	int rc;

	memset(out, 0, sizeof(*out));
	p->missed = false;
	rc = dwfl_getthread_frames(p->dwfl, p->tid, on_frame, &w);
	*nomodule = w.nomodule;
	if (w.ended)
		return 0;
	if (rc == 0) {
		/* libdw ends a stack alike where the CFI says there is no
		 * caller and where it could not read the return address: the
		 * latter, beyond the copy, is no outermost frame */
		if (out->n && p->missed && !ra_undefined(p->dwfl, lookup_pc(out, out->n - 1)))
			end_at(&w, USC_STACK_END_COPY, out->pc[out->n - 1]);
		else
			end_at(&w, USC_STACK_END_OUTERMOST, 0);
		return 0;
	}
	/* libdw stopped: at a frame without CFI, beyond the copy, or on CFI it
	 * could not follow */
	if (!out->n) {
		bool sig;
		int r = unw_cfi_at(p->dwfl, p->h.regs[USC_REG_IP], &sig);

		*nomodule = r < 0;
		end_at(&w, r < 0 ? USC_STACK_END_NOMODULE : r == 0 ? USC_STACK_END_NOCFI :
			   p->missed ? USC_STACK_END_COPY : USC_STACK_END_ERROR,
		       p->h.regs[USC_REG_IP]);
		return 0;
	}
	if (!caller_ok(&w, out->n)) {
		*nomodule = w.nomodule;
		return 0;
	}
	end_at(&w, p->missed ? USC_STACK_END_COPY : USC_STACK_END_ERROR, out->pc[out->n - 1]);
	return 0;
}

/* ---- where libdw finds no CFI: the unwind tables ------------------------- */

/* The copy, for the tables' walker. */
static int copy_read(void *ctx, uint64_t addr, uint64_t *val)
{
	const struct unw_proc *p = ctx;
	uint64_t sp = p->h.regs[USC_REG_SP];

	if (addr < sp || addr - sp > p->len || p->len - (addr - sp) < 8)
		return 1;
	memcpy(val, p->bytes + (addr - sp), 8);
	return 0;
}

/* A copy libdw stopped in code without CFI: walked again with the unwind
 * tables the engines walk with, which also hold rows where a module has
 * no CFI (a Go program built without DWARF: Go's pcsp tables, unwgo.h).
 * Their walk replaces libdw's where it goes further. */
static void walk_tables(struct usc_cache *c, struct unw_proc *p, struct usc_stack *out,
			uint32_t max)
{
	struct stack_store *st = stack_store_of(c);
	uint64_t pcs[STACK_WALK_MAX];
	struct stack_map *maps = NULL;
	struct stack_image img;
	struct stack_walk w;
	uint32_t nmaps = 0, want = p->h.frames ? p->h.frames : USC_STACK_FRAMES;

	if (!st || stack_store_proc(st, c, p->pid, false, &maps, &nmaps))
		return;
	img = *stack_store_image(st);
	img.maps = maps;
	img.nmaps = nmaps;
	stack_walk_image(&img, p->h.regs[USC_REG_IP], p->h.regs[USC_REG_SP],
			 p->h.regs[USC_REG_BP], want < max ? want : max, copy_read, p, pcs, &w);
	free(maps);
	if (w.n > out->n && w.end != STACK_WALK_FALLBACK && w.end != STACK_WALK_GOING)
		stack_walk_usc(&w, pcs, true, out);
}

int stack_unwind(struct usc_cache *c, pid_t pid, pid_t tid, const void *copy, size_t len,
		 struct usc_stack *out, uint32_t max)
{
	struct stack_cache *sc = stack_cache_get(c);
	struct unw_proc *p;
	bool nomodule = false;

	if (!sc)
		return -ENOMEM;
	if (len < sizeof(struct fetch_stack_hdr))
		return -EINVAL;
	p = proc_get(c, sc, pid);
	memset(out, 0, sizeof(*out));
	if (!p) {
		/* no module known for the process: the probed address alone */
		struct fetch_stack_hdr h;

		memcpy(&h, copy, sizeof(h));
		out->pc[0] = h.regs[USC_REG_IP];
		out->n = max ? 1 : 0;
		set_bit(out->exact, 0);
		out->end = USC_STACK_END_NOMODULE;
		out->end_pc = h.regs[USC_REG_IP];
		return 0;
	}
	memcpy(&p->h, copy, sizeof(p->h));
	if (p->h.len != len - sizeof(p->h))
		return -EINVAL;
	p->bytes = (const uint8_t *)copy + sizeof(p->h);
	p->len = p->h.len;
	p->tid = tid > 0 ? tid : pid;
	if (p->h.end == FETCH_STACK_UNREAD) {
		out->end = USC_STACK_END_UNREAD;
		out->end_pc = p->h.regs[USC_REG_IP];
		return 0;
	}
	walk(c, pid, p, out, max, &nomodule);
	if (nomodule && proc_refresh(c, p))
		walk(c, pid, p, out, max, &nomodule);
	if (out->end == USC_STACK_END_NOCFI)
		walk_tables(c, p, out, max);
	return 0;
}
