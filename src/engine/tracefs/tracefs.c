/* The tracefs engine: the kernel's uprobe_events.
 *
 * Each session owns one tracefs instance and one event group, both named
 * uscope_<pid>, so sessions and other tracefs users never see each other's
 * events. Events are read in binary form from the instance's per-CPU
 * trace_pipe_raw and decoded with libtraceevent. Each instance and event
 * is told to the session's janitor before it is made (engine.h, usc_undo):
 * a session that was SIGKILLed has them removed by its janitor as it dies.
 * Should the janitor be gone too, the next session removes them
 * (tracefseng_clean_stale), after checking that their owner is gone. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event-parse.h>
#include <kbuffer.h>
#include <tracefs.h>

#include "core/log.h"
#include "core/grow.h"
#include "core/proc.h"
#include "engine/engine.h"
#include "engine/tracefs/tracefs_lower.h"
#include "engine/tracefs/tracefs_pids.h"

#define TRACEFSENG_PREFIX "uscope_"
#define TRACEFSENG_BUFFER_KB 4096	/* per CPU */

struct tracefseng_site {
	bool created;
	int undo;		/* the janitor's handle (engine.h, usc_undo) */
	bool filter_here;	/* the kernel refused its filter: filtered when decoded */
	struct tep_event *ev;
	struct tep_format_field *f_ip, *f_func;
	struct tep_format_field *f_ret;		/* return sites: the return address */
	struct tep_format_field *f_arg[USC_MAX_ARGS];
	/* a string's pointer, to tell NULL from a fault (tracefs_string_ptr) */
	struct tep_format_field *f_ptr[USC_MAX_ARGS];
};

struct tracefseng_task {
	int tid, tgid;		/* tgid 0: not known yet */
	int8_t ours;		/* the -p filter's verdict */
	char comm[24];		/* "" until the first event of the task */
};

struct tracefseng_rec {
	uint64_t ts;
	uint32_t off, size;
	int cpu;
};

struct tracefseng {
	struct usc_engine base;
	char name[32];
	struct tracefs_instance *inst;
	int undo_inst;		/* the janitor's handle for the instance */
	struct tracefseng_site *ts;
	size_t nsites;
	struct usc_site_stats *stats;
	struct tep_handle *tep;
	struct kbuffer *kbuf;
	int *site_of_id;
	int max_id;
	/* task:task_newtask tells each new task's thread group and name,
	 * sched:sched_process_exec its new name */
	struct tep_event *newtask, *exec;
	struct tep_format_field *nt_pid, *nt_flags, *nt_comm, *ex_pid, *ex_file;
	int ncpus;
	int *cpu_fd;
	char *page;
	size_t page_size;
	pid_t pid;		/* -p: report this process's threads only */
	bool filter_process;
	bool live, removed;
	/* task cache: open addressing on tid */
	struct tracefseng_task *tasks;
	size_t ntasks, task_cap;
	/* one drain's records, sorted by time across CPUs */
	struct tracefseng_rec *recs;
	size_t nrecs, rec_cap;
	char *arena;
	size_t arena_len, arena_cap;
	struct usc_value vals[USC_MAX_ARGS];
};

static struct tracefseng *tracefseng_of(struct usc_engine *e)
{
	return container_of(e, struct tracefseng, base);
}

/* ---- stale sessions ----------------------------------------------------- */

/* A session is alive while a uscope process holds its pid. */
static bool tracefseng_owner_alive(const char *name)
{
	char path[64], comm[32] = "";
	long pid;
	char *end;
	FILE *f;

	if (strncmp(name, TRACEFSENG_PREFIX, strlen(TRACEFSENG_PREFIX)))
		return true;	/* not ours */
	pid = strtol(name + strlen(TRACEFSENG_PREFIX), &end, 10);
	if (*end || pid <= 0)
		return true;
	if (pid == getpid())
		return false;	/* a previous life of our pid */
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	return !strcmp(comm, "uscope");
}

struct name_list {
	char **v;
	size_t n;
};

static int collect_instance(const char *name, void *ctx)
{
	struct name_list *l = ctx;
	char **v;

	if (strncmp(name, TRACEFSENG_PREFIX, strlen(TRACEFSENG_PREFIX)) || tracefseng_owner_alive(name))
		return 0;
	v = realloc(l->v, (l->n + 1) * sizeof(*v));
	if (!v)
		return 0;
	l->v = v;
	l->v[l->n] = strdup(name);
	if (l->v[l->n])
		l->n++;
	return 0;
}

