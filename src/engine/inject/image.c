/* One patched address space (an image): with every thread of the process
 * stopped,
 *   1. the patches of the sites whose modules it maps (plan.c), checked
 *      against the bytes in memory, which must be the file's;
 *   2. with system calls run in the process: a memfd shared with us (the
 *      control block, per-thread slots, counters, site programs and rings),
 *      the agent's code, a MADV_WIPEONFORK page for the self word, and one
 *      trampoline area within +-2 GiB of each probed module (area.c);
 *   3. the trampolines: relocated instructions, the probe (tramp.c), the
 *      rest, a jump back;
 *   4. any thread whose instruction pointer lies inside a displaced range
 *      moved out, then the jumps written.
 * Removal writes back every original byte where our jump still is;
 * trampolines and the shared memory stay mapped, since a thread may still
 * be inside them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cpuid.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "engine/inject/inject_int.h"
#include "engine/inject/tramp.h"
#include "cache/cache.h"
#include "ns/ns.h"
#include "x86/reloc.h"

long inj_rsys(struct remote *rem, long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	bool ok;
	long r = remote_syscall(rem, &ok, nr, a1, a2, a3, a4, a5, a6);

	if (!ok)
		log_error("cannot run a system call in process %d: %s", (int)rem->pid,
			  strerror((int)-r));
	return r;
}

bool inj_rsys_failed(long r)
{
	return r < 0 && r > -4096;
}

/* cpuid traps to the hypervisor in a VM: asked once */
static bool have_rdpid(void)
{
	static int known = -1;
	unsigned a, b, c, d;

	if (known < 0)
		known = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 22));
	return known;
}

/* The kernel sets TSC_AUX (rdtscp's CPU) only where the CPU says it has
 * rdtscp (or rdpid) */
static bool have_rdtscp(void)
{
	static int known = -1;
	unsigned a, b, c, d;

	if (known < 0)
		known = __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
	return known;
}

/* How the agent reads a hit's CPU. USCOPE_INJECT_RDTSCP=0 reads it as on a
 * CPU with neither rdtscp nor rdpid (the tests do). */
static uint32_t cpu_read(void)
{
	const char *env = getenv("USCOPE_INJECT_RDTSCP");

	if (env && !strcmp(env, "0"))
		return INJ_CPU_LSL;
	return have_rdpid() ? INJ_CPU_RDPID : have_rdtscp() ? INJ_CPU_RDTSCP : INJ_CPU_LSL;
}

/* The kernel allows rdfsbase (HWCAP2_FSGSBASE). USCOPE_INJECT_RDFSBASE=0
 * reads the fs base as on a CPU without it (the tests do). */
static bool use_rdfsbase(void)
{
	const char *env = getenv("USCOPE_INJECT_RDFSBASE");

	if (env && !strcmp(env, "0"))
		return false;
	return (getauxval(AT_HWCAP2) & 2) != 0;
}

struct inj_image *inj_image_new(struct inj *j, pid_t pid)
{
	struct inj_image *img = calloc(1, sizeof(*img)), **v;

	if (!img)
		return NULL;
	v = realloc(j->images, (j->nimages + 1) * sizeof(*v));
	if (!v) {
		free(img);
		return NULL;
	}
	j->images = v;
	j->images[j->nimages++] = img;
	img->refs = 1;
	img->pid = pid;
	img->shm.folded = calloc(INJ_NCOUNTS * j->base.nsites + INJ_NCOUNTS,
				 sizeof(*img->shm.folded));
	img->semaphores = calloc(j->base.nsites + 1, sizeof(*img->semaphores));
	if (!img->shm.folded || !img->semaphores)
		return NULL;	/* freed with the engine's images */
	return img;
}

void inj_image_put(struct inj *j, struct inj_image *img)
{
	(void)j;
	if (img && img->refs > 0)
		img->refs--;
}

void inj_image_free(struct inj_image *img)
{
	if (!img)
		return;
	if (img->shm.map) {
		inj_owner_release(&img->shm);
		/* the rings' pages are charged to the process (it touched them):
		 * give them back; the mapping stays there, a late hit refaults
		 * a zero page, and records nothing (enabled is 0) */
		madvise((char *)img->shm.map + img->shm.ctl->rings_off,
			(size_t)INJ_NSLOTS * INJ_RING_SIZE, MADV_REMOVE);
		if (img->shm.ctl->agg_kind)
			madvise((char *)img->shm.map + img->shm.ctl->agg_dir_off,
				img->shm.size - img->shm.ctl->agg_dir_off, MADV_REMOVE);
		munmap(img->shm.map, img->shm.size);
	}
	free(img->dumped);
	img->dumped = NULL;
	free(img->chunks);
	for (size_t p = 0; p < img->npatches; p++) {
		free(img->patches[p].sites);
		free(img->patches[p].probe_off);
		free(img->patches[p].probe_at);
		free(img->patches[p].piece_at);
	}
	free(img->patches);
	free(img->areas);
	free(img->pad_pages);
	free(img->semaphores);
	free(img->shm.folded);
	free(img);
}

bool inj_image_applied(const struct inj_image *img)
{
	for (size_t p = 0; p < img->npatches; p++)
		if (img->patches[p].applied)
			return true;
	return img->nsemaphores > 0;
}

