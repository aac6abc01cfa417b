/* The bpf engine: eBPF uprobes through libbpf.
 *
 * One BPF program (uscope.bpf.c), attached to every site with the site's
 * index as the attach cookie, interprets the site's fetch programs, so it
 * computes what uprobe_events cannot (a USDT base+index operand) and turns a
 * bad pointer into a fault marker. The sleepable build is loaded where the
 * kernel has sleepable uprobes: it reads memory nobody has touched yet; the
 * other only where it has not (said with -v). Probes attach with -p
 * --no-children to the target process only (the link's pid: all the
 * process's threads, not its children), or for COMMAND and -p to every
 * process and filter on the tree (followed through forks and exits by
 * tracepoint programs), or to every process system-wide: with one multi-uprobe link a
 * file where the kernel has them, one link a site where not (links.c). The
 * kernel counts each site's hits and lost records itself, per CPU. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/log.h"
#include "core/proc.h"
#include "engine/bpf/bpf_int.h"
#include "engine/kfeat.h"
#include "engine/raw.h"
#include "python/detect.h"
#include "uscope.skel.h"

/* The verifier's reason for the last program it refused: the line before
 * its "processed N insns" (for the one-line refusal). */
static char verifier_why[160];

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char *buf = NULL, *line, *end, *prev = NULL;
	int n, lines = 0, skip;

	if (level == LIBBPF_DEBUG)
		return 0;
	n = vasprintf(&buf, fmt, ap);
	if (n < 0)
		return 0;
	/* the verifier's log, with -v: its last lines say why */
	for (line = buf; *line; line++)
		lines += *line == '\n';
	skip = lines > 60 ? lines - 60 : 0;
	for (line = buf; *line; line = *end ? end + 1 : end) {
		end = line + strcspn(line, "\n");
		if (!strncmp(line, "processed ", 10) && prev)
			snprintf(verifier_why, sizeof(verifier_why), "%.*s",
				 (int)strcspn(prev, "\n"), prev);
		if (end > line)
			prev = line;
		if (skip-- > 0)
			continue;
		if (end > line)
			log_debug("%.*s", (int)(end - line), line);
	}
	free(buf);
	return 0;
}

/* CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) in the effective set. */
static bool may_bpf(void)
{
	struct proc_status st;
	unsigned long long eff;

	if (geteuid() == 0)
		return true;
	if (proc_status_read(0, &st))
		return false;
	eff = st.cap_eff;
	return (eff & (1ULL << 21)) || ((eff & (1ULL << 39)) && (eff & (1ULL << 38)));
}

