/* The bpf engine's links: how its program is attached to the sites, and
 * detached.
 *
 * Detaching is what costs. A uprobe removed waits for the kernel's grace
 * periods (RCU tasks trace and RCU: a hit may be running its handler), and
 * one perf-event uprobe a site waits for them one site after another under
 * the kernel's event_mutex, about 0.1 s a site here (threads do not help):
 * 100 sites, 10 s to exit. A multi-uprobe link (BPF_TRACE_UPROBE_MULTI,
 * Linux 6.6) attaches the program to many offsets of one file with one
 * bpf(2) call, each offset with its own cookie and semaphore, and waits
 * once for them all when it goes. So the sites are grouped by file, one link
 * a file, the site's index as its cookie (the program finds its site with
 * bpf_get_attach_cookie, as with one link a site). Kernels without it get
 * one perf-event link a site.
 *
 * Libbpf 1.1 (Debian 12) predates multi-uprobe links: the program's
 * expected attach type is set before load (bpfeng_load) and the link is
 * made with the bpf(2) syscall itself, with the attribute layout below. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/log.h"
#include "engine/bpf/bpf_int.h"

/* union bpf_attr's link_create for a multi-uprobe link, as Linux 6.6's UAPI
 * (include/uapi/linux/bpf.h) lays it out: the common head, then the
 * uprobe_multi member of the per-type union, which starts at byte 16. */
struct umulti_attr {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;		/* BPFENG_UPROBE_MULTI */
	uint32_t flags;
	uint64_t path;			/* const char * */
	uint64_t offsets;		/* const uint64_t *, file offsets */
	uint64_t ref_ctr_offsets;	/* const uint64_t *, or 0 */
	uint64_t cookies;		/* const uint64_t *, or 0 */
	uint32_t cnt;
	uint32_t umulti_flags;		/* BPF_F_UPROBE_MULTI_RETURN (1): not used */
	uint32_t pid;			/* only this process (its thread group), or 0 */
	uint32_t pad;
};

_Static_assert(__builtin_offsetof(struct umulti_attr, path) == 16, "link_create's union at 16");
_Static_assert(__builtin_offsetof(struct umulti_attr, pid) == 56, "uprobe_multi.pid at 56");

static int link_create(struct umulti_attr *a)
{
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, a, sizeof(*a));

	return fd < 0 ? -errno : fd;
}

/* Has the kernel multi-uprobe links (Linux 6.6)? Asked once: a program
 * that returns 0, loaded for them, linked to "/". A kernel that has them
 * refuses the directory (EBADF: not a regular file); one that does not,
 * the attach type (EINVAL). USCOPE_BPF_MULTI=0 says no, to compare (the
 * tests do). */
bool bpfeng_multi_supported(void)
{
	static int cached = -1;
	const struct bpf_insn ret0[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)BPFENG_UPROBE_MULTI);
	const char *env = getenv("USCOPE_BPF_MULTI");
	uint64_t off = 0;
	int prog, fd;

	if (cached >= 0)
		return cached;
	cached = 0;
	if (env && !strcmp(env, "0"))
		return false;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", ret0, 2, &opts);
	if (prog >= 0) {
		struct umulti_attr a = {.prog_fd = (uint32_t)prog,
					.attach_type = BPFENG_UPROBE_MULTI,
					.path = (uintptr_t) "/",
					.offsets = (uintptr_t)&off,
					.cnt = 1};

		fd = link_create(&a);
		if (fd >= 0)
			close(fd);
		cached = fd == -EBADF;
		close(prog);
	}
	return cached;	/* (its absence said with the rest: bpfeng_lacks_said) */
}

struct group {
	const char *path;
	bool ret;			/* the kernel's uretprobes (a script's returns) */
	const size_t *idx;		/* the sites of the file, indices in e->sites */
	size_t n;
	uint64_t *offs, *refs, *cookies;	/* scratch, n each */
	int prog;
	pid_t pid;
};