/* ---- the shared memory -------------------------------------------------- */

/* Where each part of the shared memory lies (the agent reads these offsets
 * from struct inj_ctl). */
struct shm_layout {
	uint64_t slots, counts, sites, undo, sem, kids, py, rings, obj, script;
	struct inj_ctl agg;
	struct inj_stk stk;
};

static void shm_layout(struct inj *j, struct inj_shm *m, struct shm_layout *l)
{
	size_t nsites = j->base.nsites;
	uint64_t off = (sizeof(struct inj_ctl) + 63) & ~63ULL;

	memset(l, 0, sizeof(*l));
	l->slots = off;
	off += INJ_NSLOTS * sizeof(struct inj_slot);
	l->counts = off;
	off += (uint64_t)INJ_NSLOTS * nsites * INJ_NCOUNTS * sizeof(uint64_t);
	off = (off + 63) & ~63ULL;
	m->cpu_counts_off = off;
	m->cpu_stride = (uint32_t)((nsites * sizeof(uint64_t) + 63) & ~63ULL);
	off += (uint64_t)INJ_CPU_BUCKETS * m->cpu_stride;
	l->sites = off;
	off += nsites * sizeof(struct inj_site);
	off = (off + 63) & ~63ULL;
	l->undo = off;
	off += (nsites + 1) * sizeof(struct inj_undo);
	l->sem = off;
	off += (nsites + 1) * sizeof(uint64_t);
	off = (off + 63) & ~63ULL;
	l->kids = off;
	off += INJ_MAX_KIDS * sizeof(struct inj_kid_ent);
	/* (before the rings and what follows them, which are given back at the
	 * end: a profile function left in a thread reads it later) */
	off = inj_py_reserve(j, off, &l->py);
	off = (off + 4095) & ~4095ULL;
	l->rings = off;
	off += (uint64_t)INJ_NSLOTS * INJ_RING_SIZE;
	off = inj_agg_reserve(j, off, &l->agg);
	off = inj_obj_reserve(j, off, &l->obj);
	off = inj_stk_reserve(j, off, &l->stk);
	off = inj_script_reserve(j, off, &l->script);
	m->size = off;
}