static int bpfeng_create(const struct usc_engine_ctx *s, struct usc_engine **out, char *why,
			 size_t len)
{
	struct bpfeng *u;
	char miss[256];

	if (!may_bpf()) {
		snprintf(why, len, "the bpf engine needs root (or CAP_BPF and CAP_PERFMON)");
		return -EPERM;
	}
	/* what the program cannot do without, asked the kernel (kfeat.h) */
	if (*kfeat_bpf_missing(kfeat_get(), miss, sizeof(miss))) {
		snprintf(why, len, "the bpf engine needs what this kernel lacks: %s (-e inject and "
			 "-e tracefs do without)", miss);
		return -ENOTSUP;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->base.ops = &bpf_engine_ops;
	u->base.ctx = s;
	/* COMMAND's tree, or -p's (the processes it forks after attach) */
	u->follow = s->target->kind == USC_TARGET_COMMAND ||
		    (s->target->kind == USC_TARGET_PID && s->children);
	*out = &u->base;
	return 0;
}

static int bpfeng_can_place(struct usc_engine *e, const struct usc_site *site, char *why,
			size_t len)
{
	struct bpfeng *u = bpfeng_of(e);

	/* a script's return may be the kernel's uretprobe (its program runs
	 * it as a plain site: retval is in rax) */
	if (site->is_return && !site->ret_site && site->script < 0) {
		snprintf(why, len, "the bpf engine probes returns on their return sites only "
			 "(--uretprobe needs -e tracefs)");
		return -ENOTSUP;
	}
	if (site->python) {
		snprintf(why, len, "py: probes run in the process (a profile function of "
			 "CPython's): the inject engine only");
		return -ENOTSUP;
	}
	if (site->nargs + (site->ret_site ? 1 : 0) > BPFENG_MAX_ARGS) {
		snprintf(why, len, "the bpf engine takes at most %d fetch arguments", BPFENG_MAX_ARGS - 1);
		return -ENOTSUP;
	}
	if (u->taken >= BPFENG_MAX_SITES) {
		snprintf(why, len, "the bpf engine takes at most %d sites", BPFENG_MAX_SITES);
		return -ENOTSUP;
	}
	u->taken++;
	return 0;
}

/* The maps sized for the session before load: what a session does not use
 * is one entry, and the hashes it does are allocated as they fill, not
 * ahead: tens of ms to create a preallocated 65,536-entry hash, and more for
 * a per-CPU one, all before the readiness line. A kernel without the BPF
 * memory allocator (before 6.1: kfeat.h) warns in its log at a uprobe
 * program that uses a hash allocated at run time: there every hash is
 * preallocated. (Such a kernel also refuses one in a sleepable program; the
 * sleepable program needs 6.12's bpf_copy_from_user_str anyway.) */
static int bpfeng_size_maps(struct bpfeng *u)
{
	const struct usc_engine_ctx *s = u->base.ctx;
	struct uscope_bpf *skel = u->skel;
	__u32 nsites = u->base.nsites ? (__u32)u->base.nsites : 1;
	struct bpf_map *grow[] = {skel->maps.agg, skel->maps.tgids, skel->maps.stk_procs,
				  skel->maps.stk_stacks, skel->maps.py_stacks};
	bool rt = kfeat_get()->mem_alloc, pycount = false;

	for (size_t i = 0; i < u->base.nsites; i++)
		pycount |= u->base.sites[i]->agg_in_place && site_has_pystack(u->base.sites[i]) &&
			   !site_has_ustack(u->base.sites[i]);
	if (bpf_map__set_max_entries(skel->maps.py_stacks,
				     pycount && s->set->agg.max_rows ? s->set->agg.max_rows : 1))
		return -EINVAL;

	if (bpf_map__set_max_entries(skel->maps.sites, nsites) ||
	    bpf_map__set_max_entries(skel->maps.counts, nsites) ||
	    (!u->follow && bpf_map__set_max_entries(skel->maps.tgids, 1)) ||
	    (!skel->rodata->stk_on && bpf_map__set_max_entries(skel->maps.stk_procs, 1)) ||
	    bpf_map__set_max_entries(skel->maps.objs,
				     s->set->objtrace.on ? s->set->objtrace.max_objects : 1))
		return -EINVAL;
	for (size_t i = 0; i < sizeof(grow) / sizeof(grow[0]); i++)
		if (bpf_map__set_map_flags(grow[i], rt ? bpf_map__map_flags(grow[i]) | BPF_F_NO_PREALLOC :
						  bpf_map__map_flags(grow[i]) & ~BPF_F_NO_PREALLOC))
			return -EINVAL;
	return 0;
}

/* With -v, in one line: what this kernel lacks that the engine does
 * without, and what that costs. */
static void bpfeng_lacks_said(const struct bpfeng *u)
{
	const struct kfeat *k = kfeat_get();
	const char *what[3], *cost[3];
	char line[512];
	size_t n = 0, used = 0;

	if (!u->sleepable && !getenv("USCOPE_BPF_SLEEPABLE")) {
		what[n] = "sleepable uprobes";
		cost[n++] = "values in memory not paged in yet show as (fault)";
	}
	if (!u->multi) {
		what[n] = "multi-uprobe links";
		cost[n++] = "one link a site, each waiting for the kernel's grace periods when it "
			    "goes (about 0.1 s a site)";
	}
	if (!k->mem_alloc) {
		what[n] = "the BPF memory allocator";
		cost[n++] = "the hash maps are preallocated";
	}
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(line + used, used < sizeof(line) ? sizeof(line) - used : 0,
					 "%s%s", i ? ", " : "", what[i]);
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(line + used, used < sizeof(line) ? sizeof(line) - used : 0,
					 "%s%s", i ? "; " : ": ", cost[i]);
	log_info("bpf: this kernel lacks %s", line);
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* With -v: what the load took, and what the verifier walked (the
 * instructions it checked, each as often as it came to it). */
static void bpfeng_load_said(struct bpfeng *u, double ms)
{
	struct bpf_program *p = u->sleepable ? u->skel->progs.usc_probe_s : u->skel->progs.usc_probe;
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len))
		info.verified_insns = 0;
	log_debug("bpf: the %s program loaded in %.1f ms (%u instructions verified)",
		  u->sleepable ? "sleepable" : "non-sleepable", ms, info.verified_insns);
}