static int group_link(struct group *g, size_t from, size_t n)
{
	bool refs = false;
	struct umulti_attr a;

	for (size_t k = from; k < from + n; k++)
		refs |= g->refs[k] != 0;
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)g->prog;
	a.attach_type = BPFENG_UPROBE_MULTI;
	a.path = (uintptr_t)g->path;
	a.offsets = (uintptr_t)(g->offs + from);
	a.ref_ctr_offsets = refs ? (uintptr_t)(g->refs + from) : 0;
	a.cookies = (uintptr_t)(g->cookies + from);
	a.cnt = (uint32_t)n;
	a.umulti_flags = g->ret ? 1 : 0;	/* BPF_F_UPROBE_MULTI_RETURN */
	a.pid = (uint32_t)(g->pid > 0 ? g->pid : 0);
	return link_create(&a);
}

/* The file's link failed: which site is it? Halves, linked and unlinked
 * again until one site is left (a few grace periods, on the way out). */
static size_t group_culprit(struct group *g, size_t from, size_t n)
{
	while (n > 1) {
		size_t half = n / 2;
		int fd = group_link(g, from, half);

		if (fd < 0) {
			n = half;
		} else {
			close(fd);
			from += half;
			n -= half;
		}
	}
	return from;
}

static int attach_group(struct bpfeng *u, struct group *g)
{
	const struct usc_site *const *sites = u->base.sites;
	int fd;

	for (size_t k = 0; k < g->n; k++) {
		g->offs[k] = sites[g->idx[k]]->offset;
		g->refs[k] = sites[g->idx[k]]->ref_ctr_offset;
		g->cookies[k] = g->idx[k];
	}
	fd = group_link(g, 0, g->n);
	if (fd < 0) {
		size_t k = g->n > 1 ? group_culprit(g, 0, g->n) : 0;
		const struct usc_site *site = sites[g->idx[k]];

		log_error("cannot attach %s at %s:0x%llx: %s", site->label, site->path,
			  (unsigned long long)site->offset, strerror(-fd));
		return fd;
	}
	u->mfds[u->nmfds++] = fd;
	log_debug("bpf: %zu site%s of %s in one link", g->n, g->n == 1 ? "" : "s", g->path);
	return 0;
}

/* A return probe that is the kernel's uretprobe (uscope script's on bpf,
 * as bpftrace's: one trap a call), not a probe on the return instructions. */
static bool kernel_ret(const struct usc_site *s)
{
	return s->is_return && !s->ret_site;
}

static int by_path(const void *a, const void *b, void *ctx)
{
	const struct usc_site *const *sites = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(sites[i]->path, sites[j]->path);

	if (!c)
		c = (int)kernel_ret(sites[i]) - (int)kernel_ret(sites[j]);
	return c ? c : (i > j) - (i < j);
}

/* One multi link a file: the sites ordered by file, each run of one file
 * linked at once. */
static int attach_multi(struct bpfeng *u, int prog, pid_t pid)
{
	size_t n = u->base.nsites;
	size_t *order = calloc(n + 1, sizeof(*order));
	uint64_t *scratch = calloc(3 * n + 3, sizeof(*scratch));
	/* again for each process the session adds (add_pid): its links too */
	int *mfds = realloc(u->mfds, (u->nmfds + n + 1) * sizeof(*mfds));
	int err = 0;

	if (mfds)
		u->mfds = mfds;
	if (!order || !scratch || !mfds) {
		free(order);
		free(scratch);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), by_path, (void *)u->base.sites);
	/* a multi link's pid is a process (the kernel takes it as a thread
	 * group): the session made -p TID its process (session_process_of) */
	pid = pid > 0 ? pid : 0;
	for (size_t k = 0; k < n && !err;) {
		struct group g = {.path = u->base.sites[order[k]]->path, .idx = order + k,
				  .offs = scratch, .refs = scratch + n, .cookies = scratch + 2 * n,
				  .prog = prog, .pid = pid,
				  .ret = kernel_ret(u->base.sites[order[k]])};

		while (k + g.n < n && !strcmp(u->base.sites[order[k + g.n]]->path, g.path) &&
		       kernel_ret(u->base.sites[order[k + g.n]]) == g.ret)
			g.n++;
		err = attach_group(u, &g);
		k += g.n;
	}
	free(order);
	free(scratch);
	return err;
}

