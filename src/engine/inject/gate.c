/* The gate: system-wide on inject, the processes that start mapping a probed
 * file after attach (an exec of the program, a dlopen of the library) are
 * stopped before their first probed call for uscope to attach to them and
 * patch them (system.c, inj_system_seen).
 *
 * A small bpf program of its own (gate.bpf.c; the two offsets of the kernel's
 * structures it reads found by gate_btf.c) on one uprobe per file, for
 * every process, at the file's first point: where the dynamic linker hands
 * the file control before anyone calls into it. For a program its ELF entry;
 * for a library (DT_SONAME) its DT_INIT, else its first DT_INIT_ARRAY word
 * (the file holds the relocation's addend there), which the dynamic linker
 * runs when it maps the library, at start or at dlopen, before the
 * libraries and the program that need it run. The program stops a process
 * it has not seen (SIGSTOP) and tells uscope, which seizes it, patches it,
 * and lets it go (SIGCONT). A process with a controlling terminal is told
 * only: a job-control shell would see its foreground job stop and take the
 * terminal back; uscope attaches it as soon as told, and its calls before
 * that are not seen (said at the end).
 *
 * The stop is a group-stop: the process's parent may see it (a waitpid with
 * WUNTRACED) before uscope could seize it. The bpf program can only signal;
 * a hold the parent cannot see (sending the thread back to the first point
 * by writing its instruction pointer, Linux 6.18 upstream) is refused by
 * this kernel's verifier.
 *
 * Nothing stays stopped: uscope lets every process the map has as stopped
 * go at its end (inj_gate_close), and its janitor holds the map too (by its
 * id, USC_UNDO_GATE): after a kill -9 of uscope it sends SIGCONT to every
 * process the gate stopped that uscope had not let go. The uprobes are told
 * to the janitor as well (USC_UNDO_UPROBE): a breakpoint the kernel leaves
 * behind is removed.
 *
 * A file whose first point a probe's patch covers, or without one, has no
 * gate: said once. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <bpf/bpf.h>

#include "core/log.h"
#include "engine/kfeat.h"
#include "engine/inject/gate_shared.h"
#include "engine/inject/inject_int.h"
#include "gate.skel.h"

#define GATE_FILES 16
#define GATE_SEEN 64		/* new processes taken in a poll */

/* A point of a file: its link-time address and its file offset. */
struct gate_point {
	uint64_t vaddr, off;
};

/* A file's point and its uprobe (a perf event fd, or -errno) */
struct gate_pt {
	const char *path;
	struct gate_point p;
	int pfd;
};

struct inj_gate {
	struct inj_gate_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *links[GATE_FILES];
	size_t nlinks;
	int procs_fd;
	struct inj *j;
	struct gate_seen seen[GATE_SEEN];	/* one poll's new processes */
	size_t nseen;
	uint64_t missed_said;
	int epfd;		/* the ring buffer's fd and the doorbells' (inj_gate_wait_fd) */
	const char *files[GATE_FILES];	/* the sites' files, each once */
	size_t nfiles, npoints;
	struct gate_pt points[GATE_FILES];	/* the ones with a point */
	int uprobe_type;	/* the uprobe PMU's, or -1 */
};

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[512];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	log_debug("gate: libbpf: %s", buf);
	return 0;
}

/* The file offset of link-time address v (in a PT_LOAD, an executable one
 * when code), or -1. */
static int64_t vaddr_off(const Elf64_Phdr *ph, size_t n, uint64_t v, bool code)
{
	for (size_t i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && v >= ph[i].p_vaddr &&
		    v < ph[i].p_vaddr + ph[i].p_filesz && (!code || (ph[i].p_flags & PF_X)))
			return (int64_t)(v - ph[i].p_vaddr + ph[i].p_offset);
	return -1;
}

/* The addend of the R_X86_64_RELATIVE relocation at address at, from the
 * DT_RELA table (a linker that leaves 0 in the word itself), or 0. */
static uint64_t rela_addend(int fd, const Elf64_Phdr *ph, size_t nph, uint64_t rela,
			    uint64_t relasz, uint64_t at)
{
	int64_t off = rela ? vaddr_off(ph, nph, rela, false) : -1;
	Elf64_Rela r[64];

	for (uint64_t done = 0; off >= 0 && done < relasz; done += sizeof(r)) {
		ssize_t n = pread(fd, r, relasz - done < sizeof(r) ? relasz - done : sizeof(r),
				  off + (off_t)done);

		for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof(*r); i++)
			if (r[i].r_offset == at && ELF64_R_TYPE(r[i].r_info) == R_X86_64_RELATIVE)
				return (uint64_t)r[i].r_addend;
		if (n <= 0)
			break;
	}
	return 0;
}

