/* The inject engine: probes patched into the traced process itself.
 *
 * Attach (one stop of the whole process, whatever the number of probes):
 *   1. stop every thread with ptrace (remote.c);
 *   2. plan each site: the whole function is decoded and the 5-byte jump
 *      checked safe (x86/reloc.c); the bytes in memory must be the file's;
 *   3. with system calls run in the target: a memfd shared with us (the
 *      control block, per-thread slots, counters, site programs and rings),
 *      the agent's code, a MADV_WIPEONFORK word, and one trampoline area
 *      within +-2 GiB of each probed module;
 *   4. write the trampolines: relocated instructions, the probe (tramp.c),
 *      the rest, a jump back;
 *   5. move any thread whose instruction pointer lies inside a displaced
 *      range, then write the jumps, and let the process go.
 * ptrace is released while tracing: the process runs, forks, execs and
 * takes signals on its own. Detach stops it once more and writes back
 * every original byte; trampolines and the shared memory stay mapped, since
 * a thread may still be inside them. A SIGKILLed tracer leaves the patches
 * in place: the process runs on, its records dropped when its ring is full.
 *
 * Events: the agent (agent/agent.c) appends records to the hitting
 * thread's ring; poll drains every ring, merges by time and delivers
 * events exactly as the other engines do. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cpuid.h>
#include <x86intrin.h>

#include "core/log.h"
#include "elf/elf.h"
#include "elf/modules.h"
#include "engine/engine.h"
#include "engine/inject/inject_shared.h"
#include "engine/inject/remote.h"
#include "engine/inject/tramp.h"
#include "resolve/patchable.h"
#include "x86/insn.h"
#include "x86/reloc.h"

#define INJ_MAX_SITES 65536
#define INJ_NSLOTS 256		/* threads with a ring */
#define INJ_RING_SIZE (4u << 20)	/* per thread: 65k records of 2 integers */
#define INJ_CPU_BUCKETS 64
#define GLIBC_TID_OFF 0x2d0	/* offsetof(struct pthread, tid), glibc 2.3x x86-64 */

extern const unsigned char inject_agent_blob[], inject_agent_blob_end[];

struct agent_hdr {
	uint64_t magic;
	uint64_t hit_off;
};

/* One patch: a jump at addr over len displaced bytes, to a trampoline that
 * runs the probes of one or more sites (several probes at one address). */
struct inj_patch {
	uint64_t addr;		/* runtime */
	struct x86_patch plan;	/* link-time addresses */
	uint64_t bias;		/* runtime - link-time */
	uint8_t orig[32];
	uint64_t spring;	/* runtime: a springboard's jmp rel32 (dead filler), or 0 */
	uint8_t orig_spring[5];
	uint8_t written[5];	/* the jump written at addr, checked before restoring */
	uint8_t nwritten;
	size_t *sites;		/* by probe offset */
	uint32_t *probe_off;	/* per site: where in the displaced bytes it fires */
	size_t nsites;
	uint64_t tramp;
	bool applied;
	int area;
};

/* Trampolines near one module. */
struct inj_area {
	char *path;
	uint64_t lo, hi;	/* the module's mappings */
	uint64_t base, size, used;
};

struct inj_comm {
	pid_t tid;
	char comm[17];
};

struct inj {
	struct usc_engine base;
	pid_t pid;
	bool live;
	struct remote rem;
	/* shared memory, our mapping and the target's address */
	void *shm;
	size_t shm_size;
	uint64_t shm_remote;
	struct inj_ctl *ctl;
	uint64_t cpu_counts_off;
	uint32_t cpu_stride;
	uint64_t agent_remote, alive_remote;
	struct inj_patch *patches;
	size_t npatches;
	struct inj_area *areas;
	size_t nareas;
	uint64_t *semaphores;	/* runtime addresses of USDT semaphores we raised */
	size_t nsemaphores;
	struct usc_site_stats *stats;
	struct x86_patch *plans;	/* per site, from the file, made at open */
	/* time: tsc -> CLOCK_MONOTONIC, fitted between two samples */
	uint64_t tsc0, ns0;
	double ns_per_tick;
	struct inj_comm *comms;
	size_t ncomms;
	uint64_t *folded;	/* [nsites][2]: hits and losses of reclaimed slots */
	uint64_t next_reclaim;	/* ns */
	struct usc_value vals[INJ_MAX_ARGS];
};

static struct inj *inj_of(struct usc_engine *e)
{
	return container_of(e, struct inj, base);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void inj_calibrate(struct inj *j)
{
	uint64_t t = __rdtsc(), ns = mono_ns();

	if (ns > j->ns0 + 1000000 && t > j->tsc0)
		j->ns_per_tick = (double)(ns - j->ns0) / (double)(t - j->tsc0);
}

static uint64_t inj_time(const struct inj *j, uint64_t tsc)
{
	double d = ((double)(int64_t)(tsc - j->tsc0)) * j->ns_per_tick;

	return (uint64_t)((double)j->ns0 + d);
}

/* ---- planning ----------------------------------------------------------- */

struct elf_cache {
	struct elf_file **files;
	size_t n;
};

static struct elf_file *elf_cache_get(struct elf_cache *c, const char *path)
{
	struct elf_file *ef, **f;

	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->files[i]->path, path))
			return c->files[i];
	if (elf_open(path, &ef))
		return NULL;
	f = realloc(c->files, (c->n + 1) * sizeof(*f));
	if (!f) {
		elf_close(ef);
		return NULL;
	}
	c->files = f;
	c->files[c->n++] = ef;
	return ef;
}

static void elf_cache_free(struct elf_cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		elf_close(c->files[i]);
	free(c->files);
}

/* Plan a site's patch from the file. 0, or -ENOTSUP with the reason logged,
 * or, with why, written there instead. */