static void tracefseng_clean_stale(void)
{
	struct name_list l = {0};
	struct tracefs_dynevent **all;

	tracefs_instances_walk(collect_instance, &l);
	for (size_t i = 0; i < l.n; i++) {
		struct tracefs_instance *in = tracefs_instance_alloc(NULL, l.v[i]);

		if (in) {
			if (tracefs_instance_destroy(in) == 0)
				log_info("removed the tracefs instance %s of a session that died",
					 l.v[i]);
			tracefs_instance_free(in);
		}
		free(l.v[i]);
	}
	free(l.v);

	all = tracefs_dynevent_get_all(TRACEFS_DYNEVENT_UPROBE | TRACEFS_DYNEVENT_URETPROBE,
				       NULL);
	for (size_t i = 0; all && all[i]; i++) {
		char *sys = NULL, *ev = NULL;

		tracefs_dynevent_info(all[i], &sys, &ev, NULL, NULL, NULL);
		if (sys && !strncmp(sys, TRACEFSENG_PREFIX, strlen(TRACEFSENG_PREFIX)) &&
		    !tracefseng_owner_alive(sys)) {
			if (tracefs_dynevent_destroy(all[i], true) == 0)
				log_debug("removed stale uprobe %s/%s", sys, ev);
		}
		free(sys);
		free(ev);
	}
	tracefs_dynevent_list_free(all);
}

/* ---- create ------------------------------------------------------------- */