/* Does some site's fetch program have an instruction op? */
static bool sites_use(const struct bpfeng *u, unsigned op)
{
	for (size_t i = 0; i < u->base.nsites; i++)
		for (unsigned a = 0; a < u->base.sites[i]->nargs; a++) {
			const struct usc_fetcharg *fa = &u->base.sites[i]->args[a];

			for (unsigned k = 0; k < fa->ninsn && k < BPFENG_MAX_INSN; k++)
				if (fa->insn[k].op == op)
					return true;
		}
	return false;
}

/* What the sites' programs and filters hold, for the program's constants:
 * the code of what no site has is left to the verifier to prune. A return
 * site's hidden argument (its return address) is a REG, ST_MEM, END. */
static void sites_say(const struct bpfeng *u, struct uscope_bpf *skel)
{
	uint64_t ops = 0;
	bool args = false, filter = false, fstr = false;

	for (size_t i = 0; i < u->base.nsites; i++) {
		const struct usc_site *site = u->base.sites[i];

		/* latency's returns pair with their entries: nothing evaluated */
		if (site->agg_in_place && u->base.ctx->set->agg.kind == USC_AGG_LATENCY &&
		    site->is_return && !site->filter.n)
			continue;
		for (unsigned a = 0; a < site->nargs; a++)
			for (unsigned k = 0; k < site->args[a].ninsn && k < BPFENG_MAX_INSN; k++)
				if (site->args[a].insn[k].op < 64)
					ops |= 1ULL << site->args[a].insn[k].op;
		if (site->ret_site)
			ops |= 1ULL << FOP_REG | 1ULL << FOP_ST_MEM | 1ULL << FOP_END;
		args |= site->nargs > 0 || site->ret_site;
		filter |= site->filter.n > 0;
		for (unsigned k = 0; k < site->filter.n && k < USC_FILTER_MAX; k++)
			fstr |= site->filter.insn[k].op == FIL_STR;
	}
	skel->rodata->ops_used = ops;
	skel->rodata->args_on = args;
	skel->rodata->filter_on = filter;
	skel->rodata->fstr_on = fstr;
}

static bool sites_follow_objects(const struct bpfeng *u)
{
	for (size_t i = 0; i < u->base.nsites; i++)
		if (u->base.sites[i]->spec->obj_role != USC_OBJ_NONE)
			return true;
	return false;
}

/* USCOPE_BPF_LOG=FILE: the verifier's whole log of the program loaded (or
 * refused) written to FILE, at USCOPE_BPF_LOG_LEVEL (1 by default: the path
 * it refused; 2: every instruction it walked, with its source line and
 * states): to see where an older kernel's verifier spends its million
 * instructions. USCOPE_BPF_LOG_SIZE: the log's bytes (512 MiB): one too
 * small for the log makes the kernel refuse the load (ENOSPC), as the tests
 * do to see -e auto do without the engine. */
static char *bpfeng_log_begin(struct bpf_program *p, size_t *size)
{
	const char *lvl = getenv("USCOPE_BPF_LOG_LEVEL"), *sz = getenv("USCOPE_BPF_LOG_SIZE");
	char *buf;

	if (!getenv("USCOPE_BPF_LOG"))
		return NULL;
	*size = sz ? strtoul(sz, NULL, 0) : 512u << 20;
	if (*size < 128)
		*size = 128;
	buf = calloc(1, *size);
	if (!buf)
		return NULL;
	bpf_program__set_log_buf(p, buf, *size);
	bpf_program__set_log_level(p, lvl ? (unsigned)atoi(lvl) : 1);
	return buf;
}

static void bpfeng_log_end(char *buf, size_t size)
{
	FILE *f;

	if (!buf)
		return;
	f = fopen(getenv("USCOPE_BPF_LOG"), "w");
	if (f) {
		fwrite(buf, 1, strnlen(buf, size), f);
		fclose(f);
	}
	free(buf);
}