static int inj_plan_site(const struct usc_site *site, struct elf_cache *ec, struct x86_patch *p,
			 char *why_out, size_t why_len)
{
	struct elf_file *ef = elf_cache_get(ec, site->path);
	struct x86_region rg[PATCHABLE_MAX_REGIONS];
	const struct elf_sym *fn;
	const char *why = NULL;
	ssize_t n;
	char msg[8192];
	int ret;

	if (site->is_return && !site->ret_site) {
		snprintf(msg, sizeof(msg), "%s: the inject engine probes returns on their return "
			 "sites only; --uretprobe needs -e tracefs", site->spec->text);
		goto refuse;
	}
	if (!ef)
		return -ENOENT;
	fn = elf_func_at(ef, site->vaddr);
	n = fn && fn->size ? patchable_regions(ef, fn, rg) : -ENOENT;
	if (n == -ENOENT || n == -EINVAL) {
		snprintf(msg, sizeof(msg), "%s: cannot probe %s+0x%llx in process: no function "
			 "symbol around it to check the patch against; -e tracefs can probe it",
			 site->spec->text, site->path, (unsigned long long)site->offset);
		goto refuse;
	}
	if (n < 0)
		return (int)n;
	{
		struct x86_reader rd = patchable_reader(ef);

		if (site->ret_site)
			ret = x86_plan_return(rg, (size_t)n, &rd, site->vaddr, p, &why);
		else
			ret = x86_plan_probe(rg, (size_t)n, &rd, site->vaddr, p, &why);
	}
	patchable_regions_free(rg, (size_t)n);
	if (!ret)
		return 0;
	if (ret == -ENOMEM)
		return ret;
	snprintf(msg, sizeof(msg), "%s: cannot patch %s at 0x%llx: %s; -e tracefs can probe it",
		 site->label, site->symbol ? site->symbol : site->path,
		 (unsigned long long)site->vaddr, why ? why : strerror(-ret));
refuse:
	if (why_out)
		snprintf(why_out, why_len, "%s", msg);
	else
		log_error("%s", msg);
	return -ENOTSUP;
}

/* Can every site be patched, and every argument computed? The plans go to
 * plans[nsites] when it is given. */
static int inj_check_sites(const struct usc_session *s, struct x86_patch *plans, char *why,
			   size_t len)
{
	struct elf_cache ec = {0};
	int ret = 0;

	for (size_t i = 0; i < s->nsites && !ret; i++) {
		struct x86_patch p;

		ret = inj_plan_site(&s->sites[i], &ec, &p, why, len);
		if (!ret && plans)
			plans[i] = p;
		if (!ret && s->sites[i].nargs > INJ_MAX_ARGS) {
			if (why)
				snprintf(why, len, "%s: more than %d fetch arguments",
					 s->sites[i].spec->text, INJ_MAX_ARGS);
			else
				log_error("%s: the inject engine takes at most %d fetch arguments",
					  s->sites[i].spec->text, INJ_MAX_ARGS);
			ret = -E2BIG;
		}
	}
	elf_cache_free(&ec);
	return ret;
}

/* What about a running process rules the engine out: a seccomp filter
 * (the system calls run in it could kill it), a shadow stack (a relocated
 * call pushes its return address by hand), another PID namespace (the
 * agent's process_vm_readv and glibc's tids speak that namespace's pids).
 * 0, or -ENOTSUP with the reason. */
static int inj_proc_refusal(pid_t pid, char *why, size_t len)
{
	char path[64], line[512];
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;	/* gone: said elsewhere */
	while (!ret && fgets(line, sizeof(line), f)) {
		int mode;

		if (sscanf(line, "Seccomp: %d", &mode) == 1 && mode != 0) {
			snprintf(why, len, "process %d runs under seccomp, which could kill it for "
				 "the system calls the inject engine makes in it; -e tracefs can "
				 "trace it", (int)pid);
			ret = -ENOTSUP;
		} else if (!strncmp(line, "x86_Thread_features:", 20) && strstr(line, "shstk")) {
			snprintf(why, len, "process %d has a shadow stack, which the inject "
				 "engine's relocated calls would break; -e tracefs can trace it",
				 (int)pid);
			ret = -ENOTSUP;
		} else if (!strncmp(line, "NStgid:", 7) && strchr(line + 8, '\t')) {
			snprintf(why, len, "process %d is in another PID namespace, which the "
				 "inject engine does not handle yet; -e tracefs can trace it",
				 (int)pid);
			ret = -ENOTSUP;
		}
	}
	fclose(f);
	return ret;
}

int inject_can_place(const struct usc_session *s, char *why, size_t len)
{
	if (s->target.kind == USC_TARGET_SYSTEM) {
		snprintf(why, len, "no process to patch");
		return -ENOTSUP;
	}
	if (s->target.kind == USC_TARGET_PID && inj_proc_refusal(s->target.pid, why, len))
		return -ENOTSUP;
	return inj_check_sites(s, NULL, why, len);
}

/* ---- the target's memory ------------------------------------------------ */

static long rsys(struct inj *j, long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
	bool ok;
	long r = remote_syscall(&j->rem, &ok, nr, a1, a2, a3, a4, a5, a6);

	if (!ok)
		log_error("cannot run a system call in process %d: %s", (int)j->pid,
			  strerror((int)-r));
	return r;
}

static bool rsys_failed(long r)
{
	return r < 0 && r > -4096;
}

/* A free range of size bytes with every byte of [lo, hi) within rel32 reach
 * of every byte of it: the gaps between mappings, nearest first. */