static int tracefseng_create(const struct usc_engine_ctx *s, struct usc_engine **out, char *why,
			     size_t len)
{
	const char *dir = tracefs_tracing_dir();
	char path[4096];
	struct tracefseng *t;

	if (!dir) {
		if (geteuid() != 0) {
			snprintf(why, len, "the tracefs engine needs root: tracefs is not mounted, "
				 "and only root can mount it (try: sudo uscope ...)");
			return -EPERM;
		}
		snprintf(why, len, "no tracefs: it is not mounted and could not be mounted at "
			 "/sys/kernel/tracing (is CONFIG_TRACING enabled?)");
		return -ENODEV;
	}
	snprintf(path, sizeof(path), "%s/uprobe_events", dir);
	if (access(path, F_OK)) {
		if (errno == EACCES || geteuid() != 0) {
			snprintf(why, len, "the tracefs engine needs root: no access to %s (try: "
				 "sudo uscope ...)", dir);
			return -EPERM;
		}
		snprintf(why, len, "the kernel has no uprobe events: %s is missing "
			 "(CONFIG_UPROBE_EVENTS is needed)", path);
		return -ENOTSUP;
	}
	if (access(path, W_OK)) {
		snprintf(why, len, "the tracefs engine needs root: %s is not writable (try: sudo "
			 "uscope ...)", path);
		return -EPERM;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->base.ops = &tracefs_engine_ops;
	t->base.ctx = s;
	snprintf(t->name, sizeof(t->name), TRACEFSENG_PREFIX "%d", (int)getpid());
	*out = &t->base;
	return 0;
}

/* What uprobe_events can fetch: everything but two registers added (a USDT
 * base+index operand), within the length the kernel takes. */
static int tracefseng_can_place(struct usc_engine *e, const struct usc_site *site, char *why,
			 size_t len)
{
	char args[8192];
	int ret;

	(void)e;
	if (site_has_ustack(site)) {
		/* The kernel's user stack trace (options/userstacktrace) follows
		 * frame pointers, which Debian builds its code without (libc,
		 * python3): it would give one frame or wrong ones. The other
		 * engines copy the stack and uscope unwinds it with the CFI. */
		snprintf(why, len, "$ustack: the kernel's user stack trace walks frame pointers, "
			 "which most code is built without; the inject and bpf engines unwind "
			 "with the CFI");
		return -ENOTSUP;
	}
	if (site_has_pystack(site)) {
		snprintf(why, len, "$pystack: CPython's frames are walked where the probe runs, "
			 "which uprobe_events cannot; the inject and bpf engines do");
		return -ENOTSUP;
	}
	if (site->python) {
		snprintf(why, len, "py: probes run in the process (a profile function of "
			 "CPython's): the inject engine only");
		return -ENOTSUP;
	}
	ret = tracefs_lower_args(site->args, site->nargs, (int64_t)(site->offset - site->vaddr),
				 site->ret_site, args, sizeof(args));
	if (ret == -ENOTSUP)
		snprintf(why, len, "uprobe_events cannot compute an argument (it adds two "
			 "registers: a USDT base+index operand)");
	else if (ret)
		snprintf(why, len, "the fetch arguments are too long for uprobe_events");
	return ret ? -ENOTSUP : 0;
}

/* ---- attach ------------------------------------------------------------------ */

static void kernel_error(const char *what, const char *event)
{
	char *msg = tracefs_error_last(NULL);

	if (msg && *msg) {
		/* the kernel's error_log entry: keep its first line */
		msg[strcspn(msg, "\n")] = 0;
		log_error("the kernel refused %s %s: %s", what, event, msg);
	} else {
		log_error("the kernel refused %s %s: %s", what, event, strerror(errno));
	}
	free(msg);
}

/* One event's format (events/SYSTEM/EVENT/format) into tep: 0, or -1 when
 * the kernel has no such event or its format does not parse. */
static int load_format(struct tep_handle *tep, const char *system, const char *event)
{
	int size = 0;
	char *buf = tracefs_event_file_read(NULL, system, event, "format", &size);
	int ret = buf && size > 0 ?
		  (tep_parse_event(tep, buf, (unsigned long)size, system) ? -1 : 0) : -1;

	free(buf);
	return ret;
}

/* A tep with what decoding needs and nothing more: the ring buffer's page
 * header, the formats of our own events, of task_newtask and of
 * sched_process_exec. (tracefs_local_events_system would load every event
 * of those systems, /proc/kallsyms whole and the printk formats: none of
 * which a uprobe event needs, and kallsyms costs 0.3 s, 7 s under ASan.) */
static struct tep_handle *load_formats(struct tracefseng *t)
{
	struct usc_engine *e = &t->base;
	struct tep_handle *tep = tep_alloc();
	int size = 0;
	char *hp;

	if (!tep)
		return NULL;
	hp = tracefs_instance_file_read(NULL, "events/header_page", &size);
	if (!hp || size <= 0 || tep_parse_header_page(tep, hp, (unsigned long)size, sizeof(long))) {
		free(hp);
		tep_free(tep);
		return NULL;
	}
	free(hp);
	tep_set_long_size(tep, tep_get_header_page_size(tep));
	tep_set_cpus(tep, (int)sysconf(_SC_NPROCESSORS_CONF));
	for (size_t i = 0; i < e->nsites; i++)
		load_format(tep, t->name, e->sites[i]->event);	/* a missing one: said below */
	load_format(tep, "task", "task_newtask");
	load_format(tep, "sched", "sched_process_exec");
	return tep;
}

static int tracefseng_setup_decode(struct tracefseng *t)
{
	struct usc_engine *e = &t->base;
	char *sz;

	t->tep = load_formats(t);
	if (!t->tep) {
		log_error("cannot load the formats of the events of %s", t->name);
		return -EIO;
	}
	t->kbuf = tep_kbuffer(t->tep);
	if (!t->kbuf)
		return -ENOMEM;
	t->max_id = 0;
	for (size_t i = 0; i < e->nsites; i++) {
		struct tracefseng_site *ts = &t->ts[i];
		const struct usc_site *site = e->sites[i];

		ts->ev = tep_find_event_by_name(t->tep, t->name, site->event);
		if (!ts->ev) {
			log_error("the kernel made no format for event %s", site->event);
			return -EIO;
		}
		if (ts->ev->id > t->max_id)
			t->max_id = ts->ev->id;
		bool uret = site->is_return && !site->ret_site;

		ts->f_ip = tep_find_field(ts->ev, uret ? "__probe_ret_ip" : "__probe_ip");
		ts->f_func = uret ? tep_find_field(ts->ev, "__probe_func") : NULL;
		ts->f_ret = site->ret_site ? tep_find_field(ts->ev, "__usc_ret") : NULL;
		for (unsigned a = 0; a < site->nargs; a++) {
			ts->f_arg[a] = tep_find_field(ts->ev, site->args[a].name);
			if (!ts->f_arg[a]) {
				log_error("event %s has no field %s", site->event,
					  site->args[a].name);
				return -EIO;
			}
			if (fetch_type_is_string(site->args[a].type)) {
				char name[32];

				snprintf(name, sizeof(name), TRACEFS_NULL_FIELD "%u", a);
				ts->f_ptr[a] = tep_find_field(ts->ev, name);
			}
		}
	}
	t->newtask = tep_find_event_by_name(t->tep, "task", "task_newtask");
	if (t->newtask) {
		t->nt_pid = tep_find_field(t->newtask, "pid");
		t->nt_flags = tep_find_field(t->newtask, "clone_flags");
		t->nt_comm = tep_find_field(t->newtask, "comm");
		if (!t->nt_pid || !t->nt_flags)
			t->newtask = NULL;
		else if (t->newtask->id > t->max_id)
			t->max_id = t->newtask->id;
	}
	t->exec = tep_find_event_by_name(t->tep, "sched", "sched_process_exec");
	if (t->exec) {
		t->ex_pid = tep_find_field(t->exec, "pid");
		t->ex_file = tep_find_field(t->exec, "filename");
		if (!t->ex_pid || !t->ex_file || !(t->ex_file->flags & TEP_FIELD_IS_DYNAMIC))
			t->exec = NULL;
		else if (t->exec->id > t->max_id)
			t->max_id = t->exec->id;
	}
	t->site_of_id = malloc((size_t)(t->max_id + 1) * sizeof(int));
	if (!t->site_of_id)
		return -ENOMEM;
	for (int i = 0; i <= t->max_id; i++)
		t->site_of_id[i] = -1;
	for (size_t i = 0; i < e->nsites; i++)
		t->site_of_id[t->ts[i].ev->id] = (int)i;

	t->page_size = (size_t)getpagesize();
	sz = tracefs_instance_file_read(t->inst, "buffer_subbuf_size_kb", NULL);
	if (sz) {
		long kb = strtol(sz, NULL, 10);

		if (kb > 0)
			t->page_size = (size_t)kb * 1024;
		free(sz);
	}
	t->page = malloc(t->page_size);
	if (!t->page)
		return -ENOMEM;
	t->ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	t->cpu_fd = malloc((size_t)t->ncpus * sizeof(int));
	if (!t->cpu_fd)
		return -ENOMEM;
	for (int c = 0; c < t->ncpus; c++) {
		char file[64];
		char *p;

		snprintf(file, sizeof(file), "per_cpu/cpu%d/trace_pipe_raw", c);
		p = tracefs_instance_get_file(t->inst, file);
		t->cpu_fd[c] = p ? open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
		tracefs_put_tracing_file(p);
	}
	return 0;
}

/* Filters: the kernel's event filter (ftrace's syntax) drops what fails
 * before it reaches the ring buffer. One it cannot say ($pid, a quote in a
 * string) or refuses is applied here as events are decoded. */
static bool tracefseng_filters(struct usc_engine *e, const struct usc_site *site)
{
	(void)e;
	(void)site;
	return true;	/* in the kernel, or as events are decoded */
}

static void set_filter(struct tracefseng *t, size_t i)
{
	const struct usc_site *site = t->base.sites[i];
	char text[4096], file[256];
	int ret = filter_render_ftrace(&site->filter, site->args, text, sizeof(text));

	if (!ret) {
		snprintf(file, sizeof(file), "events/%s/%s/filter", t->name, site->event);
		if (tracefs_instance_file_write(t->inst, file, text) < 0)
			ret = -EINVAL;
	}
	t->ts[i].filter_here = ret != 0;
	log_info("%s at 0x%llx: filtered %s%s%s", site->label, (unsigned long long)site->vaddr,
		 ret ? "by uscope as its events are read" : "by the kernel: ", ret ? "" : text,
		 ret == -EINVAL ? " (the kernel refused the filter)" :
		 ret ? " (the kernel's filters cannot say it)" : "");
}

static int tracefseng_attach(struct usc_engine *e)
{
	struct tracefseng *t = tracefseng_of(e);
	char args[8192], ptrs[4096], ref[32], undo[160], events[4096], *cmd;
	int ret;

	tracefseng_clean_stale();
	t->nsites = e->nsites;
	t->ts = calloc(e->nsites ? e->nsites : 1, sizeof(*t->ts));
	t->stats = calloc(e->nsites ? e->nsites : 1, sizeof(*t->stats));
	if (!t->ts || !t->stats)
		return -ENOMEM;
	/* what the janitor removes if uscope dies: each thing told before
	 * it is made */
	snprintf(events, sizeof(events), "%s/instances/%s", tracefs_tracing_dir(), t->name);
	t->undo_inst = engine_undo_add(e->ctx, USC_UNDO_RMDIR, events, NULL);
	snprintf(events, sizeof(events), "%s/uprobe_events", tracefs_tracing_dir());
	t->inst = tracefs_instance_create(t->name);
	if (!t->inst) {
		int err = errno ? errno : EIO;

		log_error("cannot create the tracefs instance %s: %s", t->name, strerror(err));
		return -err;
	}
	for (size_t i = 0; i < e->nsites; i++) {
		const struct usc_site *site = e->sites[i];

		ret = tracefs_lower_args(site->args, site->nargs,
					 (int64_t)(site->offset - site->vaddr), site->ret_site, args,
					 sizeof(args));
		if (!ret)
			ret = tracefs_lower_string_ptrs(site->args, site->nargs,
							(int64_t)(site->offset - site->vaddr),
							site->ret_site, ptrs, sizeof(ptrs));
		if (ret) {
			log_error("%s: the fetch arguments do not fit uprobe_events", site->spec->text);
			return ret;
		}
		/* PATH:OFFSET(REF_CTR_OFFSET): the kernel raises the USDT
		 * semaphore while the probe is registered, in every process
		 * that maps the file, and lowers it afterwards. */
		ref[0] = 0;
		if (site->ref_ctr_offset)
			snprintf(ref, sizeof(ref), "(0x%llx)",
				 (unsigned long long)site->ref_ctr_offset);
		/* A return site is an entry-style probe on a ret or tail-call
		 * jmp: the return address is the word at the stack pointer. */
		if (asprintf(&cmd, "%c:%s/%s %s:0x%llx%s%s%s%s%s%s\n",
			     site->is_return && !site->ret_site ? 'r' : 'p', t->name, site->event,
			     site->path, (unsigned long long)site->offset, ref,
			     site->ret_site ? " __usc_ret=+0(%sp):x64" : "", args[0] ? " " : "",
			     args, ptrs[0] ? " " : "", ptrs) < 0)
			return -ENOMEM;
		snprintf(undo, sizeof(undo), "%llu", (unsigned long long)site->offset);
		engine_undo_add(e->ctx, USC_UNDO_UPROBE, site->path, undo);
		snprintf(undo, sizeof(undo), "-:%s/%s\n", t->name, site->event);
		t->ts[i].undo = engine_undo_add(e->ctx, USC_UNDO_WRITE, events, undo);
		ret = tracefs_instance_file_append(NULL, "uprobe_events", cmd);
		free(cmd);
		if (ret < 0) {
			int err = errno ? errno : EINVAL;

			engine_undo_done(e->ctx, t->ts[i].undo);	/* not made */
			kernel_error("the probe", site->event);
			return -err;
		}
		t->ts[i].created = true;
		if (site->filter.n)
			set_filter(t, i);
	}

	/* Session settings, all on our own instance. Timestamps use
	 * CLOCK_MONOTONIC so every engine reports the same clock. New events
	 * are dropped, not old ones overwritten, when the consumer falls
	 * behind; the kernel counts them. */
	tracefs_instance_file_write(t->inst, "trace_clock", "mono");
	tracefs_option_disable(t->inst, TRACEFS_OPTION_OVERWRITE);
	tracefs_instance_set_buffer_size(t->inst, TRACEFSENG_BUFFER_KB, -1);
	return tracefseng_setup_decode(t);
}

/* ---- start ---------------------------------------------------------------------- */

static struct tracefseng_task *task_get(struct tracefseng *t, int tid);

/* tracefs_pids_filter's: each task born while the filter was made, known
 * by its process now (one that exits before its events are read is still
 * named right) */
static void learn_task(int tid, void *ctx)
{
	task_get(ctx, tid);
}

static int tracefseng_start(struct usc_engine *e, pid_t pid, bool follow_children)
{
	struct tracefseng *t = tracefseng_of(e);
	int ret;

	if (pid > 0) {
		/* set_event_pid holds task ids; event-fork adds the tasks they
		 * create (threads and processes) as they are created. */
		t->pid = pid;
		t->filter_process = !follow_children;
		tracefs_option_enable(t->inst, TRACEFS_OPTION_EVENT_FORK);
		ret = tracefs_pids_filter(t->inst, pid, follow_children &&
					  e->ctx->target->kind == USC_TARGET_PID, learn_task, t);
		if (ret) {
			log_error("cannot filter on process %d: %s", (int)pid,
				  ret == -ESRCH ? "it has exited" : "set_event_pid failed");
			return ret;
		}
	}
	/* Tasks created from now on announce their thread group; a thread
	 * that exits before its events are read is still attributed right. */
	if (t->newtask && tracefs_event_enable(t->inst, "task", "task_newtask"))
		t->newtask = NULL;
	if (t->exec && tracefs_event_enable(t->inst, "sched", "sched_process_exec"))
		t->exec = NULL;
	/* Counting system-wide: uprobe_profile counts every hit before the
	 * event filter runs, so a filter that drops everything keeps the ring
	 * buffer out of it. */
	if (e->ctx->set->count_only && !pid) {
		char file[96];

		snprintf(file, sizeof(file), "events/%s/filter", t->name);
		if (tracefs_instance_file_write(t->inst, file, "common_pid < 0") < 0)
			log_debug("cannot filter %s: its events are recorded", t->name);
	}
	if (tracefs_event_enable(t->inst, t->name, NULL)) {
		kernel_error("to enable the events of", t->name);
		return -EIO;
	}
	t->live = true;
	return 0;
}

/* ---- tasks ---------------------------------------------------------------------- */

static void task_read(struct tracefseng *t, struct tracefseng_task *tk)
{
	struct proc_status st;
	int tgid = 0;

	if (!proc_status_read(tk->tid, &st)) {
		snprintf(tk->comm, sizeof(tk->comm), "%.23s", st.name);
		tgid = st.tgid;
	}
	if (!tk->comm[0]) {
		/* Gone already: the kernel's saved comm, as ftrace shows it. It
		 * records them at context switches while events are enabled. */
		const char *c = tep_data_comm_from_pid(t->tep, tk->tid);

		if ((!c || !strcmp(c, "<...>")) && tracefs_load_cmdlines(NULL, t->tep) == 0)
			c = tep_data_comm_from_pid(t->tep, tk->tid);

		snprintf(tk->comm, sizeof(tk->comm), "%s", c && strcmp(c, "<...>") ? c : "<...>");
	}
	if (!tk->tgid)		/* task_newtask did not tell */
		tk->tgid = tgid ? tgid : t->pid ? t->pid : tk->tid;
	/* -p: the process's threads only (the kernel's filter also admits
	 * the processes it forks) */
	tk->ours = !t->filter_process || tk->tgid == t->pid;
}

static struct tracefseng_task *task_slot(struct tracefseng *t, int tid)
{
	size_t i;

	if (t->ntasks * 2 >= t->task_cap) {
		size_t cap = t->task_cap ? t->task_cap * 2 : 256;
		struct tracefseng_task *n = calloc(cap, sizeof(*n));

		if (!n)
			return NULL;
		for (size_t k = 0; k < t->task_cap; k++) {
			if (!t->tasks[k].tid)
				continue;
			for (i = (size_t)t->tasks[k].tid % cap; n[i].tid; i = (i + 1) % cap)
				;
			n[i] = t->tasks[k];
		}
		free(t->tasks);
		t->tasks = n;
		t->task_cap = cap;
	}
	for (i = (size_t)tid % t->task_cap; t->tasks[i].tid; i = (i + 1) % t->task_cap)
		if (t->tasks[i].tid == tid)
			return &t->tasks[i];
	t->tasks[i].tid = tid;
	t->ntasks++;
	return &t->tasks[i];
}

static struct tracefseng_task *task_get(struct tracefseng *t, int tid)
{
	struct tracefseng_task *tk = task_slot(t, tid);

	if (tk && !tk->comm[0])
		task_read(t, tk);
	return tk;
}

#define USC_CLONE_THREAD 0x00010000

/* task_newtask, recorded in the parent: a thread joins its parent's group,
 * a process starts its own. A reused tid is overwritten. */
static int task_learn(struct tracefseng *t, struct tep_record *rec)
{
	int parent = tep_data_pid(t->tep, rec);
	int child = (int)tep_read_number(t->tep, (char *)rec->data + t->nt_pid->offset,
					 t->nt_pid->size);
	unsigned long long flags = tep_read_number(t->tep, (char *)rec->data + t->nt_flags->offset,
						   t->nt_flags->size);
	struct tracefseng_task *pt, *ct;
	int tgid;

	if (flags & USC_CLONE_THREAD) {
		pt = task_slot(t, parent);
		if (!pt)
			return -ENOMEM;
		if (!pt->tgid)
			task_read(t, pt);
		tgid = pt->tgid;
	} else {
		tgid = child;
	}
	ct = task_slot(t, child);
	if (!ct)
		return -ENOMEM;
	memset(ct, 0, sizeof(*ct));
	ct->tid = child;
	ct->tgid = tgid;
	if (t->nt_comm && t->nt_comm->size > 0) {
		size_t n = (size_t)t->nt_comm->size < sizeof(ct->comm) - 1 ?
			   (size_t)t->nt_comm->size : sizeof(ct->comm) - 1;

		memcpy(ct->comm, (char *)rec->data + t->nt_comm->offset, n);
		ct->comm[n] = 0;
		if (!t->filter_process)
			ct->ours = 1;
		else
			ct->ours = ct->tgid == t->pid;
	}
	return 0;
}

/* sched_process_exec: the task takes the new program's name (the kernel
 * sets comm from the file's base name, 15 bytes at most) and leads its
 * thread group. */
static int task_exec(struct tracefseng *t, struct tep_record *rec)
{
	const char *data = rec->data;
	int pid = (int)tep_read_number(t->tep, data + t->ex_pid->offset, t->ex_pid->size);
	unsigned long long dl = tep_read_number(t->tep, data + t->ex_file->offset, 4);
	unsigned off = dl & 0xffff, len = (unsigned)(dl >> 16);
	struct tracefseng_task *tk = task_slot(t, pid);
	const char *base, *file;

	if (!tk)
		return -ENOMEM;
	if (!len || off + len > (unsigned)rec->size)
		return 0;
	file = data + off;
	base = memrchr(file, '/', len);
	base = base ? base + 1 : file;
	snprintf(tk->comm, sizeof(tk->comm), "%.15s", base);
	tk->tgid = pid;
	tk->ours = !t->filter_process || pid == t->pid;
	return 0;
}

/* ---- reading -------------------------------------------------------------------- */

static int rec_push(struct tracefseng *t, int cpu, uint64_t ts, const void *data, uint32_t size)
{
	if (core_reserve(t->recs, t->rec_cap, t->nrecs + 1, 1024))
		return -ENOMEM;
	if (core_reserve(t->arena, t->arena_cap, t->arena_len + size, 65536))
		return -ENOMEM;
	memcpy(t->arena + t->arena_len, data, size);
	t->recs[t->nrecs++] = (struct tracefseng_rec){ts, (uint32_t)t->arena_len, size, cpu};
	t->arena_len += size;
	return 0;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct tracefseng_rec *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->cpu - y->cpu;
}

static int tracefseng_decode(struct tracefseng *t, const struct tracefseng_rec *r, usc_event_fn fn,
			     void *ctx)
{
	char *data = t->arena + r->off;
	struct tep_record rec = {.ts = r->ts, .cpu = r->cpu, .data = data, .size = (int)r->size};
	int id = tep_data_type(t->tep, &rec), idx;
	const struct usc_site *site;
	struct tracefseng_site *ts;
	struct tracefseng_task *tk;
	struct usc_event ev;

	if (t->newtask && id == t->newtask->id) {
		int ret = task_learn(t, &rec);

		return ret < 0 ? ret : 1;	/* not an event of ours: nothing delivered */
	}
	if (t->exec && id == t->exec->id) {
		int ret = task_exec(t, &rec);

		return ret < 0 ? ret : 1;
	}
	if (id < 0 || id > t->max_id || (idx = t->site_of_id[id]) < 0)
		return 1;
	site = t->base.sites[idx];
	ts = &t->ts[idx];
	tk = task_get(t, tep_data_pid(t->tep, &rec));
	if (!tk)
		return -ENOMEM;
	if (!tk->ours)
		return 1;

	memset(&ev, 0, sizeof(ev));
	ev.time_ns = r->ts;
	ev.cpu = r->cpu;
	ev.tid = tk->tid;
	ev.pid = tk->tgid;
	ev.comm = tk->comm;
	ev.site = site;
	if (ts->f_ip)
		ev.ip = tep_read_number(t->tep, data + ts->f_ip->offset, ts->f_ip->size);
	if (ts->f_func)
		ev.func = tep_read_number(t->tep, data + ts->f_func->offset, ts->f_func->size);
	if (ts->f_ret) {
		/* the probe hit the ret; report where it returns to and the
		 * function's runtime address, as a uretprobe would */
		ev.func = ev.ip - (site->vaddr - site->func_vaddr);
		ev.ip = tep_read_number(t->tep, data + ts->f_ret->offset, ts->f_ret->size);
	}
	for (unsigned a = 0; a < site->nargs; a++) {
		const struct tep_format_field *f = ts->f_arg[a];
		struct usc_value *v = &t->vals[a];

		memset(v, 0, sizeof(*v));
		if (f->flags & TEP_FIELD_IS_DYNAMIC) {
			unsigned long long dl = tep_read_number(t->tep, data + f->offset, 4);
			unsigned off = dl & 0xffff, len = (unsigned)(dl >> 16);

			/* the kernel stores a string that faulted with length 0;
			 * its pointer, where we have it, says whether it was NULL */
			if (len == 0 || off + len > r->size) {
				v->kind = USC_V_FAULT;
				if (len == 0 && ts->f_ptr[a] &&
				    !tep_read_number(t->tep, data + ts->f_ptr[a]->offset,
						     ts->f_ptr[a]->size))
					v->kind = USC_V_NULL;
				continue;
			}
			v->kind = USC_V_STR;
			v->str = data + off;
			v->len = len - (data[off + len - 1] == 0);
		} else if (f->flags & TEP_FIELD_IS_ARRAY) {
			/* counted bytes (a Go string, a slice's first elements),
			 * read as TYPE[N]: as many as the length before them
			 * says (times the element's size) */
			const struct usc_fetcharg *fa = &site->args[a];
			const struct fetch_insn *st = fa->ninsn >= 2 ? &fa->insn[fa->ninsn - 2] : NULL;

			v->kind = USC_V_STR;
			v->str = data + f->offset;
			v->len = f->size;
			if (st && st->op == FOP_ST_BYTES && a && t->vals[a - 1].kind == USC_V_INT)
				v->len = fetch_bytes_len(st, t->vals[a - 1].u, f->size);
		} else {
			v->kind = USC_V_INT;
			v->u = tep_read_number(t->tep, data + f->offset, f->size);
		}
		/* $pid, $tid, $cpu: the kernel fetched a 0 in their place; the
		 * event's header has them */
		switch (site->args[a].insn[0].op) {
		case FOP_PID:
			v->u = (uint32_t)ev.pid;
			break;
		case FOP_TID:
			v->u = (uint32_t)ev.tid;
			break;
		case FOP_CPU:
			v->u = (uint32_t)ev.cpu;
			break;
		default:
			break;
		}
	}
	ev.nvals = site->nargs;
	ev.vals = t->vals;
	if (ts->filter_here && !engine_filter_pass(&ev))
		return 1;
	t->stats[idx].events++;
	/* 0: delivered; 2: the consumer asked to stop */
	return fn(&ev, ctx) ? 2 : 0;
}

static int tracefseng_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct tracefseng *t = tracefseng_of(e);
	int delivered = 0, ret = 0;

	(void)timeout_ms;	/* trace_pipe_raw wakes readers by buffer_percent, not per
				 * event: the caller paces the drains instead */
	if (!t->tep)
		return 0;
	t->nrecs = 0;
	t->arena_len = 0;
	for (int c = 0; c < t->ncpus; c++) {
		/* bound one drain so a flood cannot starve the caller's loop */
		for (int pages = 0; t->cpu_fd[c] >= 0 && pages < 256; pages++) {
			ssize_t n = read(t->cpu_fd[c], t->page, t->page_size);
			unsigned long long ts;
			void *d;

			if (n <= 0)
				break;
			if (kbuffer_load_subbuffer(t->kbuf, t->page) < 0)
				break;
			for (d = kbuffer_read_event(t->kbuf, &ts); d;
			     d = kbuffer_next_event(t->kbuf, &ts)) {
				ret = rec_push(t, c, ts, d, (uint32_t)kbuffer_event_size(t->kbuf));
				if (ret)
					return ret;
			}
		}
	}
	if (t->nrecs > 1)
		qsort(t->recs, t->nrecs, sizeof(*t->recs), rec_cmp);
	for (size_t i = 0; i < t->nrecs; i++) {
		ret = tracefseng_decode(t, &t->recs[i], fn, ctx);
		if (ret < 0)
			return ret;
		if (ret == 1)
			continue;	/* not delivered (another process, a task record) */
		delivered++;
		if (ret > 1)
			break;
	}
	return delivered ? delivered : (int)(t->nrecs > 0);
}