/* One perf-event link a site, where the kernel has no multi links. */
static int attach_single(struct bpfeng *u, struct bpf_program *prog, pid_t pid)
{
	u->links = calloc(u->base.nsites + 1, sizeof(*u->links));
	if (!u->links)
		return -ENOMEM;
	for (size_t i = 0; i < u->base.nsites; i++) {
		const struct usc_site *site = u->base.sites[i];
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = i,
			    .ref_ctr_offset = (size_t)site->ref_ctr_offset,
			    .retprobe = kernel_ret(site));

		u->links[i] = bpf_program__attach_uprobe_opts(prog, pid > 0 ? pid : -1, site->path,
							      site->offset, &opts);
		if (!u->links[i]) {
			int err = -errno;

			log_error("cannot attach %s at %s:0x%llx: %s", site->label, site->path,
				  (unsigned long long)site->offset, strerror(-err));
			return err;
		}
	}
	return 0;
}

int bpfeng_links_attach(struct bpfeng *u, struct bpf_program *prog, pid_t pid)
{
	/* a uscope killed as the kernel removes its uprobes leaves their
	 * breakpoints: its janitor removes them (engine.h, struct usc_undo) */
	for (size_t i = 0; i < u->base.nsites && !u->undo_added; i++) {
		const struct usc_site *site = u->base.sites[i];
		char off[24];

		snprintf(off, sizeof(off), "%llu", (unsigned long long)site->offset);
		engine_undo_add(u->base.ctx, USC_UNDO_UPROBE, site->path, off);
	}
	u->undo_added = true;
	if (u->multi)
		return attach_multi(u, bpf_program__fd(prog), pid);
	if (u->links) {
		/* one perf-event link a site holds one process: a second
		 * process's would need another set (add_pid on kernels without
		 * multi links: the first process only) */
		log_error("the bpf engine traces one process alone per run on this kernel "
			  "(no multi-uprobe links: Linux 6.6)");
		return -ENOTSUP;
	}
	return attach_single(u, prog, pid);
}

struct unlink_job {
	struct bpf_link **links;
	int *fds;
	size_t n, from, step;
};

static void *unlink_some(void *arg)
{
	struct unlink_job *j = arg;

	for (size_t i = j->from; i < j->n; i += j->step) {
		if (j->links) {
			bpf_link__destroy(j->links[i]);
			j->links[i] = NULL;
		} else if (j->fds[i] >= 0) {
			close(j->fds[i]);
			j->fds[i] = -1;
		}
	}
	return NULL;
}

/* Every link closed, from several threads: each close waits for grace
 * periods, and waits of different links overlap (a perf-event link's do
 * not: the kernel's event_mutex serialises them). Safe at any point, and
 * again. */
void bpfeng_links_detach(struct bpfeng *u)
{
	enum { THREADS = 16 };
	struct unlink_job jobs[THREADS];
	pthread_t tid[THREADS];
	bool started[THREADS] = {false};
	size_t n = u->links ? u->base.nsites : u->nmfds;
	size_t nt = n < THREADS ? n : THREADS;

	if (!u->links && !u->nmfds)
		return;
	for (size_t t = 0; t < nt; t++) {
		jobs[t] = (struct unlink_job){u->links, u->mfds, n, t, nt};
		started[t] = nt > 1 && pthread_create(&tid[t], NULL, unlink_some, &jobs[t]) == 0;
		if (!started[t])
			unlink_some(&jobs[t]);
	}
	for (size_t t = 0; t < nt; t++)
		if (started[t])
			pthread_join(tid[t], NULL);
	free(u->links);
	u->links = NULL;
	u->nmfds = 0;
}