/* The file's first point: a library's (DT_SONAME) DT_INIT or first
 * DT_INIT_ARRAY word, a program's entry. 0, or -ENOENT. */
static int first_point(int fd, uint64_t *vaddr)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	Elf64_Dyn dyn[512];
	uint64_t init = 0, init_array = 0, rela = 0, relasz = 0;
	bool lib = false;
	size_t nph, ndyn = 0;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		return -ENOENT;
	nph = eh.e_phnum < 64 ? eh.e_phnum : 64;
	if (pread(fd, ph, nph * sizeof(*ph), (off_t)eh.e_phoff) != (ssize_t)(nph * sizeof(*ph)))
		return -ENOENT;
	for (size_t i = 0; i < nph; i++)
		if (ph[i].p_type == PT_DYNAMIC) {
			ssize_t n = pread(fd, dyn, ph[i].p_filesz < sizeof(dyn) ? ph[i].p_filesz :
					  sizeof(dyn), (off_t)ph[i].p_offset);

			ndyn = n > 0 ? (size_t)n / sizeof(*dyn) : 0;
		}
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		lib |= dyn[i].d_tag == DT_SONAME;
		if (dyn[i].d_tag == DT_INIT)
			init = dyn[i].d_un.d_ptr;
		if (dyn[i].d_tag == DT_INIT_ARRAY)
			init_array = dyn[i].d_un.d_ptr;
		if (dyn[i].d_tag == DT_RELA)
			rela = dyn[i].d_un.d_ptr;
		if (dyn[i].d_tag == DT_RELASZ)
			relasz = dyn[i].d_un.d_val;
	}
	if (!lib) {
		*vaddr = eh.e_entry;
		return eh.e_entry ? 0 : -ENOENT;
	}
	if (!init && init_array) {
		int64_t off = vaddr_off(ph, nph, init_array, false);

		if (off < 0 || pread(fd, &init, 8, off) != 8)
			init = 0;
		if (!init)
			init = rela_addend(fd, ph, nph, rela, relasz, init_array);
	}
	*vaddr = init;
	return init ? 0 : -ENOENT;
}

/* The file's first point (see the top): 0, or -ENOENT. */
static int gate_point(const char *path, struct gate_point *p)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	int64_t off = -1;
	uint64_t v;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -ENOENT;
	if (!first_point(fd, &v) && pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    pread(fd, ph, (eh.e_phnum < 64 ? eh.e_phnum : 64) * sizeof(*ph),
		  (off_t)eh.e_phoff) > 0)
		off = vaddr_off(ph, eh.e_phnum < 64 ? eh.e_phnum : 64, v, true);
	close(fd);
	if (off < 0)
		return -ENOENT;
	*p = (struct gate_point){v, (uint64_t)off};
	return 0;
}

/* Does a probe's patch in file path move the byte of point p? */
static bool patched_over(struct inj *j, const char *path, const struct gate_point *p)
{
	struct usc_engine *e = &j->base;

	for (size_t i = 0; i < e->nsites; i++) {
		uint64_t r[2][2];
		size_t n;

		if (!e->sites[i]->path || strcmp(e->sites[i]->path, path))
			continue;
		n = e->ops->footprint(e, e->sites[i], r, 2);
		for (size_t k = 0; k < n; k++)
			if (p->vaddr >= r[k][0] && p->vaddr < r[k][1])
				return true;
	}
	return false;
}

static int on_seen(void *ctx, void *data, size_t size)
{
	struct inj_gate *g = ctx;

	if (size >= sizeof(struct gate_seen) && g->nseen < GATE_SEEN)
		memcpy(&g->seen[g->nseen++], data, sizeof(struct gate_seen));
	return g->nseen < GATE_SEEN ? 0 : -1;	/* full: the rest next time */
}

/* A file's point for the gate: 1 with p filled (the janitor told of its
 * uprobe), or 0 (said). */
static int gate_plan(struct inj_gate *g, const char *path, struct gate_point *p)
{
	char off[24];

	if (gate_point(path, p)) {
		log_warn("inject: processes that start %s later are not traced (no entry point, "
			 "DT_INIT or DT_INIT_ARRAY)", path);
		return 0;
	}
	if (patched_over(g->j, path, p)) {
		log_warn("inject: processes that start %s later are not traced (a probe's patch "
			 "covers its first point, 0x%llx)", path, (unsigned long long)p->vaddr);
		return 0;
	}
	snprintf(off, sizeof(off), "%llu", (unsigned long long)p->off);
	engine_undo_add(g->j->base.ctx, USC_UNDO_UPROBE, path, off);
	return 1;
}