static int shm_create(struct inj *j, struct inj_image *img, struct remote *rem)
{
	struct inj_shm *m = &img->shm;
	const char name[] = "uscope";
	size_t nsites = j->base.nsites;
	size_t blob = (size_t)(inject_agent_blob_end - inject_agent_blob);
	const struct agent_hdr *hdr = (const void *)inject_agent_blob;
	struct shm_layout l;
	uint64_t scratch;
	char path[64];
	long fd, r;
	int lfd, ret;

	if (blob < sizeof(*hdr) || hdr->magic != INJ_MAGIC)
		return -ENOEXEC;
	shm_layout(j, m, &l);

	/* the self word, 0 in a forked child; first, the memfd's name goes
	 * there (no other memory of the process is ours to write) */
	r = inj_rsys(rem, SYS_mmap, 0, INJ_SELF_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (inj_rsys_failed(r))
		return (int)r;
	m->self_remote = (uint64_t)r;
	scratch = m->self_remote + 64;
	ret = remote_write(rem, scratch, name, sizeof(name));
	if (ret)
		return ret;
	fd = inj_rsys(rem, SYS_memfd_create, (long)scratch, MFD_CLOEXEC, 0, 0, 0, 0);
	if (inj_rsys_failed(fd))
		return (int)fd;
	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", (int)rem->pid, fd);
	lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd >= 0) {
		struct stat st;

		if (fstat(lfd, &st) == 0) {
			m->memfd_dev = st.st_dev;
			m->memfd_ino = st.st_ino;
		}
	}
	if (lfd < 0 || ftruncate(lfd, (off_t)m->size)) {
		ret = -errno;
		log_error("cannot share memory with process %d: %s", (int)rem->pid, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		inj_rsys(rem, SYS_close, fd, 0, 0, 0, 0, 0);
		return ret;
	}
	m->map = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	close(lfd);
	r = inj_rsys(rem, SYS_mmap, 0, (long)m->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	inj_rsys(rem, SYS_close, fd, 0, 0, 0, 0, 0);
	if (m->map == MAP_FAILED || inj_rsys_failed(r)) {
		if (m->map == MAP_FAILED)
			m->map = NULL;
		log_error("cannot map shared memory into process %d", (int)rem->pid);
		return -ENOMEM;
	}
	m->remote = (uint64_t)r;

	/* the agent */
	r = inj_rsys(rem, SYS_mmap, 0, (long)((blob + 4095) & ~4095UL), PROT_READ | PROT_EXEC,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (inj_rsys_failed(r))
		return (int)r;
	m->agent_remote = (uint64_t)r;
	ret = remote_write(rem, m->agent_remote, inject_agent_blob, blob);
	if (!ret)	/* where the agent's code CPython calls finds its control block */
		ret = remote_write(rem, m->agent_remote + offsetof(struct agent_hdr, ctl), &m->remote,
				   sizeof(m->remote));
	if (ret)
		return ret;
	if (inj_rsys(rem, SYS_madvise, (long)m->self_remote, INJ_SELF_SIZE, MADV_WIPEONFORK, 0, 0,
		     0))
		log_warn("process %d: no MADV_WIPEONFORK (kernel 4.14): its forked children "
			 "would record into its rings as itself", (int)rem->pid);
	{
		/* its own id: what process_vm_readv takes in its PID namespace */
		uint32_t self = (uint32_t)ns_inner_tid(rem->pid);

		ret = remote_write(rem, m->self_remote, &self, sizeof(self));
		if (ret)
			return ret;
	}

	struct inj_ctl *c = m->map;

	m->ctl = c;
	/* held from now on: the agent lets go when we die */
	ret = inj_owner_hold(m, rem, scratch);
	if (ret)
		return ret;
	c->magic = INJ_MAGIC;
	c->owner = m->owner_remote;
	c->nslots = INJ_NSLOTS;
	c->nsites = (uint32_t)nsites;
	c->ring_size = INJ_RING_SIZE;
	c->self = m->self_remote;
	c->slots_off = l.slots;
	c->counts_off = l.counts;
	c->sites_off = l.sites;
	c->rings_off = l.rings;
	c->undo_off = l.undo;
	c->sem_off = l.sem;
	c->kids_off = l.kids;
	/* -p and system-wide: a forked child takes itself up (agent/tracer.c) */
	c->follow_forks = j->children;
	c->use_rdfsbase = use_rdfsbase();
	c->agg_dir_off = l.agg.agg_dir_off;
	c->agg_vals_off = l.agg.agg_vals_off;
	c->agg_touched_off = l.agg.agg_touched_off;
	c->agg_lat_off = l.agg.agg_lat_off;
	c->agg_scratch_off = l.agg.agg_scratch_off;
	inj_agg_ctl(j, c);
	inj_obj_ctl(j, c, l.obj);
	if (l.stk.ro_off) {
		memcpy((char *)m->map + l.stk.ro_off, &l.stk, sizeof(l.stk));
		c->stk_off = l.stk.ro_off;
	}
	inj_py_ctl(j, c, rem->pid, l.py);
	inj_script_ctl(j, m, l.script);
	{
		const struct usc_engine_ctx *s = j->base.ctx;

		c->overwrite = s->set->record.on && s->set->record.snapshot > 0;
		c->lossless = s->set->record.on && !c->overwrite;
		/* counting stacks: they are unwound and counted here, at the
		 * tracer's pace; a count should be exact, so the threads wait
		 * for room (a stack is 8 KiB: a ring holds 500) */
		c->lossless |= s->has_stacks && s->set->agg.kind != USC_AGG_NONE;
		/* ... within a bound, while we make progress */
		c->max_wait_ns = s->set->max_wait_ns;	/* 0: never */
		c->lossless &= c->max_wait_ns > 0;
		/* wake us a quarter of a ring in, long before a producer waits */
		c->watermark = c->overwrite ? ~0u : INJ_RING_SIZE / 4;
	}
	/* letting go rewrites code other threads may run: a membarrier makes
	 * them all serialize after it (Linux 4.16) */
	c->sync_core = inj_rsys(rem, SYS_membarrier, 64 /* REGISTER_PRIVATE_EXPEDITED_SYNC_CORE */,
				0, 0, 0, 0, 0) == 0;
	c->enabled = 1;
	return 0;
}

/* How a thread knows its tid without a system call: glibc keeps it at a
 * fixed offset from the thread pointer. Checked on every thread; otherwise
 * the fs base is the key and the tid asked once. Where the CPU has no
 * rdfsbase, the fs base is the word at %fs:0 when every thread's TCB
 * starts with its own address (the x86-64 TLS ABI); a runtime that keeps
 * no TCB there (Go: %fs:0 is 0 on every thread) has it asked. */
static void key_mode(struct inj_image *img, struct remote *rem)
{
	struct inj_ctl *c = img->shm.ctl;
	bool all = rem->ntasks > 0, self = rem->ntasks > 0;
	pid_t ns_pid, ns_tid;
	bool nested = ns_task_ids(rem->pid, &ns_pid, &ns_tid) > 0;	/* ids of its own */

	for (size_t t = 0; t < rem->ntasks && (all || self); t++) {
		struct user_regs_struct regs;
		uint32_t tid = 0;
		uint64_t tp = 0;

		if (remote_get_regs(rem, t, &regs) || !regs.fs_base) {
			all = self = false;
			break;
		}
		all = all && remote_read(rem, regs.fs_base + GLIBC_TID_OFF, &tid, 4) == 0 &&
		      tid == (uint32_t)(nested ? ns_inner_tid(rem->tasks[t].tid) :
						 rem->tasks[t].tid);
		self = self && remote_read(rem, regs.fs_base, &tp, 8) == 0 && tp == regs.fs_base;
	}
	c->key_mode = all ? INJ_KEY_TID_AT_FS : INJ_KEY_FSBASE;
	c->tid_off = all ? GLIBC_TID_OFF : 0;
	c->fs_self = self;
	log_debug("inject: threads of process %d keyed by %s%s", (int)rem->pid,
		  all ? "glibc's tid" : "fs base",
		  all || c->use_rdfsbase ? "" : self ? " (read at %fs:0)" : " (asked: arch_prctl)");
}

/* ptrace's PTRACE_GET_RSEQ_CONFIGURATION (Linux 5.13) */
#define PT_GET_RSEQ 0x420f
struct pt_rseq {
	uint64_t ptr;
	uint32_t size, sig, flags, pad;
};

/* How a hit's CPU is read: from the thread's rseq area where every thread
 * registered one at the same offset from its thread pointer (glibc 2.35 and
 * later, in its TCB: a thread it starts later has its own there too), else
 * as cpu_read says. Only where the threads are glibc's (keyed by its tid):
 * another runtime's thread pointer may point anywhere. USCOPE_INJECT_RSEQ=0
 * leaves rseq out (the tests do). */
static void cpu_mode(struct inj_image *img, struct remote *rem)
{
	struct inj_ctl *c = img->shm.ctl;
	const char *env = getenv("USCOPE_INJECT_RSEQ");
	bool ok = c->key_mode == INJ_KEY_TID_AT_FS && rem->ntasks > 0 && !(env && !strcmp(env, "0"));
	int64_t off = 0;
	uint32_t sig = 0;

	c->cpu_read = cpu_read();
	for (size_t t = 0; t < rem->ntasks && ok; t++) {
		struct user_regs_struct regs;
		struct pt_rseq rs = {0};

		ok = !remote_get_regs(rem, t, &regs) &&
		     ptrace(PT_GET_RSEQ, rem->tasks[t].tid, (void *)sizeof(rs), &rs) ==
			     (long)sizeof(rs) &&
		     rs.ptr && rs.size >= 8 && rs.ptr > regs.fs_base &&
		     rs.ptr - regs.fs_base < 1u << 20 &&
		     (!t || (off == (int64_t)(rs.ptr - regs.fs_base) && sig == rs.sig));
		off = (int64_t)(rs.ptr - regs.fs_base);
		sig = rs.sig;
	}
	if (ok) {
		c->cpu_read = INJ_CPU_RSEQ;
		c->rseq_cpu_off = (uint32_t)off + 4;	/* struct rseq's cpu_id */
		c->rseq_sig = sig;
	}
	log_debug("inject: process %d reads a hit's CPU %s", (int)rem->pid,
		  c->cpu_read == INJ_CPU_RSEQ ? "from its threads' rseq areas"
		  : c->cpu_read == INJ_CPU_RDPID ? "with rdpid"
		  : c->cpu_read == INJ_CPU_RDTSCP ? "with rdtscp" : "from the per-CPU segment (lsl)");
}

static void fill_sites(struct inj *j, struct inj_image *img)
{
	struct usc_engine *e = &j->base;
	struct inj_site *is = (struct inj_site *)((char *)img->shm.map + img->shm.ctl->sites_off);

	for (size_t p = 0; p < img->npatches; p++) {
		const struct inj_patch *pa = &img->patches[p];

		for (size_t k = 0; k < pa->nsites; k++) {
			size_t i = pa->sites[k];
			const struct usc_site *site = e->sites[i];
			struct inj_site *d = &is[i];

			d->ctl = img->shm.remote;
			d->owner = img->shm.owner_remote;
			d->ip = site->vaddr + pa->bias;
			d->offset = site->offset;
			d->vaddr = site->vaddr;
			d->index = (uint32_t)i;
			d->nargs = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;
			d->ret_site = site->ret_site;
			d->kind = site->cont ? INJ_CONT :
				  site->tail_call && site->follow_tail ? INJ_TAIL : INJ_PLAIN;
			d->nstr = 0;
			d->stack_need = 0;
			for (unsigned a = 0; a < d->nargs; a++) {
				const struct usc_fetcharg *fa = &site->args[a];
				const struct fetch_insn *in = fa->insn;

				/* a register stored as it is: the agent's fast path
				 * (IP is the agent's to fill in: not one) */
				d->reg_only[a] = 0xff;
				if (fa->ninsn >= 2 && in[0].op == FOP_REG && in[0].reg < USC_REG_IP &&
				    (in[1].op == FOP_END ||
				     (in[1].op == FOP_ST_RAW && fa->ninsn >= 3 && in[2].op == FOP_END)))
					d->reg_only[a] = in[0].reg;
				d->args[a].ninsn = fa->ninsn;
				memcpy(d->args[a].insn, fa->insn, sizeof(fa->insn[0]) * fa->ninsn);
				for (unsigned k2 = 0; k2 < fa->ninsn; k2++)
					if (fa->insn[k2].op == FOP_ST_STRING ||
					    fa->insn[k2].op == FOP_ST_BYTES ||
					    fa->insn[k2].op == FOP_COMM)
						d->nstr++;
				if (in[0].op == FOP_USTACK)
					d->stack_need += (uint32_t)(sizeof(struct fetch_stack_hdr) +
								    fetch_stack_bytes(in[0].imm));
				if (in[0].op == FOP_PYSTACK)
					d->stack_need += (uint32_t)(sizeof(struct python_stack_hdr) +
								    in[0].imm * sizeof(struct python_frame) + 8);
			}
			inj_agg_site(j, site, d, img->shm.ctl, img->shm.remote);
			inj_obj_site(site, d, img->shm.ctl, img->shm.remote);
			inj_rec_fast_site(j, d, img->shm.ctl, img->shm.remote);
			inj_script_site(j, site, d, img->shm.ctl, img->shm.remote);
		}
	}
}

/* ---- trampolines ---------------------------------------------------------- */

/* Relocate code[from_off..to_off) of the patch to run at `at`. */
static ssize_t reloc(const struct inj_patch *pa, uint32_t from_off, uint32_t to_off,
		     uint64_t at, uint8_t *out, size_t cap)
{
	const char *why = NULL;
	ssize_t n;

	if (to_off == from_off)
		return 0;
	n = x86_relocate(pa->orig + from_off, to_off - from_off, pa->addr + from_off, at, out,
			 cap, &why);
	if (n < 0)
		log_error("cannot relocate the code at 0x%llx: %s",
			  (unsigned long long)(pa->addr + from_off), why ? why : strerror((int)-n));
	return n;
}

/* The site's instruction before the patch (struct inj_pre), run again at
 * `at` in the trampoline. */
static ssize_t redo_pre(const struct inj_patch *pa, uint64_t at, uint8_t *out, size_t cap)
{
	const char *why = NULL;
	ssize_t n = x86_relocate(pa->pre.code, pa->pre.len, pa->addr - pa->pre.len, at, out, cap,
				 &why);

	if (n < 0)
		log_error("cannot relocate the code at 0x%llx: %s",
			  (unsigned long long)(pa->addr - pa->pre.len), why ? why : strerror((int)-n));
	return n;
}

static int write_tramp(struct inj *j, struct inj_image *img, struct remote *rem,
		       struct inj_patch *pa)
{
	struct usc_engine *e = &j->base;
	struct inj_area *a = &img->areas[pa->area];
	struct inj_shm *m = &img->shm;
	const struct agent_hdr *hdr = (const void *)inject_agent_blob;
	uint8_t *buf;
	uint64_t at = a->base + a->used;
	size_t len = 0, cap = TRAMP_MAX * (pa->nsites + 1);
	bool rdpid = have_rdpid();
	ssize_t n;

	buf = malloc(cap);
	free(pa->probe_at);
	free(pa->piece_at);
	pa->probe_at = calloc(pa->nsites + 1, sizeof(*pa->probe_at));
	pa->piece_at = calloc(pa->nsites + 1, sizeof(*pa->piece_at));
	if (!buf || !pa->probe_at || !pa->piece_at) {
		free(buf);
		return -ENOMEM;
	}
	/* relocated pieces between the probes, in address order: an entry and
	 * a return site of a short function can share one patch */
	uint32_t done = 0;
	/* the site's instruction left before the patch: undone before the
	 * probes at the site where it can be, done again after them where
	 * that is needed (struct inj_pre) */
	bool redo = pa->pre.len && pa->pre.redo;

	memcpy(buf + len, pa->pre.undo, pa->pre.undo_len);
	len += pa->pre.undo_len;

	for (size_t k = 0; k < pa->nsites; k++) {
		size_t i = pa->sites[k];
		const struct usc_site *site = e->sites[i];
		struct tramp_spec ts = {
			.at = at,
			/* flags are dead at a function's entry and at its returns
			 * (the planner moves an entry patch past endbr64 itself) */
			.save_flags = !(site->ret_site ||
					(site->func_vaddr && site->vaddr == site->func_vaddr)) ||
				      pa->pre.keep_flags,
			.have_rdpid = rdpid,
			.rseq_cpu_off = m->ctl->cpu_read == INJ_CPU_RSEQ ? m->ctl->rseq_cpu_off : 0,
			.rseq_sig = m->ctl->rseq_sig,
		};

		if (redo && pa->probe_off[k]) {
			if ((n = redo_pre(pa, at + len, buf + len, cap - len)) < 0)
				goto out;
			len += (size_t)n;
			redo = false;
		}
		pa->piece_at[k] = at + len;
		n = reloc(pa, done, pa->probe_off[k], at + len, buf + len, cap - len);
		if (n < 0)
			goto out;
		len += (size_t)n;
		done = pa->probe_off[k];
		ts.probe_at = at + len;
		pa->probe_at[k] = ts.probe_at;
		/* every probe calls the agent when the tracer has died */
		ts.hit = m->agent_remote + hdr->hit_off;
		ts.site = m->remote + m->ctl->sites_off + i * sizeof(struct inj_site);
		ts.owner = m->owner_remote;
		ts.letgo = m->self_remote + INJ_SELF_LETGO;
		if (e->ctx->set->count_only) {
			ts.counter = m->remote + m->cpu_counts_off + i * sizeof(uint64_t);
			/* a forked child not followed (its self word 0) counts
			 * nothing; a followed one counts from its first call (it
			 * never calls the agent to claim its word) */
			ts.self = j->children ? 0 : m->self_remote;
			ts.stride = m->cpu_stride;
		} else {
			const struct inj_site *is = (const struct inj_site *)
				((const char *)m->map + m->ctl->sites_off) + i;

			if (is->obj == INJ_OBJ_MATCH) {
				ts.obj_filter = is->objs.filter;
				ts.obj_shift = (uint8_t)is->objs.fshift;
				ts.obj_regs = is->obj_regs;
			}
			/* (a site the agent calls for Python is never the fast
			 * path's: inj_py_sites changed its kind after fill_sites) */
			if (is->agg_fast || (is->rec_fast && is->kind == INJ_PLAIN) ||
			    is->script_fast) {
				ts.fast = m->agent_remote +
					  (is->script_nunits ? hdr->script_units_off :
					   is->script_fast ? hdr->script_fast_off :
					   is->rec_fast ? hdr->fast_rec_off :
					   is->agg == INJ_AGG_ENTRY ? hdr->fast_lat_in_off :
					   is->agg == INJ_AGG_RETURN ? hdr->fast_lat_out_off :
					   hdr->fast_off);
				ts.fast_a = is->nargs > 0 ? is->reg_only[0] : 0xff;
				ts.fast_b = is->nargs > 1 ? is->reg_only[1] : 0xff;
				if (is->rec_fast && is->ret_site) {
					/* a return's record: where it returns to, then
					 * its one argument */
					ts.fast_b = ts.fast_a;
					ts.fast_a = TRAMP_FAST_RETADDR;
				}
			}
		}
		n = tramp_encode_probe(&ts, buf + len, cap - len);
		if (n < 0) {
			log_error("cannot encode the trampoline of %s", site->label);
			goto out;
		}
		{
			struct inj_chunk *c = realloc(img->chunks, (img->nchunks + 1) * sizeof(*c));

			if (!c) {
				n = -ENOMEM;
				goto out;
			}
			img->chunks = c;
			c[img->nchunks++] = (struct inj_chunk){ts.probe_at, (uint32_t)n};
		}
		len += (size_t)n;
	}
	if (redo) {
		if ((n = redo_pre(pa, at + len, buf + len, cap - len)) < 0)
			goto out;
		len += (size_t)n;
	}
	pa->piece_at[pa->nsites] = at + len;
	n = reloc(pa, done, pa->plan.len, at + len, buf + len, cap - len);
	if (n < 0)
		goto out;
	len += (size_t)n;
	n = -ERANGE;
	if (len + 5 > cap || x86_encode_jmp(at + len, pa->addr + pa->plan.len, buf + len))
		goto out;
	len += 5;
	pa->tramp = at;
	a->used += (len + 15) & ~15UL;
	n = remote_write(rem, at, buf, len);
out:
	free(buf);
	return (int)n;
}

/* Is a thread stopped inside a displaced range? rip itself, or, for a
 * system call that will restart, the syscall instruction before it. */
static struct inj_patch *conflict(struct inj_image *img, const struct user_regs_struct *r)
{
	bool restart = (long long)r->orig_rax >= 0 &&
		       ((long long)r->rax == -512 || (long long)r->rax == -513 ||
			(long long)r->rax == -514 || (long long)r->rax == -516);

	for (size_t p = 0; p < img->npatches; p++) {
		uint64_t lo = img->patches[p].addr, hi = lo + img->patches[p].plan.len;

		if ((r->rip > lo && r->rip < hi) || (restart && r->rip - 2 > lo && r->rip - 2 < hi))
			return &img->patches[p];
	}
	return NULL;
}

/* Where a thread stopped at ip inside patch pa's displaced bytes goes on
 * in the trampoline, already written: the probe about to fire there, or its
 * instruction's relocated copy (the piece it is in relocated up to it must
 * be what starts the piece in the trampoline, read back). 0: nowhere. */
static uint64_t tramp_ip(const struct inj_patch *pa, struct remote *rem, uint64_t ip)
{
	uint32_t k = (uint32_t)(ip - pa->addr), s = 0;

	for (size_t i = 0; i <= pa->nsites; i++) {
		uint32_t e = i < pa->nsites ? pa->probe_off[i] : (uint32_t)pa->plan.len;
		uint8_t mine[X86_RELOC_MAX(32)], there[sizeof(mine)];
		const char *why = NULL;
		ssize_t n;

		if (i < pa->nsites && k == e)
			return pa->probe_at[i];
		if (k < s || k >= e) {
			s = e;
			continue;
		}
		n = x86_relocate(pa->orig + s, k - s, pa->addr + s, pa->piece_at[i], mine,
				 sizeof(mine), &why);
		if (n < 0 || (n && (remote_read(rem, pa->piece_at[i], there, (size_t)n) ||
				    memcmp(mine, there, (size_t)n))))
			return 0;
		return pa->piece_at[i] + (uint64_t)n;
	}
	return 0;
}

/* Move every thread out of the displaced ranges: on at its instruction's
 * copy in the trampoline (as a kernel uprobe runs an instruction out of
 * line), no single step: a tracer that dies in the middle of one leaves the
 * thread its trap. */
static int clear_threads(struct inj_image *img, struct remote *rem)
{
	for (size_t t = 0; t < rem->ntasks; t++) {
		struct user_regs_struct r;
		struct inj_patch *pa;
		uint64_t to;

		if (remote_get_regs(rem, t, &r))
			continue;	/* gone */
		pa = conflict(img, &r);
		if (!pa)
			continue;
		/* (a system call there to restart would restart in the copy:
		 * the kernel goes back 2 bytes from where it is) */
		to = (long long)r.orig_rax >= 0 ? 0 : tramp_ip(pa, rem, r.rip);
		if (!to) {
			log_error("thread %d of process %d is inside the code a probe would "
				  "replace (0x%llx); try again", (int)rem->tasks[t].tid,
				  (int)rem->pid, (unsigned long long)pa->addr);
			return -EAGAIN;
		}
		r.rip = to;
		if (remote_set_regs(rem, t, &r))
			continue;
		log_debug("inject: thread %d of process %d moved from 0x%llx, inside a patch, to "
			  "its copy at 0x%llx", (int)rem->tasks[t].tid, (int)rem->pid,
			  (unsigned long long)pa->addr, (unsigned long long)to);
	}
	return 0;
}

static void semaphores_raise(struct inj *j, struct inj_image *img, struct remote *rem,
			     const struct proc_map *maps, size_t nmaps)
{
	for (size_t i = 0; i < j->base.nsites; i++) {
		const struct usc_site *site = j->base.sites[i];
		uint64_t addr;
		uint16_t v;
		bool seen = false;

		if (!site->ref_ctr_offset)
			continue;
		if (procmaps_file_offset_to_addr(maps, nmaps, site->path, site->ref_ctr_offset, &addr))
			continue;
		for (size_t k = 0; k < img->nsemaphores; k++)
			seen |= img->semaphores[k] == addr;
		if (seen)
			continue;
		if (remote_read(rem, addr, &v, 2))
			continue;
		v++;
		if (remote_write(rem, addr, &v, 2))
			continue;
		img->semaphores[img->nsemaphores++] = addr;
		/* for the agent to lower, should we die */
		((uint64_t *)((char *)img->shm.map + img->shm.ctl->sem_off))[img->nsemaphores - 1] =
			addr;
		__atomic_store_n(&img->shm.ctl->nsem, (uint32_t)img->nsemaphores, __ATOMIC_RELEASE);
	}
}

static void semaphores_lower(struct inj_image *img, struct remote *rem)
{
	for (size_t i = 0; i < img->nsemaphores; i++) {
		uint16_t v;

		if (remote_read(rem, img->semaphores[i], &v, 2) == 0 && v) {
			v--;
			remote_write(rem, img->semaphores[i], &v, 2);
		}
	}
	img->nsemaphores = 0;
}

/* The bytes in memory must be the file's: a breakpoint or another tool's
 * patch there would be copied into the trampoline. Another kernel uprobe's
 * int3 there: the patch is left alone in this process (foreign.c). */
static int read_originals(struct inj *j, struct inj_image *img, struct remote *rem)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	int ret = 0;
	size_t out = 0;

	for (size_t p = 0; p < img->npatches && !ret; p++) {
		struct inj_patch *pa = &img->patches[p];
		uint8_t file[sizeof(pa->orig)], fspring[5];
		bool foreign = false;
		const struct usc_site *site = j->base.sites[pa->sites[0]];
		struct objfile *ef = NULL;

		cache_elf(s->cache, site->path, &ef);
		if (pa->plan.len > sizeof(pa->orig))
			ret = -E2BIG;
		else if ((ret = remote_read(rem, pa->addr, pa->orig, pa->plan.len)))
			log_error("cannot read process %d at 0x%llx: %s", (int)rem->pid,
				  (unsigned long long)pa->addr, strerror(-ret));
		else if (pa->spring && (ret = remote_read(rem, pa->spring, pa->orig_spring, 5)))
			log_error("cannot read process %d at 0x%llx: %s", (int)rem->pid,
				  (unsigned long long)pa->spring, strerror(-ret));
		else if (ef && ((objfile_read(ef, pa->plan.addr, file, pa->plan.len) == 0 &&
				 memcmp(file, pa->orig, pa->plan.len)) ||
				(pa->spring && objfile_read(ef, pa->plan.spring, fspring, 5) == 0 &&
				 memcmp(fspring, pa->orig_spring, 5)))) {
			foreign = inj_bytes_over(pa->orig, file, pa->plan.len) >= 0 &&
				  (!pa->spring || inj_bytes_over(pa->orig_spring, fspring, 5) >= 0);
			if (!foreign) {
				log_error("%s: the code of process %d at 0x%llx differs from %s (a "
					  "breakpoint or another tool's patch?)", site->label,
					  (int)rem->pid, (unsigned long long)pa->addr, site->path);
				ret = -EBUSY;
			}
		}
		if (foreign) {	/* another uprobe's int3s: left alone here */
			if (!pa->foreign)
				inj_foreign_said(j, pa, rem->pid);
			free(pa->sites);
			free(pa->probe_off);
			continue;
		}
		img->patches[out++] = *pa;
	}
	if (!ret)
		img->npatches = out;
	return ret;
}

/* The jumps' bytes, and the undo table (written before any jump: a tracer
 * that dies from now on leaves the agent what it needs to let go). */
static int plan_jumps(struct inj_image *img, const struct proc_map *maps, size_t nmaps)
{
	int ret = 0;

	for (size_t p = 0; p < img->npatches && !ret; p++) {
		struct inj_patch *pa = &img->patches[p];

		if (pa->spring) {
			/* a jmp rel8 to a jmp rel32 in dead filler */
			ret = x86_encode_jmp(pa->spring, pa->tramp, pa->written_spring);
			if (!ret)
				ret = x86_encode_jmp8(pa->addr, pa->spring, pa->written);
			pa->nwritten = 2;
		} else {
			/* (onto its pad: the bytes after the first instruction
			 * are the file's, pad.c) */
			ret = x86_encode_jmp(pa->addr, pa->npad ? pa->pad : pa->tramp, pa->written);
			pa->nwritten = 5;
		}
	}
	if (!ret)
		inj_undo_fill(img, maps, nmaps);
	return ret;
}

/* The trampolines are in place: now the jumps. */
static int write_jumps(struct inj_image *img, struct remote *rem)
{
	int ret = 0;

	for (size_t p = 0; p < img->npatches && !ret; p++) {
		struct inj_patch *pa = &img->patches[p];

		/* a springboard's slot first (dead filler: never run before the
		 * jmp rel8 that leads to it) */
		if (pa->spring)
			ret = remote_write(rem, pa->spring, pa->written_spring, 5);
		/* and a pad (new memory: never run before the jump) */
		if (!ret && pa->npad)
			ret = remote_write(rem, pa->pad, pa->pad_code, pa->npad);
		if (!ret)
			ret = remote_write(rem, pa->addr, pa->written, pa->nwritten);
		if (!ret)
			pa->applied = true;
	}
	return ret;
}

int inj_install(struct inj *j, struct inj_image *img, struct remote *rem)
{
	struct proc_map *maps = NULL;
	ssize_t nmaps = procmaps_read(rem->pid, &maps);
	int ret;

	if (nmaps < 0)
		return (int)nmaps;
	ret = inj_patches(j, img, maps, (size_t)nmaps);
	if (!ret)
		ret = inj_undo_dead(rem, maps, (size_t)nmaps);
	if (!ret)
		ret = read_originals(j, img, rem);
	if (!ret)
		ret = shm_create(j, img, rem);
	/* (before any jump: what it forks is found by what it maps) */
	if (!ret && img->shm.ctl->follow_forks)
		img->undo_memfd = inj_undo_tell_memfd(j, img);
	if (!ret)
		ret = inj_stk_install(j, img, rem);
	if (!ret) {
		key_mode(img, rem);
		cpu_mode(img, rem);
		fill_sites(j, img);
		inj_py_sites(j, img);
		/* again: the shared memory and the agent took some of the gaps */
		procmaps_free(maps, (size_t)nmaps);
		nmaps = procmaps_read(rem->pid, &maps);
		ret = nmaps < 0 ? (int)nmaps : inj_areas(j, img, rem, maps, (size_t)nmaps);
	}
	for (size_t p = 0; p < img->npatches && !ret; p++)
		ret = write_tramp(j, img, rem, &img->patches[p]);
	if (!ret)
		ret = inj_pads(j, img, rem);
	if (!ret)
		ret = clear_threads(img, rem);
	if (!ret)
		ret = plan_jumps(img, maps, nmaps > 0 ? (size_t)nmaps : 0);
	if (!ret)
		semaphores_raise(j, img, rem, maps, nmaps > 0 ? (size_t)nmaps : 0);
	if (!ret)
		ret = write_jumps(img, rem);
	if (nmaps > 0)
		procmaps_free(maps, (size_t)nmaps);
	if (ret) {
		inj_restore(j, img, rem);
		inj_image_retire(img);
		inj_undo_forget(j, &img->undo_memfd);
	}
	return ret;
}

bool inj_restore(struct inj *j, struct inj_image *img, struct remote *rem)
{
	bool same_image = true;

	(void)j;
	for (size_t p = 0; p < img->npatches; p++) {
		struct inj_patch *pa = &img->patches[p];
		uint8_t now[5], fix[5];
		int over;

		if (!pa->applied)
			continue;
		if (remote_read(rem, pa->addr, now, pa->nwritten)) {
			same_image = false;
			continue;
		}
		over = inj_bytes_over(now, pa->written, pa->nwritten);
		if (over < 0) {
			/* ours taken out around another uprobe's int3 (foreign.c),
			 * or another image's */
			if (inj_bytes_over(now, pa->orig, pa->nwritten) < 0)
				same_image = false;
			continue;
		}
		if (over) {	/* another uprobe's int3 on our jump: kept */
			for (size_t i = 0; i < pa->nwritten; i++)
				fix[i] = now[i] == 0xcc && pa->written[i] != 0xcc ? 0xcc : pa->orig[i];
			remote_write(rem, pa->addr, fix, pa->nwritten);
			if (pa->plan.len > pa->nwritten)
				remote_write(rem, pa->addr + pa->nwritten, pa->orig + pa->nwritten,
					     pa->plan.len - pa->nwritten);
		} else if (remote_write(rem, pa->addr, pa->orig, pa->plan.len)) {
			continue;
		}
		if (pa->spring)
			remote_write(rem, pa->spring, pa->orig_spring, 5);
	}
	if (same_image) {
		size_t n = img->nsemaphores;
		uint32_t done = INJ_LETGO_TRACER;

		inj_py_detach(img, rem);	/* py: probes' profile function out */
		semaphores_lower(img, rem);
		img->nsemaphores = n;	/* each process sharing the image has its own */
		/* its agent has nothing to let go of when we are gone */
		if (img->shm.self_remote)
			remote_write(rem, img->shm.self_remote + INJ_SELF_LETGO, &done, sizeof(done));
	} else {
		log_warn("process %d no longer runs the code that was patched (an exec?): left "
			 "as it is", (int)rem->pid);
	}
	return same_image;
}

void inj_image_retire(struct inj_image *img)
{
	for (size_t p = 0; p < img->npatches; p++)
		img->patches[p].applied = false;
	img->nsemaphores = 0;
}