/* Load the program: the sleepable build where the kernel has it. */
static int bpfeng_load(struct bpfeng *u)
{
	const struct usc_engine_ctx *s = u->base.ctx;
	/* USCOPE_BPF_SLEEPABLE=0 takes the other program where the kernel has
	 * both: to compare them (the tests do) */
	const char *env = getenv("USCOPE_BPF_SLEEPABLE");
	double t0;
	int err = 0;

	libbpf_set_print(libbpf_log);
	u->multi = bpfeng_multi_supported();
	/* the sleepable program only where the kernel has sleepable uprobes
	 * (a load that would fail only once verified is not tried) */
	for (int sleepable = (env && !strcmp(env, "0")) || !kfeat_get()->sleepable ? 0 : 1;
	     sleepable >= 0; sleepable--) {
		u->skel = uscope_bpf__open();
		if (!u->skel)
			return -errno;
		u->skel->rodata->count_only = s->set->count_only;
		u->skel->rodata->follow = u->follow;
		u->skel->rodata->prog_sleepable = sleepable;
		u->skel->rodata->have_copy_str = kfeat_get()->copy_str;
		/* the parts no site uses are left to the verifier to prune */
		u->skel->rodata->ustack_on = sites_use(u, FOP_USTACK);
		/* (2: system-wide, where a process's CPython is told at its first
		 * hit: the hits before say so) */
		u->skel->rodata->pystack_on = !sites_use(u, FOP_PYSTACK) ? 0 :
					      s->target->kind == USC_TARGET_SYSTEM ? 2 : 1;
		u->skel->rodata->obj_on = sites_follow_objects(u);
		sites_say(u, u->skel);
		/* a script's sites run the script's program (script.c): the
		 * engine's own is not loaded, nor walked by the verifier */
		bpf_program__set_autoload(u->skel->progs.usc_probe_s, sleepable && !bscript_on(u));
		bpf_program__set_autoload(u->skel->progs.usc_probe, !sleepable && !bscript_on(u));
		bpf_program__set_autoload(u->skel->progs.usc_fork, u->follow);
		bpf_program__set_autoload(u->skel->progs.usc_exit, u->follow);
		/* a multi link takes a program loaded for it, which libbpf 1.1's
		 * section names cannot say ("uprobe.multi.s" is libbpf 1.3's) */
		if (u->multi) {
			struct bpf_program *ps = u->skel->progs.usc_probe_s;

			bpf_program__set_expected_attach_type(ps, BPFENG_UPROBE_MULTI);
			bpf_program__set_flags(ps, bpf_program__flags(ps) | BPF_F_SLEEPABLE);
			bpf_program__set_expected_attach_type(u->skel->progs.usc_probe,
							      BPFENG_UPROBE_MULTI);
		}
		err = bpfeng_agg_prepare(u);
		if (!err)
			err = bpfeng_stk_prepare(u);
		if (!err)
			err = bpfeng_size_maps(u);
		if (err) {
			uscope_bpf__destroy(u->skel);
			u->skel = NULL;
			return err;
		}
		size_t logsz = 0;
		char *log = bpfeng_log_begin(sleepable ? u->skel->progs.usc_probe_s :
					     u->skel->progs.usc_probe, &logsz);
		int lerr;

		t0 = now_ms();
		lerr = uscope_bpf__load(u->skel);
		bpfeng_log_end(log, logsz);
		if (lerr == 0) {
			u->sleepable = sleepable;
			bpfeng_lacks_said(u);
			if (!bscript_on(u))
				bpfeng_load_said(u, now_ms() - t0);
			return 0;
		}
		err = lerr < 0 ? lerr : -EINVAL;
		uscope_bpf__destroy(u->skel);
		u->skel = NULL;
	}
	return err ? err : -EINVAL;
}

/* A site's programs into the map; a return site gets a hidden last
 * argument, the word at the stack pointer: the return address. */