/* The uprobes of the gate's points, for every process (perf_event_open of
 * the kernel's uprobe PMU, as libbpf does): made while uscope loads the
 * program, since making one installs its breakpoint in every process that
 * maps the file, which took 20 ms idle and 180-220 ms with the bench's 50
 * busy processes (blocked, not running). Their hits before the program is
 * linked to them do nothing: the walk comes after. */
static void *uprobes_open(void *arg)
{
	struct inj_gate *g = arg;

	for (size_t i = 0; i < g->npoints; i++) {
		struct perf_event_attr a = {.size = sizeof(a), .type = (uint32_t)g->uprobe_type};

		a.config1 = (uint64_t)(uintptr_t)g->points[i].path;
		a.config2 = g->points[i].p.off;
		g->points[i].pfd = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1,
						PERF_FLAG_FD_CLOEXEC);
		if (g->points[i].pfd < 0)
			g->points[i].pfd = -errno;
	}
	return NULL;
}

/* The uprobe PMU's type, or -1 (a kernel without it: libbpf's attach) */
static int uprobe_pmu(void)
{
	char buf[16] = "";
	int fd = open("/sys/bus/event_source/devices/uprobe/type", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n > 0 ? atoi(buf) : -1;
}

/* Point i's uprobe linked to the program: 1, or 0 (said). */
static int gate_link(struct inj_gate *g, size_t i)
{
	struct gate_pt *pt = &g->points[i];
	struct bpf_link *l = NULL;
	int err;

	if (g->uprobe_type < 0) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts);

		l = bpf_program__attach_uprobe_opts(g->skel->progs.gate_hit, -1, pt->path,
						    pt->p.off, &opts);
		err = l ? 0 : -errno;
	} else if (pt->pfd < 0) {
		err = pt->pfd;
	} else {
		l = bpf_program__attach_perf_event(g->skel->progs.gate_hit, pt->pfd);
		err = l ? 0 : -errno;
		if (!l)
			close(pt->pfd);
		pt->pfd = -1;	/* the link's now */
	}
	if (!l) {
		log_warn("inject: processes that start %s later are not traced (a uprobe at "
			 "0x%llx: %s)", pt->path, (unsigned long long)pt->p.vaddr, strerror(-err));
		return 0;
	}
	g->links[g->nlinks++] = l;
	log_debug("inject: gate on %s at 0x%llx", pt->path, (unsigned long long)pt->p.vaddr);
	return 1;
}

/* The sites' files, each once, with their points. */
static void gate_points(struct inj_gate *g)
{
	struct inj *j = g->j;

	for (size_t i = 0; i < j->base.nsites; i++) {
		const char *path = j->base.sites[i]->path;
		size_t k;

		if (!path || g->nfiles == GATE_FILES)
			continue;
		for (k = 0; k < g->nfiles && strcmp(g->files[k], path); k++)
			;
		if (k < g->nfiles)
			continue;
		g->files[g->nfiles++] = path;
		if (gate_plan(g, path, &g->points[g->npoints].p)) {
			g->points[g->npoints].path = path;
			g->points[g->npoints++].pfd = -1;
		}
	}
}