/* ---- stats ------------------------------------------------------------------------ */

static uint64_t stat_field(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static uint64_t tracefseng_kernel_lost(struct tracefseng *t)
{
	uint64_t lost = 0;

	for (int c = 0; c < t->ncpus; c++) {
		char file[64];
		char *txt;

		snprintf(file, sizeof(file), "per_cpu/cpu%d/stats", c);
		txt = tracefs_instance_file_read(t->inst, file, NULL);
		if (!txt)
			continue;
		lost += stat_field(txt, "overrun:") + stat_field(txt, "commit overrun:") +
			stat_field(txt, "dropped events:");
		free(txt);
	}
	return lost;
}

/* hits per event from uprobe_profile: "  PATH EVENT HITS" */
static void tracefseng_profile_hits(struct tracefseng *t)
{
	char *prof = tracefs_instance_file_read(NULL, "uprobe_profile", NULL);
	char *save = NULL;

	if (!prof)
		return;
	for (char *line = strtok_r(prof, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char path[4096], event[256];
		unsigned long long hits;

		if (sscanf(line, " %4095s %255s %llu", path, event, &hits) != 3)
			continue;
		for (size_t i = 0; i < t->nsites; i++) {
			const struct usc_site *site = t->base.sites[i];

			if (strcmp(site->event, event) || strcmp(site->path, path))
				continue;
			t->stats[i].hits = (int64_t)hits;
		}
	}
	free(prof);
}

static int tracefseng_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct tracefseng *t = tracefseng_of(e);

	st->events = 0;
	for (size_t i = 0; i < t->nsites; i++)
		st->events += t->stats[i].events;
	st->lost = t->inst && !t->removed ? tracefseng_kernel_lost(t) : 0;
	for (size_t i = 0; i < t->nsites; i++) {
		t->stats[i].lost = st->lost ? -1 : 0;
		t->stats[i].hits = -1;
	}
	/* Without a pid filter every hit is an event, so the kernel's hit
	 * count is the probe's own, and tells its losses. */
	if (!t->pid && !t->removed) {
		tracefseng_profile_hits(t);
		for (size_t i = 0; i < t->nsites && st->lost; i++)
			if (t->stats[i].hits >= 0)
				t->stats[i].lost = t->stats[i].hits > (int64_t)t->stats[i].events ?
						   t->stats[i].hits - (int64_t)t->stats[i].events : 0;
	}
	st->sites = t->stats;
	return 0;
}

/* ---- stop and detach --------------------------------------------------------------- */

static void tracefseng_stop(struct usc_engine *e)
{
	struct tracefseng *t = tracefseng_of(e);

	if (t->live && t->inst)
		tracefs_event_disable(t->inst, t->name, NULL);
	t->live = false;
}

static void tracefseng_detach(struct usc_engine *e)
{
	struct tracefseng *t = tracefseng_of(e);

	if (t->removed)
		return;
	t->removed = true;
	/* An instance with open trace_pipe_raw readers is busy. */
	for (int c = 0; t->cpu_fd && c < t->ncpus; c++) {
		if (t->cpu_fd[c] >= 0)
			close(t->cpu_fd[c]);
		t->cpu_fd[c] = -1;
	}
	/* The instance goes first: that disables its events everywhere. */
	if (t->inst) {
		tracefs_event_disable(t->inst, NULL, NULL);
		if (tracefs_instance_destroy(t->inst))
			log_warn("could not remove the tracefs instance %s", t->name);
		else
			engine_undo_done(t->base.ctx, t->undo_inst);
	}
	for (size_t i = 0; i < t->nsites; i++) {
		char cmd[160];

		if (!t->ts[i].created)
			continue;
		snprintf(cmd, sizeof(cmd), "-:%s/%s\n", t->name, t->base.sites[i]->event);
		if (tracefs_instance_file_append(NULL, "uprobe_events", cmd) < 0) {
			log_warn("could not remove the uprobe %s/%s", t->name,
				 t->base.sites[i]->event);
			continue;
		}
		t->ts[i].created = false;
		engine_undo_done(t->base.ctx, t->ts[i].undo);
	}
	t->live = false;
}

static void tracefseng_destroy(struct usc_engine *e)
{
	struct tracefseng *t = tracefseng_of(e);

	tracefseng_detach(e);
	if (t->inst)
		tracefs_instance_free(t->inst);
	if (t->kbuf)
		kbuffer_free(t->kbuf);	/* tep_kbuffer() gives the caller its own */
	if (t->tep)
		tep_free(t->tep);
	free(t->cpu_fd);
	free(t->page);
	free(t->site_of_id);
	free(t->ts);
	free(t->stats);
	free(t->tasks);
	free(t->recs);
	free(t->arena);
	free(t);
}

const struct usc_engine_ops tracefs_engine_ops = {
	.name = "tracefs",
	.create = tracefseng_create,
	.can_place = tracefseng_can_place,
	.kernel_uprobes = true,
	.attach = tracefseng_attach,
	.start = tracefseng_start,
	.poll = tracefseng_poll,
	.stop = tracefseng_stop,
	.stats = tracefseng_stats,
	.detach = tracefseng_detach,
	.destroy = tracefseng_destroy,
	.filters = tracefseng_filters,
};