static int inj_area_map(struct inj *j, struct inj_area *a, const struct proc_map *maps,
			size_t nmaps)
{
	const uint64_t reach = 0x7fff0000ULL, page = 4096;
	uint64_t tried[16];
	size_t ntried = 0;

	while (ntried < sizeof(tried) / sizeof(tried[0])) {
		uint64_t best = 0, best_dist = UINT64_MAX;

		for (size_t i = 0; i < nmaps; i++) {
			uint64_t gs = i ? maps[i - 1].end : 0x10000, ge = maps[i].start, cand, dist;
			bool seen = false;

			if (ge <= gs || ge - gs < a->size)
				continue;
			/* as close to the module as the gap allows */
			cand = ge <= a->lo ? (ge - a->size) & ~(page - 1) : gs;
			if (cand < gs || cand + a->size > ge)
				continue;
			if (cand + a->size > a->lo + reach || a->hi > cand + reach)
				continue;
			for (size_t k = 0; k < ntried; k++)
				seen |= tried[k] == cand;
			dist = cand < a->lo ? a->lo - cand : cand - a->lo;
			if (!seen && dist < best_dist) {
				best = cand;
				best_dist = dist;
			}
		}
		if (!best)
			break;
		tried[ntried++] = best;
		long r = rsys(j, SYS_mmap, (long)best, (long)a->size, PROT_READ | PROT_EXEC,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		log_debug("inject: trampolines for %s at 0x%llx: %ld", a->path,
			  (unsigned long long)best, r);
		if (!rsys_failed(r) && (uint64_t)r == best) {
			a->base = best;
			return 0;
		}
		if (!rsys_failed(r))	/* a kernel without MAP_FIXED_NOREPLACE (4.17) */
			rsys(j, SYS_munmap, r, (long)a->size, 0, 0, 0, 0);
	}
	log_error("no free address range within 2 GiB of %s in process %d for trampolines",
		  a->path, (int)j->pid);
	return -ENOMEM;
}

static int inj_areas(struct inj *j, const struct proc_map *maps, size_t nmaps)
{
	for (size_t p = 0; p < j->npatches; p++) {
		const struct usc_site *site = &j->base.session->sites[j->patches[p].sites[0]];
		size_t a;

		for (a = 0; a < j->nareas; a++)
			if (!strcmp(j->areas[a].path, site->path))
				break;
		if (a == j->nareas) {
			struct inj_area *na = realloc(j->areas, (j->nareas + 1) * sizeof(*na));

			if (!na)
				return -ENOMEM;
			j->areas = na;
			memset(&na[a], 0, sizeof(na[a]));
			na[a].path = site->path;
			na[a].lo = UINT64_MAX;
			for (size_t m = 0; m < nmaps; m++)
				if (maps[m].path && !strcmp(maps[m].path, site->path)) {
					if (maps[m].start < na[a].lo)
						na[a].lo = maps[m].start;
					if (maps[m].end > na[a].hi)
						na[a].hi = maps[m].end;
				}
			if (na[a].lo == UINT64_MAX)
				na[a].lo = na[a].hi = j->patches[p].addr;
			j->nareas++;
		}
		j->patches[p].area = (int)a;
		j->areas[a].size += TRAMP_MAX * (j->patches[p].nsites + 1);
	}
	for (size_t a = 0; a < j->nareas; a++) {
		int ret;

		j->areas[a].size = (j->areas[a].size + 4095) & ~4095ULL;
		ret = inj_area_map(j, &j->areas[a], maps, nmaps);
		if (ret)
			return ret;
	}
	return 0;
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

/* The memfd both sides map, and the agent's code. */
static int inj_shared(struct inj *j)
{
	struct usc_session *s = j->base.session;
	const char name[] = "uscope";
	uint64_t scratch, off = 0;
	size_t blob = (size_t)(inject_agent_blob_end - inject_agent_blob);
	const struct agent_hdr *hdr = (const void *)inject_agent_blob;
	char path[64];
	long fd, r;
	int lfd, ret;

	if (blob < sizeof(*hdr) || hdr->magic != INJ_MAGIC)
		return -ENOEXEC;
	/* layout */
	off = (sizeof(struct inj_ctl) + 63) & ~63ULL;
	uint64_t slots_off = off;
	off += INJ_NSLOTS * sizeof(struct inj_slot);
	uint64_t counts_off = off;
	off += (uint64_t)INJ_NSLOTS * s->nsites * 2 * sizeof(uint64_t);
	off = (off + 63) & ~63ULL;
	j->cpu_counts_off = off;
	j->cpu_stride = (uint32_t)((s->nsites * sizeof(uint64_t) + 63) & ~63ULL);
	off += (uint64_t)INJ_CPU_BUCKETS * j->cpu_stride;
	uint64_t sites_off = off;
	off += s->nsites * sizeof(struct inj_site);
	off = (off + 4095) & ~4095ULL;
	uint64_t rings_off = off;
	off += (uint64_t)INJ_NSLOTS * INJ_RING_SIZE;
	j->shm_size = off;

	/* a word that reads 1 here and 0 in a forked child; first, the memfd's
	 * name goes there (no other memory of the process is ours to write) */
	r = rsys(j, SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rsys_failed(r))
		return (int)r;
	j->alive_remote = (uint64_t)r;
	scratch = j->alive_remote + 64;
	ret = remote_write(&j->rem, scratch, name, sizeof(name));
	if (ret)
		return ret;
	fd = rsys(j, SYS_memfd_create, (long)scratch, MFD_CLOEXEC, 0, 0, 0, 0);
	if (rsys_failed(fd))
		return (int)fd;
	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", (int)j->pid, fd);
	lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd < 0 || ftruncate(lfd, (off_t)j->shm_size)) {
		ret = -errno;
		log_error("cannot share memory with process %d: %s", (int)j->pid, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		rsys(j, SYS_close, fd, 0, 0, 0, 0, 0);
		return ret;
	}
	j->shm = mmap(NULL, j->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	close(lfd);
	r = rsys(j, SYS_mmap, 0, (long)j->shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rsys(j, SYS_close, fd, 0, 0, 0, 0, 0);
	if (j->shm == MAP_FAILED || rsys_failed(r)) {
		if (j->shm == MAP_FAILED)
			j->shm = NULL;
		log_error("cannot map shared memory into process %d", (int)j->pid);
		return -ENOMEM;
	}
	j->shm_remote = (uint64_t)r;

	/* the agent */
	r = rsys(j, SYS_mmap, 0, (long)((blob + 4095) & ~4095UL), PROT_READ | PROT_EXEC,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rsys_failed(r))
		return (int)r;
	j->agent_remote = (uint64_t)r;
	ret = remote_write(&j->rem, j->agent_remote, inject_agent_blob, blob);
	if (ret)
		return ret;
	if (rsys(j, SYS_madvise, (long)j->alive_remote, 4096, MADV_WIPEONFORK, 0, 0, 0))
		log_warn("process %d: no MADV_WIPEONFORK (kernel 4.14): its forked children "
			 "would record into its rings", (int)j->pid);
	{
		uint32_t one = 1;

		ret = remote_write(&j->rem, j->alive_remote, &one, sizeof(one));
		if (ret)
			return ret;
	}

	struct inj_ctl *c = j->shm;

	j->ctl = c;
	c->nslots = INJ_NSLOTS;
	c->nsites = (uint32_t)s->nsites;
	c->ring_size = INJ_RING_SIZE;
	c->tgid = (uint32_t)j->pid;
	c->alive = j->alive_remote;
	c->slots_off = slots_off;
	c->counts_off = counts_off;
	c->sites_off = sites_off;
	c->rings_off = rings_off;
	c->use_rdfsbase = (getauxval(AT_HWCAP2) & 2) != 0;	/* HWCAP2_FSGSBASE */
	c->use_rdpid = have_rdpid();
	c->enabled = 1;
	return 0;
}

/* How a thread knows its tid without a system call: glibc keeps it at a
 * fixed offset from the thread pointer. Checked on every thread; otherwise
 * the fs base is the key and the tid asked once. */
static void inj_key_mode(struct inj *j)
{
	struct inj_ctl *c = j->ctl;
	bool all = j->rem.ntasks > 0;

	for (size_t t = 0; t < j->rem.ntasks && all; t++) {
		struct user_regs_struct regs;
		uint32_t tid = 0;

		all = remote_get_regs(&j->rem, t, &regs) == 0 && regs.fs_base &&
		      remote_read(&j->rem, regs.fs_base + GLIBC_TID_OFF, &tid, 4) == 0 &&
		      tid == (uint32_t)j->rem.tasks[t].tid;
	}
	c->key_mode = all ? INJ_KEY_TID_AT_FS : INJ_KEY_FSBASE;
	c->tid_off = all ? GLIBC_TID_OFF : 0;
	log_debug("inject: threads keyed by %s", all ? "glibc's tid" : "fs base");
}

static void inj_fill_sites(struct inj *j)
{
	struct usc_session *s = j->base.session;
	struct inj_site *is = (struct inj_site *)((char *)j->shm + j->ctl->sites_off);

	for (size_t p = 0; p < j->npatches; p++) {
		const struct inj_patch *pa = &j->patches[p];

		for (size_t k = 0; k < pa->nsites; k++) {
			size_t i = pa->sites[k];
			const struct usc_site *site = &s->sites[i];
			struct inj_site *d = &is[i];

			d->ctl = j->shm_remote;
			d->ip = site->vaddr + pa->bias;
			d->offset = site->offset;
			d->vaddr = site->vaddr;
			d->index = (uint32_t)i;
			d->nargs = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;
			d->ret_site = site->ret_site;
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
					    fa->insn[k2].op == FOP_COMM)
						d->nstr++;
			}
		}
	}
}


/* Relocate code[from_off..to_off) of the patch to run at `at`. */
static ssize_t inj_reloc(const struct inj_patch *pa, uint32_t from_off, uint32_t to_off,
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

static int inj_write_tramp(struct inj *j, struct inj_patch *pa)
{
	struct usc_session *s = j->base.session;
	struct inj_area *a = &j->areas[pa->area];
	uint8_t *buf;
	uint64_t at = a->base + a->used;
	size_t len = 0, cap = TRAMP_MAX * (pa->nsites + 1);
	bool rdpid = have_rdpid();
	ssize_t n;

	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	/* relocated pieces between the probes, in address order: an entry and
	 * a return site of a short function can share one patch */
	uint32_t done = 0;

	for (size_t k = 0; k < pa->nsites; k++) {
		size_t i = pa->sites[k];
		struct tramp_spec ts = {
			.at = at,
			/* flags are dead at a function's entry and at its returns
			 * (the planner moves an entry patch past endbr64 itself) */
			.save_flags = !(s->sites[i].ret_site ||
					(s->sites[i].func_vaddr &&
					 s->sites[i].vaddr == s->sites[i].func_vaddr)),
			.have_rdpid = rdpid,
		};

		n = inj_reloc(pa, done, pa->probe_off[k], at + len, buf + len, cap - len);
		if (n < 0)
			goto out;
		len += (size_t)n;
		done = pa->probe_off[k];
		ts.probe_at = at + len;
		if (s->count_only) {
			ts.counter = j->shm_remote + j->cpu_counts_off + i * sizeof(uint64_t);
			ts.stride = j->cpu_stride;
		} else {
			ts.hit = j->agent_remote + ((const struct agent_hdr *)inject_agent_blob)->hit_off;
			ts.site = j->shm_remote + j->ctl->sites_off + i * sizeof(struct inj_site);
		}
		n = tramp_encode_probe(&ts, buf + len, cap - len);
		if (n < 0) {
			log_error("cannot encode the trampoline of %s", s->sites[i].label);
			goto out;
		}
		len += (size_t)n;
	}
	n = inj_reloc(pa, done, pa->plan.len, at + len, buf + len, cap - len);
	if (n < 0)
		goto out;
	len += (size_t)n;
	n = -ERANGE;
	if (len + 5 > cap || x86_encode_jmp(at + len, pa->addr + pa->plan.len, buf + len))
		goto out;
	len += 5;
	pa->tramp = at;
	a->used += (len + 15) & ~15UL;
	n = remote_write(&j->rem, at, buf, len);
out:
	free(buf);
	return (int)n;
}

/* Is a thread stopped inside a displaced range? rip itself, or, for a
 * system call that will restart, the syscall instruction before it. */
static struct inj_patch *inj_conflict(struct inj *j, const struct user_regs_struct *r)
{
	bool restart = (long long)r->orig_rax >= 0 &&
		       ((long long)r->rax == -512 || (long long)r->rax == -513 ||
			(long long)r->rax == -514 || (long long)r->rax == -516);

	for (size_t p = 0; p < j->npatches; p++) {
		uint64_t lo = j->patches[p].addr, hi = lo + j->patches[p].plan.len;

		if ((r->rip > lo && r->rip < hi) || (restart && r->rip - 2 > lo && r->rip - 2 < hi))
			return &j->patches[p];
	}
	return NULL;
}

/* Move every thread out of the displaced ranges by single steps. */
static int inj_clear_threads(struct inj *j)
{
	for (size_t t = 0; t < j->rem.ntasks; t++) {
		for (int step = 0;; step++) {
			struct user_regs_struct r;
			struct inj_patch *pa;

			if (remote_get_regs(&j->rem, t, &r))
				break;	/* gone */
			pa = inj_conflict(j, &r);
			if (!pa)
				break;
			uint8_t insn[2] = {0};

			remote_read(&j->rem, r.rip, insn, 2);
			/* stepping over a system call could block with every
			 * thread held */
			if (step >= 64 || (long long)r.orig_rax >= 0 ||
			    (insn[0] == 0x0f && insn[1] == 0x05)) {
				log_error("thread %d of process %d is inside the code a probe would "
					  "replace (0x%llx); try again", (int)j->rem.tasks[t].tid,
					  (int)j->pid, (unsigned long long)pa->addr);
				return -EAGAIN;
			}
			if (remote_step(&j->rem, t))
				break;
		}
	}
	return 0;
}

static int inj_semaphores(struct inj *j, const struct proc_map *maps, size_t nmaps, int delta)
{
	struct usc_session *s = j->base.session;

	if (delta < 0) {
		for (size_t i = 0; i < j->nsemaphores; i++) {
			uint16_t v;

			if (remote_read(&j->rem, j->semaphores[i], &v, 2) == 0 && v) {
				v--;
				remote_write(&j->rem, j->semaphores[i], &v, 2);
			}
		}
		j->nsemaphores = 0;
		return 0;
	}
	for (size_t i = 0; i < s->nsites; i++) {
		uint64_t addr;
		uint16_t v;
		bool seen = false;

		if (!s->sites[i].ref_ctr_offset)
			continue;
		if (procmaps_file_offset_to_addr(maps, nmaps, s->sites[i].path,
						 s->sites[i].ref_ctr_offset, &addr))
			continue;
		for (size_t k = 0; k < j->nsemaphores; k++)
			seen |= j->semaphores[k] == addr;
		if (seen)
			continue;
		if (remote_read(&j->rem, addr, &v, 2))
			continue;
		v++;
		if (remote_write(&j->rem, addr, &v, 2))
			continue;
		j->semaphores[j->nsemaphores++] = addr;
	}
	return 0;
}

static int cmp_patch(const void *a, const void *b)
{
	const struct inj_patch *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Sites -> patches, at their runtime addresses; sites at one address share
 * one patch; overlapping patches are refused. */
static int inj_patches(struct inj *j, const struct proc_map *maps, size_t nmaps)
{
	struct usc_session *s = j->base.session;
	int ret = 0;

	j->patches = calloc(s->nsites + 1, sizeof(*j->patches));
	if (!j->patches)
		return -ENOMEM;
	for (size_t i = 0; i < s->nsites && !ret; i++) {
		const struct usc_site *site = &s->sites[i];
		struct x86_patch plan;
		uint64_t rt, bias;
		size_t p;

		plan = j->plans[i];
		if (procmaps_file_offset_to_addr(maps, nmaps, site->path, site->offset, &rt)) {
			log_error("%s: %s is not mapped in process %d", site->label, site->path,
				  (int)j->pid);
			ret = -ENOENT;
			break;
		}
		bias = rt - site->vaddr;
		for (p = 0; p < j->npatches; p++)
			if (j->patches[p].addr == plan.addr + bias &&
			    j->patches[p].plan.len == plan.len &&
			    j->patches[p].plan.spring == plan.spring)
				break;
		if (p == j->npatches) {
			struct inj_patch *pa = &j->patches[j->npatches++];

			pa->addr = plan.addr + bias;
			pa->plan = plan;
			pa->bias = bias;
			pa->spring = plan.spring ? plan.spring + bias : 0;
		}
		struct inj_patch *pa = &j->patches[p];
		size_t *ns = realloc(pa->sites, (pa->nsites + 1) * sizeof(*ns)), k;
		uint32_t *no = realloc(pa->probe_off, (pa->nsites + 1) * sizeof(*no));

		if (ns)
			pa->sites = ns;
		if (no)
			pa->probe_off = no;
		if (!ns || !no) {
			ret = -ENOMEM;
			break;
		}
		/* keep them ordered by where they fire (stable for equal offsets) */
		for (k = pa->nsites; k > 0 && pa->probe_off[k - 1] > plan.probe_off; k--) {
			pa->sites[k] = pa->sites[k - 1];
			pa->probe_off[k] = pa->probe_off[k - 1];
		}
		pa->sites[k] = i;
		pa->probe_off[k] = plan.probe_off;
		pa->nsites++;
	}
	if (ret)
		return ret;
	qsort(j->patches, j->npatches, sizeof(*j->patches), cmp_patch);
	/* Overlapping patches become one over their union: an entry probe and a
	 * return site of a short function, say. Each was checked safe (no branch
	 * into its interior); overlapping, their interiors cover the union's. */
	size_t out = 0;

	for (size_t p = 0; p < j->npatches; p++) {
		struct inj_patch *a = out ? &j->patches[out - 1] : NULL, *b = &j->patches[p];

		if (!a || a->addr + a->plan.len <= b->addr ||
		    (a->bias != b->bias && !a->plan.spring && !b->plan.spring)) {
			j->patches[out++] = *b;
			continue;
		}
		uint64_t end = b->addr + b->plan.len > a->addr + a->plan.len ?
				       b->addr + b->plan.len : a->addr + a->plan.len;
		size_t n = a->nsites + b->nsites, k = 0, x = 0, y = 0;
		size_t *ns = malloc(n * sizeof(*ns));
		uint32_t *no = malloc(n * sizeof(*no)), shift = (uint32_t)(b->addr - a->addr);

		if (!ns || !no || end - a->addr > sizeof(a->orig) || a->plan.spring ||
		    b->plan.spring || a->bias != b->bias) {
			free(ns);
			free(no);
			log_error("%s and %s: their patches overlap (0x%llx and 0x%llx); probe one "
				  "of them with -e tracefs", s->sites[a->sites[0]].label,
				  s->sites[b->sites[0]].label, (unsigned long long)a->addr,
				  (unsigned long long)b->addr);
			free(b->sites);
			free(b->probe_off);
			for (size_t q = p + 1; q < j->npatches; q++) {
				free(j->patches[q].sites);
				free(j->patches[q].probe_off);
			}
			j->npatches = out;
			return -ENOTSUP;
		}
		while (x < a->nsites || y < b->nsites) {	/* merge by offset */
			if (y == b->nsites ||
			    (x < a->nsites && a->probe_off[x] <= b->probe_off[y] + shift)) {
				ns[k] = a->sites[x];
				no[k++] = a->probe_off[x++];
			} else {
				ns[k] = b->sites[y];
				no[k++] = b->probe_off[y++] + shift;
			}
		}
		free(a->sites);
		free(a->probe_off);
		free(b->sites);
		free(b->probe_off);
		a->sites = ns;
		a->probe_off = no;
		a->nsites = n;
		a->plan.len = (uint32_t)(end - a->addr);
	}
	j->npatches = out;
	return 0;
}

/* With every thread stopped: everything. */
static int inj_install(struct inj *j)
{
	struct proc_map *maps = NULL;
	ssize_t nmaps = procmaps_read(j->pid, &maps);
	int ret;

	if (nmaps < 0)
		return (int)nmaps;
	struct elf_cache ec = {0};

	ret = inj_patches(j, maps, (size_t)nmaps);
	for (size_t p = 0; p < j->npatches && !ret; p++) {
		struct inj_patch *pa = &j->patches[p];
		uint8_t file[sizeof(pa->orig)];
		const struct usc_site *site = &j->base.session->sites[pa->sites[0]];
		struct elf_file *ef = elf_cache_get(&ec, site->path);

		if (pa->plan.len > sizeof(pa->orig))
			ret = -E2BIG;
		else if ((ret = remote_read(&j->rem, pa->addr, pa->orig, pa->plan.len)))
			log_error("cannot read process %d at 0x%llx: %s", (int)j->pid,
				  (unsigned long long)pa->addr, strerror(-ret));
		else if (pa->spring &&
			 (ret = remote_read(&j->rem, pa->spring, pa->orig_spring, 5)))
			log_error("cannot read process %d at 0x%llx: %s", (int)j->pid,
				  (unsigned long long)pa->spring, strerror(-ret));
		else if (ef && ((elf_read(ef, pa->plan.addr, file, pa->plan.len) == 0 &&
				 memcmp(file, pa->orig, pa->plan.len)) ||
				(pa->spring && elf_read(ef, pa->plan.spring, file, 5) == 0 &&
				 memcmp(file, pa->orig_spring, 5)))) {
			log_error("%s: the code of process %d at 0x%llx differs from %s (a "
				  "breakpoint or another tool's patch?)", site->label, (int)j->pid,
				  (unsigned long long)pa->addr, site->path);
			ret = -EBUSY;
		}
	}
	elf_cache_free(&ec);
	if (!ret)
		ret = inj_shared(j);
	if (!ret) {
		inj_key_mode(j);
		inj_fill_sites(j);
		/* again: the shared memory and the agent took some of the gaps */
		procmaps_free(maps, (size_t)nmaps);
		nmaps = procmaps_read(j->pid, &maps);
		ret = nmaps < 0 ? (int)nmaps : inj_areas(j, maps, (size_t)nmaps);
	}
	for (size_t p = 0; p < j->npatches && !ret; p++)
		ret = inj_write_tramp(j, &j->patches[p]);
	if (!ret)
		ret = inj_clear_threads(j);
	if (!ret) {
		j->semaphores = calloc(j->base.session->nsites + 1, sizeof(*j->semaphores));
		if (!j->semaphores)
			ret = -ENOMEM;
		else
			inj_semaphores(j, maps, (size_t)nmaps, +1);
	}
	/* the trampolines are in place: now the jumps */
	for (size_t p = 0; p < j->npatches && !ret; p++) {
		struct inj_patch *pa = &j->patches[p];
		uint8_t jmp[5];

		if (pa->spring) {
			/* the slot first (dead filler: never run before the jmp rel8
			 * that leads to it), then the jmp rel8 */
			uint8_t j8[2];

			ret = x86_encode_jmp(pa->spring, pa->tramp, jmp);
			if (!ret)
				ret = x86_encode_jmp8(pa->addr, pa->spring, j8);
			if (!ret)
				ret = remote_write(&j->rem, pa->spring, jmp, sizeof(jmp));
			if (!ret)
				ret = remote_write(&j->rem, pa->addr, j8, sizeof(j8));
			memcpy(pa->written, j8, sizeof(j8));
			pa->nwritten = sizeof(j8);
		} else {
			ret = x86_encode_jmp(pa->addr, pa->tramp, jmp);
			if (!ret)
				ret = remote_write(&j->rem, pa->addr, jmp, sizeof(jmp));
			memcpy(pa->written, jmp, sizeof(jmp));
			pa->nwritten = sizeof(jmp);
		}
		if (!ret)
			pa->applied = true;
	}
	if (nmaps > 0)
		procmaps_free(maps, (size_t)nmaps);
	return ret;
}

/* Write back every original byte (the process is stopped), where our jump
 * still is: after an exec, or the pid's reuse, the addresses belong to
 * another image, which is left alone (its semaphores too). */
static void inj_restore(struct inj *j)
{
	bool same_image = true;

	for (size_t p = 0; p < j->npatches; p++) {
		struct inj_patch *pa = &j->patches[p];
		uint8_t now[5];

		if (!pa->applied)
			continue;
		if (remote_read(&j->rem, pa->addr, now, pa->nwritten) ||
		    memcmp(now, pa->written, pa->nwritten)) {
			same_image = false;
			pa->applied = false;
			continue;
		}
		if (remote_write(&j->rem, pa->addr, pa->orig, pa->plan.len) == 0 &&
		    (!pa->spring || remote_write(&j->rem, pa->spring, pa->orig_spring, 5) == 0))
			pa->applied = false;
	}
	if (same_image)
		inj_semaphores(j, NULL, 0, -1);
	else
		log_warn("process %d no longer runs the code that was patched (an exec?): left "
			 "as it is", (int)j->pid);
	j->nsemaphores = 0;
}

/* ---- ops ----------------------------------------------------------------- */

static int inj_open(struct usc_session *s, struct usc_engine **out)
{
	struct inj *j;
	int ret;

	if (s->target.kind == USC_TARGET_SYSTEM) {
		log_error("the inject engine traces one process: give -p PID or a COMMAND "
			  "(system-wide tracing needs -e tracefs)");
		return -ENOTSUP;
	}
	if (s->nsites > INJ_MAX_SITES) {
		log_error("the inject engine takes at most %d sites (%zu asked)", INJ_MAX_SITES,
			  s->nsites);
		return -E2BIG;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->base.ops = &inject_engine_ops;
	j->base.session = s;
	j->rem.mem_fd = -1;
	j->stats = calloc(s->nsites + 1, sizeof(*j->stats));
	j->folded = calloc(2 * s->nsites + 2, sizeof(*j->folded));
	j->plans = calloc(s->nsites + 1, sizeof(*j->plans));
	/* every site must be patchable: say which is not, before touching the
	 * process (and not plan again while it is stopped) */
	ret = !j->stats || !j->folded || !j->plans ? -ENOMEM : inj_check_sites(s, j->plans, NULL, 0);
	if (ret) {
		free(j->stats);
		free(j->folded);
		free(j->plans);
		free(j);
		return ret;
	}
	j->tsc0 = __rdtsc();
	j->ns0 = mono_ns();
	j->ns_per_tick = 1.0;
	*out = &j->base;
	return 0;
}

static int inj_attach(struct usc_engine *e)
{
	(void)e;	/* the process is stopped and patched in start */
	return 0;
}

static const char *inj_comm(struct inj *j, pid_t tid);

/* Install with every thread stopped (since t0, ns), then let them go. */
static int inj_go(struct inj *j, uint64_t t0)
{
	int ret = inj_install(j);

	if (ret)
		inj_restore(j);
	else
		j->live = true;
	inj_calibrate(j);
	for (size_t t = 0; t < j->rem.ntasks && !ret; t++)
		inj_comm(j, j->rem.tasks[t].tid);	/* the names before any exec */
	remote_release(&j->rem);
	if (!ret)
		log_info("inject: %zu probe%s patched in process %d, stopped for %.2f ms",
			 j->base.session->nsites, j->base.session->nsites == 1 ? "" : "s",
			 (int)j->pid, (double)(mono_ns() - t0) / 1e6);
	return ret;
}

static int inj_start(struct usc_engine *e, pid_t pid, int follow_children)
{
	struct inj *j = inj_of(e);
	int ret;

	j->pid = pid;
	if (e->session->target.kind == USC_TARGET_COMMAND)
		return 0;	/* at its entry point: inj_launched */
	(void)follow_children;
	uint64_t t0 = mono_ns();
	char why[256];

	if (inj_proc_refusal(pid, why, sizeof(why))) {
		log_error("%s", why);
		return -ENOTSUP;
	}
	ret = remote_stop_all(&j->rem, pid);
	if (ret == -ESRCH)
		log_error("process %d has gone", (int)pid);
	if (ret)
		return ret;
	return inj_go(j, t0);
}

static int auxv_entry(pid_t pid, uint64_t *entry)
{
	char path[64];
	uint64_t kv[2];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (read(fd, kv, sizeof(kv)) == (ssize_t)sizeof(kv) && kv[0] != AT_NULL)
		if (kv[0] == AT_ENTRY) {
			*entry = kv[1];
			close(fd);
			return 0;
		}
	close(fd);
	return -ENOENT;
}

/* COMMAND, stopped by PTRACE_TRACEME at its exec: run it to its entry
 * point, where the dynamic linker has loaded every library and main has not
 * run, then patch. */
/* Run the tracee (our TRACEME child) until it stops with SIGTRAP, passing
 * any other signal on; a group-stop (no siginfo) is resumed without one.
 * When at is non-zero, only a trap with the instruction pointer at `at`
 * counts. 0, or -ESRCH if it died. */
static int inj_run_to_trap(pid_t pid, uint64_t at, bool resume)
{
	int st, sig = 0;

	for (;;) {
		if (resume && ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig) < 0)
			return -ESRCH;
		resume = true;
		if (waitpid(pid, &st, __WALL) != pid || !WIFSTOPPED(st))
			return -ESRCH;
		sig = WSTOPSIG(st);
		if (sig == SIGTRAP) {
			struct user_regs_struct r;

			if (!at || (ptrace(PTRACE_GETREGS, pid, 0, &r) == 0 && r.rip == at))
				return 0;
			sig = 0;	/* not ours: a trap we caused (exec), dropped */
			continue;
		}
		siginfo_t si;

		if (ptrace(PTRACE_GETSIGINFO, pid, 0, &si) < 0)
			sig = 0;	/* a group-stop, not a signal to deliver */
	}
}

/* COMMAND, stopped by PTRACE_TRACEME at its exec: run it to its entry
 * point, where the dynamic linker has loaded every library and main has not
 * run, then patch. Signals meanwhile are delivered as they come. */
static int inj_launched(struct usc_engine *e, pid_t pid)
{
	struct inj *j = inj_of(e);
	struct user_regs_struct regs;
	uint64_t entry = 0;
	uint8_t orig, trap = 0xcc;
	int ret;

	j->pid = pid;
	/* the exec's SIGTRAP (a signal caught before the exec is passed on) */
	ret = inj_run_to_trap(pid, 0, false);
	if (!ret)
		ret = remote_adopt(&j->rem, pid);
	if (ret)
		return ret;
	ret = auxv_entry(pid, &entry);
	if (!ret)
		ret = remote_read(&j->rem, entry, &orig, 1);
	if (!ret)
		ret = remote_write(&j->rem, entry, &trap, 1);
	if (!ret)
		ret = inj_run_to_trap(pid, entry + 1, true);
	if (ret) {
		remote_release(&j->rem);
		return ret;
	}
	ret = remote_write(&j->rem, entry, &orig, 1);
	if (!ret)
		ret = remote_get_regs(&j->rem, 0, &regs);
	if (!ret) {
		regs.rip = entry;
		ret = remote_set_regs(&j->rem, 0, &regs);
	}
	if (ret) {
		remote_release(&j->rem);
		return ret;
	}
	return inj_go(j, mono_ns());
}

static uint64_t *inj_counts(struct inj *j)
{
	return (uint64_t *)((char *)j->shm + j->ctl->counts_off);
}

static struct inj_slot *inj_slots(struct inj *j)
{
	return (struct inj_slot *)((char *)j->shm + j->ctl->slots_off);
}

static const char *inj_comm(struct inj *j, pid_t tid)
{
	char path[64];
	struct inj_comm *c;
	FILE *f;

	for (size_t i = 0; i < j->ncomms; i++)
		if (j->comms[i].tid == tid)
			return j->comms[i].comm;
	c = realloc(j->comms, (j->ncomms + 1) * sizeof(*c));
	if (!c)
		return "";
	j->comms = c;
	c = &c[j->ncomms++];
	c->tid = tid;
	c->comm[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)j->pid, (int)tid);
	f = fopen(path, "re");
	if (!f) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)j->pid);
		f = fopen(path, "re");
	}
	if (f) {
		if (fgets(c->comm, sizeof(c->comm), f))
			c->comm[strcspn(c->comm, "\n")] = 0;
		fclose(f);
	}
	return c->comm;
}