int inj_gate_open(struct inj *j)
{
	libbpf_print_fn_t old = libbpf_set_print(libbpf_quiet);
	struct inj_gate *g = calloc(1, sizeof(*g));
	struct bpf_map_info info = {0};
	uint32_t ilen = sizeof(info), me = (uint32_t)getpid(), go = GATE_GO;
	bool thread = false;
	pthread_t th;
	int on = 0, err = 0;

	if (!g) {
		libbpf_set_print(old);
		return -ENOMEM;
	}
	g->j = j;
	g->epfd = -1;
	j->gate = g;
	gate_points(g);
	g->uprobe_type = g->npoints ? uprobe_pmu() : -1;
	if (g->uprobe_type >= 0 && pthread_create(&th, NULL, uprobes_open, g) == 0)
		thread = true;
	else if (g->uprobe_type >= 0)
		uprobes_open(g);
	g->skel = inj_gate_bpf__open();
	err = g->skel ? inj_gate_btf_offsets(&g->skel->rodata->task_signal_off,
					     &g->skel->rodata->signal_tty_off) : -errno;
	if (!err) {
		log_debug("inject: gate: a task's signal_struct at +%u, its tty at +%u",
			  g->skel->rodata->task_signal_off, g->skel->rodata->signal_tty_off);
		/* allocated as it fills, but where that warns (engine/kfeat.h) */
		if (!kfeat_get()->mem_alloc)
			bpf_map__set_map_flags(g->skel->maps.procs, 0);
		if (inj_gate_bpf__load(g->skel))
			err = -errno;
	}
	if (err) {
		inj_gate_bpf__destroy(g->skel);
		g->skel = NULL;
		log_warn("inject: processes started later are not traced (the gate's bpf program "
			 "does not load: %s)", strerror(-err));
		goto out;
	}
	g->procs_fd = bpf_map__fd(g->skel->maps.procs);
	bpf_map_update_elem(g->procs_fd, &me, &go, BPF_ANY);	/* uscope itself */
	g->rb = ring_buffer__new(bpf_map__fd(g->skel->maps.seen), on_seen, g, NULL);
	if (!g->rb) {
		err = -errno;
		goto out;
	}
	/* the janitor holds the map too, before any process is stopped: after
	 * a kill -9 of uscope it lets the stopped ones go */
	if (bpf_obj_get_info_by_fd(g->procs_fd, &info, &ilen) == 0) {
		char id[48];

		snprintf(id, sizeof(id), "%u %u %u", info.id, GATE_STOPPED, GATE_GO);
		engine_undo_add(j->base.ctx, USC_UNDO_GATE, "", id);
	}
	if (thread)
		pthread_join(th, NULL);
	thread = false;
	for (size_t i = 0; i < g->npoints; i++)
		on += gate_link(g, i);
out:
	if (thread)
		pthread_join(th, NULL);
	for (size_t i = 0; i < g->npoints; i++)
		if (g->points[i].pfd >= 0)	/* (not linked: the program did not load) */
			close(g->points[i].pfd);
	libbpf_set_print(old);
	if (!on)
		inj_gate_close(j);
	return err == -ENOMEM ? err : 0;
}

void inj_gate_go(struct inj *j, pid_t pid)
{
	uint32_t key = (uint32_t)pid, v = GATE_GO;

	if (j->gate)
		bpf_map_update_elem(j->gate->procs_fd, &key, &v, BPF_ANY);
}

void inj_gate_full(struct inj *j)
{
	if (j->gate)
		__atomic_store_n(&j->gate->skel->bss->full, 1, __ATOMIC_RELAXED);
}

void inj_gate_forget(struct inj *j, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	if (j->gate)
		bpf_map_delete_elem(j->gate->procs_fd, &key);
}

size_t inj_gate_poll(struct inj *j, struct gate_seen *out, size_t max)
{
	struct inj_gate *g = j->gate;
	size_t n;

	if (!g)
		return 0;
	g->nseen = 0;
	ring_buffer__consume(g->rb);
	n = g->nseen < max ? g->nseen : max;
	memcpy(out, g->seen, n * sizeof(*out));
	if (g->skel->bss->missed != g->missed_said) {
		log_warn("inject: %llu processes started while the gate's memory was full went "
			 "untraced", (unsigned long long)(g->skel->bss->missed - g->missed_said));
		g->missed_said = g->skel->bss->missed;
	}
	return n;
}

int inj_gate_wait_fd(struct inj *j, int bell)
{
	struct inj_gate *g = j->gate;
	struct epoll_event ev = {.events = EPOLLIN};

	if (g->epfd >= 0)
		return g->epfd;
	g->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g->epfd < 0)
		return bell;
	if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, bell, &ev) ||
	    epoll_ctl(g->epfd, EPOLL_CTL_ADD, bpf_map__fd(g->skel->maps.seen), &ev)) {
		close(g->epfd);
		g->epfd = -1;
		return bell;
	}
	return g->epfd;
}

void inj_gate_close(struct inj *j)
{
	struct inj_gate *g = j->gate;
	uint32_t key, next;
	bool first = true;

	if (!g)
		return;
	/* the breakpoints first: no process is stopped after; then every one
	 * the gate stopped and uscope did not let go (told, not taken yet)
	 * goes on */
	for (size_t i = 0; i < g->nlinks; i++)
		bpf_link__destroy(g->links[i]);
	if (g->skel)
		while (bpf_map_get_next_key(g->procs_fd, first ? NULL : &key, &next) == 0) {
			uint32_t v = 0, go = GATE_GO;

			if (bpf_map_lookup_elem(g->procs_fd, &next, &v) == 0 && v == GATE_STOPPED) {
				bpf_map_update_elem(g->procs_fd, &next, &go, BPF_ANY);
				kill((pid_t)next, SIGCONT);
			}
			key = next;
			first = false;
		}
	if (g->epfd >= 0)
		close(g->epfd);
	ring_buffer__free(g->rb);
	inj_gate_bpf__destroy(g->skel);
	free(g);
	j->gate = NULL;
}