static int bpfeng_fill_site(struct bpfeng *u, size_t i, struct bpfeng_site *us)
{
	const struct usc_site *site = u->base.sites[i];
	unsigned n = site->nargs;

	memset(us, 0, sizeof(*us));
	us->vaddr = site->vaddr;
	us->offset = site->offset;
	us->kind = site->cont				  ? BPFENG_CONT
		   : site->tail_call && site->follow_tail ? BPFENG_TAIL
							  : BPFENG_PLAIN;
	for (unsigned a = 0; a < n; a++) {
		const struct usc_fetcharg *fa = &site->args[a];

		for (unsigned k = 0; k < fa->ninsn && k < BPFENG_MAX_INSN; k++)
			memcpy(&us->args[a].insn[k], &fa->insn[k], sizeof(us->args[a].insn[k]));
		us->args[a].ninsn = fa->ninsn;
	}
	bpfeng_agg_site(u, site, us);
	if (site->spec->obj_role != USC_OBJ_NONE && n) {
		us->obj = (unsigned short)site->spec->obj_role;
		us->obj_verdict = (unsigned short)(n - 1);	/* before the return address */
		us->obj_regs = site->obj_regs;
	}
	u->ret_idx[i] = -1;
	if (site->ret_site) {
		struct bpfeng_arg *ra = &us->args[n];

		ra->insn[0] = (struct bpfeng_insn){.op = FOP_REG, .reg = USC_REG_SP};
		ra->insn[1] = (struct bpfeng_insn){.op = FOP_ST_MEM, .size = 8};
		ra->insn[2] = (struct bpfeng_insn){.op = FOP_END};
		ra->ninsn = 3;
		u->ret_idx[i] = (int)n++;
	}
	us->nargs = n;
	return 0;
}

/* The program loaded for the sites planned (engine.h: prepare). */
static int bpfeng_prepare(struct usc_engine *e, char *why, size_t len)
{
	struct bpfeng *u = bpfeng_of(e);
	int err;

	if (u->skel)
		return 0;
	verifier_why[0] = 0;
	err = bpfeng_load(u);
	if (!err)
		return 0;
	if (err == -EPERM && !verifier_why[0])
		snprintf(why, len, "the bpf engine needs root (or CAP_BPF and CAP_PERFMON)");
	else if (verifier_why[0])
		snprintf(why, len, "the bpf engine's program does not load on this kernel: its "
			 "verifier refuses it (%s; -v shows where); -e inject and -e tracefs do "
			 "without", verifier_why);
	else
		snprintf(why, len, "the bpf engine's program does not load on this kernel: %s; "
			 "-e inject and -e tracefs do without", strerror(-err));
	return err;
}

static int bpfeng_attach(struct usc_engine *e)
{
	struct bpfeng *u = bpfeng_of(e);
	char why[512];
	int fd, err;

	u->stats = calloc(e->nsites + 1, sizeof(*u->stats));
	u->ret_idx = calloc(e->nsites + 1, sizeof(*u->ret_idx));
	if (!u->stats || !u->ret_idx)
		return -ENOMEM;
	err = bpfeng_prepare(e, why, sizeof(why));	/* (the fallback's: not prepared) */
	if (err) {
		log_error("%s", why);
		return err;
	}
	err = bpfeng_stk_attach(u);
	if (err)
		return err;
	fd = bpf_map__fd(u->skel->maps.sites);
	for (size_t i = 0; i < e->nsites; i++) {
		struct bpfeng_site us;
		__u32 key = (__u32)i;

		bpfeng_fill_site(u, i, &us);
		if (bpf_map_update_elem(fd, &key, &us, BPF_ANY)) {
			err = -errno;
			log_error("cannot store the programs of %s: %s", e->sites[i]->event,
				  strerror(errno));
			return err;
		}
	}
	return bscript_on(u) ? bscript_load(u) : 0;
}

/* -p: a process that descends from the target already, in the tree the
 * program keeps (tgids) as its forks after attach are. */
static int bpfeng_seed(pid_t pid, void *ctx)
{
	struct bpfeng *u = ctx;
	__u32 key = (__u32)pid;
	__u8 one = 1;

	if (bpf_map_update_elem(bpf_map__fd(u->skel->maps.tgids), &key, &one, BPF_ANY))
		return -errno;
	bpfeng_stk_start(u, pid);
	return 0;
}