struct pending {
	uint64_t tsc;
	const struct inj_rec *rec;
	uint32_t slot;
};

static int cmp_pending(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static int inj_deliver(struct inj *j, const struct pending *pd, usc_event_fn fn, void *ctx)
{
	struct usc_session *s = j->base.session;
	const struct inj_rec *r = pd->rec;
	const struct inj_slot *sl = &inj_slots(j)[pd->slot];
	const struct inj_site *is;
	const struct usc_site *site;
	struct usc_event ev;

	if (r->site >= s->nsites)
		return 0;
	site = &s->sites[r->site];
	is = (const struct inj_site *)((char *)j->shm + j->ctl->sites_off) + r->site;
	memset(&ev, 0, sizeof(ev));
	ev.time_ns = inj_time(j, r->tsc);
	ev.pid = j->pid;
	ev.tid = (int32_t)(sl->tid ? sl->tid : (uint32_t)sl->key);
	ev.cpu = (int32_t)r->cpu;
	ev.comm = inj_comm(j, ev.tid);
	ev.site = site;
	ev.ip = is->ip;
	if (site->ret_site) {
		ev.func = is->ip - (site->vaddr - site->func_vaddr);
		ev.ip = r->retaddr;
	}
	for (unsigned a = 0; a < r->nvals && a < INJ_MAX_ARGS; a++) {
		const struct inj_val *v = &r->vals[a];
		struct usc_value *o = &j->vals[a];

		memset(o, 0, sizeof(*o));
		if (v->kind == INJ_STR && (uint32_t)v->str_off + v->str_len < r->len) {
			o->kind = USC_V_STR;
			o->str = (const char *)r + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == INJ_INT) {
			o->kind = USC_V_INT;
			o->u = v->val;
		} else {
			o->kind = USC_V_FAULT;
		}
	}
	ev.nvals = site->nargs;
	ev.vals = j->vals;
	j->stats[r->site].events++;
	return fn(&ev, ctx);
}

/* Give the slots of threads that have exited back, so a process that
 * starts threads all the time does not run out of them: their counts are
 * kept here. Only where a slot's key is the tid (a new thread of the same
 * fs base would find a slot keyed by it at once). */
static void inj_reclaim(struct inj *j)
{
	struct usc_session *s = j->base.session;
	struct inj_slot *slots = inj_slots(j);
	uint64_t *c = inj_counts(j);
	char path[64];

	if (j->ctl->key_mode != INJ_KEY_TID_AT_FS)
		return;
	for (uint32_t k = 0; k < INJ_NSLOTS; k++) {
		struct inj_slot *sl = &slots[k];
		uint64_t key = sl->key;

		if (!key || sl->head != sl->tail)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%llu", (int)j->pid,
			 (unsigned long long)key);
		if (access(path, F_OK) == 0 || errno != ENOENT)
			continue;
		/* take it out of the table first (a new thread of the same tid would
		 * claim another slot), then check nothing is inside it */
		if (!__atomic_compare_exchange_n(&sl->key, &key, INJ_KEY_TOMB, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			continue;
		if (sl->nest || sl->head != sl->tail) {
			__atomic_store_n(&sl->key, key, __ATOMIC_RELEASE);
			continue;
		}
		for (size_t i = 0; i < s->nsites; i++) {
			uint64_t *cc = &c[2 * ((uint64_t)k * s->nsites + i)];

			j->folded[2 * i] += cc[0];
			j->folded[2 * i + 1] += cc[1];
			cc[0] = cc[1] = 0;
		}
		sl->head = sl->tail = 0;
		sl->tid = 0;
		sl->nest = 0;
		__atomic_store_n(&sl->key, 0, __ATOMIC_RELEASE);
	}
}

static int inj_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct inj *j = inj_of(e);
	struct inj_slot *slots;
	struct pending *pd = NULL;
	size_t npd = 0, cap = 0;
	uint64_t heads[INJ_NSLOTS];
	int delivered = 0, stop = 0;

	if (!j->shm)
		return 0;
	inj_calibrate(j);
	slots = inj_slots(j);
	for (uint32_t sidx = 0; sidx < INJ_NSLOTS; sidx++) {
		struct inj_slot *sl = &slots[sidx];
		const char *ring = (const char *)j->shm + j->ctl->rings_off +
				   (uint64_t)sidx * INJ_RING_SIZE;
		uint64_t pos, head;

		heads[sidx] = 0;
		if (!sl->key)
			continue;
		head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
		heads[sidx] = head;
		for (pos = sl->tail; pos != head;) {
			uint64_t at = pos & (INJ_RING_SIZE - 1), left = head - pos;
			const struct inj_rec *r = (const void *)(ring + at);
			uint32_t len = r->len;

			/* the ring is the target's memory: trust nothing in it */
			if (len & INJ_REC_PAD) {
				len &= ~INJ_REC_PAD;
				if (!len || at + len != INJ_RING_SIZE || len > left)
					break;
				pos += len;
				continue;
			}
			if (len < sizeof(*r) || len > left || at + len > INJ_RING_SIZE || (len & 7) ||
			    r->nvals > INJ_MAX_ARGS ||
			    sizeof(*r) + r->nvals * sizeof(struct inj_val) > len)
				break;	/* not a record the agent writes */
			if (npd == cap) {
				struct pending *n;

				cap = cap ? cap * 2 : 1024;
				n = realloc(pd, cap * sizeof(*n));
				if (!n) {
					free(pd);
					return -ENOMEM;
				}
				pd = n;
			}
			pd[npd++] = (struct pending){r->tsc, r, sidx};
			pos += len;
		}
	}
	if (npd)
		qsort(pd, npd, sizeof(*pd), cmp_pending);
	for (size_t i = 0; i < npd && !stop; i++) {
		stop = inj_deliver(j, &pd[i], fn, ctx);
		delivered++;
	}
	free(pd);
	for (uint32_t sidx = 0; sidx < INJ_NSLOTS; sidx++)
		if (slots[sidx].key && heads[sidx])
			__atomic_store_n(&slots[sidx].tail, heads[sidx], __ATOMIC_RELEASE);
	if (j->live && mono_ns() >= j->next_reclaim) {
		inj_reclaim(j);
		j->next_reclaim = mono_ns() + 200000000ULL;
	}
	if (!delivered && timeout_ms > 0)
		usleep((useconds_t)(timeout_ms < 20 ? timeout_ms : 20) * 1000);
	return delivered;
}

static void inj_stop(struct usc_engine *e)
{
	struct inj *j = inj_of(e);

	if (j->ctl)
		j->ctl->enabled = 0;	/* hits are still counted */
}

static int inj_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct inj *j = inj_of(e);
	struct usc_session *s = e->session;

	st->events = st->lost = 0;
	for (size_t i = 0; i < s->nsites; i++) {
		uint64_t hits = j->folded[2 * i], lost = j->folded[2 * i + 1];

		if (j->shm) {
			const uint64_t *c = inj_counts(j);
			const char *cc = (const char *)j->shm + j->cpu_counts_off;

			for (uint32_t sl = 0; sl < INJ_NSLOTS; sl++) {
				hits += c[2 * ((uint64_t)sl * s->nsites + i)];
				lost += c[2 * ((uint64_t)sl * s->nsites + i) + 1];
			}
			for (uint32_t b = 0; b < INJ_CPU_BUCKETS; b++)
				hits += *(const uint64_t *)(cc + (uint64_t)b * j->cpu_stride +
							    i * sizeof(uint64_t));
		}
		j->stats[i].hits = (int64_t)hits;
		j->stats[i].lost = (int64_t)lost;
		st->events += j->stats[i].events;
		st->lost += lost;
	}
	if (j->ctl)
		st->lost += j->ctl->slot_full;
	st->sites = j->stats;
	return 0;
}