static int bpfeng_start(struct usc_engine *e, pid_t pid, bool follow_children)
{
	struct bpfeng *u = bpfeng_of(e);
	struct bpf_program *prog = u->script	  ? bscript_prog(u)
				   : u->sleepable ? u->skel->progs.usc_probe_s
						  : u->skel->progs.usc_probe;

	(void)follow_children;
	if (u->follow) {
		__u32 key = (__u32)pid;
		__u8 one = 1;

		if (bpf_map_update_elem(bpf_map__fd(u->skel->maps.tgids), &key, &one, BPF_ANY))
			return -errno;
		u->fork_link = bpf_program__attach(u->skel->progs.usc_fork);
		u->exit_link = u->fork_link ? bpf_program__attach(u->skel->progs.usc_exit) : NULL;
		if (!u->fork_link || !u->exit_link) {
			int err = -errno;

			log_error("cannot follow the processes of %d: %s", (int)pid, strerror(-err));
			return err;
		}
		/* -p: its descendants now, the fork program armed before (what
		 * they fork from now on, it adds) */
		if (e->ctx->target->kind == USC_TARGET_PID) {
			int err = proc_descendants_each(pid, bpfeng_seed, u);

			if (err) {
				log_error("cannot follow the processes of %d: %s", (int)pid,
					  strerror(-err));
				return err;
			}
		}
	}
	bpfeng_stk_start(u, pid);
	/* -p --no-children: the link's own filter (the process's threads);
	 * COMMAND, -p: every process, the program keeps the tree (tgids) */
	return bpfeng_links_attach(u, prog, pid > 0 && !u->follow ? pid : 0);
}

/* System-wide, a process the inject engine may not take (the session's
 * fallback): the sites' links for it alone, the kernel placing their
 * breakpoints in its memory only (none in the injected processes). */
static int bpfeng_add_pid(struct usc_engine *e, pid_t pid)
{
	struct bpfeng *u = bpfeng_of(e);
	struct bpf_program *prog = u->script	  ? bscript_prog(u)
				   : u->sleepable ? u->skel->progs.usc_probe_s
						  : u->skel->progs.usc_probe;

	if (!u->skel || u->follow || pid <= 0)
		return -EINVAL;
	bpfeng_stk_start(u, pid);
	return bpfeng_links_attach(u, prog, pid);
}

/* $pystack: where CPython is in process pid, for the program (pyprocs);
 * rt NULL: pid no longer runs it. */
static int bpfeng_python(struct usc_engine *e, pid_t pid, const struct python_runtime *rt)
{
	struct bpfeng *u = bpfeng_of(e);
	__u32 key = (__u32)pid;
	struct bpfeng_py v;

	if (!u->skel)
		return -ENOENT;
	if (!rt)
		return bpf_map_delete_elem(bpf_map__fd(u->skel->maps.pyprocs), &key) ? -errno : 0;
	v = (struct bpfeng_py){.off = *rt->off, .glibc = rt->glibc, .runtime = rt->runtime};
	if (bpf_map_update_elem(bpf_map__fd(u->skel->maps.pyprocs), &key, &v, BPF_ANY))
		return -errno;
	return 0;
}

static int bpfeng_record(void *ctx, void *data, size_t size)
{
	struct bpfeng *u = ctx;
	struct usc_event ev;
	char comm[17];
	uint32_t site;
	uint64_t ts;

	if (u->stop_asked || bpf_raw_peek(data, size, &site, &ts))
		return 0;
	if (bpf_raw_event(data, size, u->base.sites, u->base.nsites, comm, u->vals, &ev))
		return 0;
	if (((const struct bpfeng_rec *)data)->pad == BPFENG_REC_PYNAMES) {
		bpfeng_py_names(u, &ev);	/* no event: a count's new $pystack */
		return 0;
	}
	if (u->stk)
		bpfeng_stk_event(u, &ev);
	u->stats[site].events++;
	u->delivered++;
	if (u->fn(&ev, u->ctx))
		u->stop_asked = 1;
	return 0;
}