/* Not gone, nor a zombie. */
static bool proc_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void inj_detach(struct usc_engine *e)
{
	struct inj *j = inj_of(e);
	bool any = false;

	for (size_t p = 0; p < j->npatches; p++)
		any |= j->patches[p].applied;
	if (!any && !j->nsemaphores)
		return;
	inj_stop(e);
	if (!proc_alive(j->pid) || remote_stop_all(&j->rem, j->pid)) {
		/* it has gone: nothing of it to restore */
		for (size_t p = 0; p < j->npatches; p++)
			j->patches[p].applied = false;
		j->nsemaphores = 0;
		return;
	}
	inj_restore(j);
	remote_release(&j->rem);
}

static void inj_destroy(struct usc_engine *e)
{
	struct inj *j = inj_of(e);

	inj_detach(e);
	if (j->shm) {
		/* the rings' pages are charged to the process (it touched them):
		 * give them back; the mapping stays, a late hit refaults a zero
		 * page, and records nothing (enabled is 0) */
		madvise((char *)j->shm + j->ctl->rings_off, (size_t)INJ_NSLOTS * INJ_RING_SIZE,
			MADV_REMOVE);
		munmap(j->shm, j->shm_size);
	}
	for (size_t p = 0; p < j->npatches; p++) {
		free(j->patches[p].sites);
		free(j->patches[p].probe_off);
	}
	free(j->patches);
	free(j->areas);
	free(j->semaphores);
	free(j->stats);
	free(j->folded);
	free(j->plans);
	free(j->comms);
	free(j);
}

const struct usc_engine_ops inject_engine_ops = {
	.name = "inject",
	.trace_exec = true,
	.open = inj_open,
	.attach = inj_attach,
	.start = inj_start,
	.launched = inj_launched,
	.poll = inj_poll,
	.stop = inj_stop,
	.stats = inj_stats,
	.detach = inj_detach,
	.destroy = inj_destroy,
};