static int bpfeng_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct bpfeng *u = bpfeng_of(e);
	int n;

	if (!u->skel)
		return 0;
	if (!u->rb) {
		u->rb = ring_buffer__new(bpf_map__fd(u->skel->maps.events), bpfeng_record, u, NULL);
		if (!u->rb)
			return -errno;
	}
	if (u->stk)
		bpfeng_stk_sync(u);	/* maps changed since: before the walks they made */
	u->fn = fn;
	u->ctx = ctx;
	u->delivered = 0;
	u->stop_asked = 0;
	n = u->script ? bscript_poll(u, timeout_ms) : ring_buffer__poll(u->rb, timeout_ms);
	if (n < 0 && n != -EINTR)
		return n;
	return u->delivered;
}

static void bpfeng_stop(struct usc_engine *e)
{
	struct bpfeng *u = bpfeng_of(e);

	/* no new hits; what is in the ring buffer can still be read */
	bpfeng_links_detach(u);
	bpf_link__destroy(u->fork_link);
	u->fork_link = NULL;
	bpf_link__destroy(u->exit_link);
	u->exit_link = NULL;
}

static int bpfeng_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct bpfeng *u = bpfeng_of(e);
	int ncpu = libbpf_num_possible_cpus();
	struct bpfeng_counts *per;

	st->events = st->lost = 0;
	st->sites = u->stats;
	if (!u->skel)
		return 0;
	per = calloc(ncpu > 0 ? (size_t)ncpu : 1, sizeof(*per));
	u->dropped = 0;
	u->collided = 0;
	for (size_t i = 0; i < e->nsites; i++) {
		__u32 key = (__u32)i;
		uint64_t hits = 0, lost = 0, full = 0, fault = 0;

		memset(u->stats[i].stack_partial, 0, sizeof(u->stats[i].stack_partial));
		if (per && bpf_map_lookup_elem(bpf_map__fd(u->skel->maps.counts), &key, per) == 0)
			for (int c = 0; c < ncpu; c++) {
				hits += per[c].hits;
				lost += per[c].lost;
				u->dropped += per[c].dropped;
				u->collided += per[c].collided;
				full += per[c].full;
				fault += per[c].fault;
				for (int w = 0; w < USC_STACK_FB_NR; w++)
					u->stats[i].stack_partial[w] += per[c].partial[w];
			}
		u->stats[i].agg_full = full;
		u->stats[i].agg_fault = fault;
		u->stats[i].hits = (int64_t)hits;
		u->stats[i].lost = (int64_t)lost;
		st->events += u->stats[i].events;
		st->lost += lost;
	}
	free(per);
	return 0;
}

static void bpfeng_detach(struct usc_engine *e)
{
	struct bpfeng *u = bpfeng_of(e);

	bpfeng_stop(e);
	if (u->dropped)
		log_info("bpf: %llu tail calls did not return through a probed ret (a longjmp or "
			 "an unwind left them)", (unsigned long long)u->dropped);
	u->dropped = 0;
	if (u->collided)
		log_info("bpf: %llu counted stacks had the hash of another (recorded instead)",
			 (unsigned long long)u->collided);
	u->collided = 0;
}

static void bpfeng_destroy(struct usc_engine *e)
{
	struct bpfeng *u = bpfeng_of(e);

	bpfeng_detach(e);
	ring_buffer__free(u->rb);
	bscript_free(u);
	bpfeng_stk_free(u);
	uscope_bpf__destroy(u->skel);
	free(u->links);
	free(u->mfds);
	free(u->stats);
	free(u->ret_idx);
	free(u);
}

const struct usc_engine_ops bpf_engine_ops = {
	.name = "bpf",
	.follows_tail_calls = true,
	.objtrace = true,
	.kernel_uprobes = true,
	.pid_only_uprobes = true,
	.create = bpfeng_create,
	.can_place = bpfeng_can_place,
	.prepare = bpfeng_prepare,
	.python = bpfeng_python,
	.attach = bpfeng_attach,
	.start = bpfeng_start,
	.poll = bpfeng_poll,
	.stop = bpfeng_stop,
	.stats = bpfeng_stats,
	.detach = bpfeng_detach,
	.destroy = bpfeng_destroy,
	.filters = bpfeng_filters,
	.agg_place = bpfeng_agg_place,
	.agg_read = bpfeng_agg_read,
	.add_pid = bpfeng_add_pid,
	.script_place = bscript_place,
	.script_rows = bscript_rows,
	.script_clear = bscript_clear,
	.script_errors = bscript_errors,
};
