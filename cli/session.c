#include "cli/session.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "resolve/resolve.h"

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Fork COMMAND, held before exec until `go` is written; its exec failure
 * comes back through `err` (close-on-exec). With traceme, it becomes our
 * tracee, stopped at its exec for the engine (launched). */
static pid_t spawn_held(const char *exe, char **argv, const sigset_t *oldmask, bool traceme,
			int *go_w, int *err_r)
{
	int go[2], err[2];
	pid_t pid;

	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(err[0]);
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		if (read(go[0], &c, 1) != 1)
			_exit(127);	/* the tracer gave up */
		if (traceme && ptrace(PTRACE_TRACEME, 0, 0, 0) < 0)
			_exit(126);
		execv(exe, argv);
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(e == ENOENT ? 127 : 126);
	}
	close(go[0]);
	close(err[1]);
	*go_w = go[1];
	*err_r = err[0];
	return pid;
}

/* One summary line per label: every site of a glob or a USDT probe adds up. */
static void print_summary(const struct usc_session *s, const struct usc_stats *st)
{
	bool unattributed = st->lost && s->nsites && st->sites[0].lost < 0;

	fprintf(stderr, "uscope: %llu events, %llu lost%s\n", (unsigned long long)st->events,
		(unsigned long long)st->lost,
		unattributed ? " (the kernel does not say which probes lost them)" : "");
	for (size_t i = 0; i < s->nsites; i++) {
		uint64_t events = 0;
		int64_t lost = 0;
		bool first = true;

		for (size_t k = 0; k < i && first; k++)
			first = strcmp(s->sites[k].label, s->sites[i].label) != 0;
		if (!first)
			continue;
		for (size_t k = i; k < s->nsites; k++) {
			if (strcmp(s->sites[k].label, s->sites[i].label))
				continue;
			events += st->sites[k].events;
			lost = lost < 0 || st->sites[k].lost < 0 ? -1 : lost + st->sites[k].lost;
		}
		if (lost >= 0)
			fprintf(stderr, "  %s: %llu events, %lld lost\n", s->sites[i].label,
				(unsigned long long)events, (long long)lost);
		else
			fprintf(stderr, "  %s: %llu events\n", s->sites[i].label,
				(unsigned long long)events);
	}
}

int cli_run_session(const struct cli_run *run, struct usc_probe_spec *specs, size_t nspecs)
{
	struct usc_session s = {0};
	const struct usc_engine_ops *ops;
	struct usc_engine *e = NULL;
	bool stopping = false, target_gone = false;
	pid_t pid = run->pid, child = -1;
	char **cmd = run->cmd;
	int ret, exit_code = 1, sfd = -1, pfd = -1, go_w = -1, err_r = -1;
	int child_status = 0, sigints = 0;
	sigset_t mask, oldmask;

	if (engine_lookup(run->engine ? run->engine : "auto", &ops))
		return 2;
	s.specs = specs;
	s.nspecs = nspecs;
	s.count_only = run->count_only;
	s.target.kind = cmd ? USC_TARGET_COMMAND : pid ? USC_TARGET_PID : USC_TARGET_SYSTEM;
	s.target.pid = pid;
	if (resolve_target(&s.target, cmd ? cmd[0] : NULL)) {
		exit_code = cmd ? 127 : 1;
		goto out_free;
	}
	if (resolve_probes(&s.target, s.specs, s.nspecs,
			   (run->uretprobe ? RESOLVE_URETPROBE : 0) |
			   (run->no_inlines ? RESOLVE_NO_INLINES : 0), &s.sites, &s.nsites))
		goto out_free;
	if (!ops)
		ops = engine_choose(&s);

	/* From here on, every way out goes through cleanup: the signals that
	 * end a session are read from a signalfd, never acted on
	 * asynchronously. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

	ret = ops->open(&s, &e);
	if (ret)
		goto out_restore;
	s.engine = e;
	ret = ops->attach(e);
	if (ret)
		goto out_detach;

	if (cmd) {
		child = spawn_held(s.target.exe, cmd, &oldmask, ops->trace_exec, &go_w, &err_r);
		if (child < 0) {
			cli_error("cannot start %s: %s", cmd[0], strerror(errno));
			goto out_detach;
		}
		pid = child;
	}
	ret = ops->start(e, pid, cmd != NULL);
	if (ret)
		goto out_detach;
	if (pid)
		pfd = pidfd_open_(pid);
	if (!run->quiet)
		fprintf(stderr, "uscope: tracing %zu probe%s\n", s.nsites, s.nsites == 1 ? "" : "s");
	if (cmd) {
		int err = 0;
		ssize_t n;

		if (write(go_w, "g", 1) != 1) {
			cli_error("cannot start %s", cmd[0]);
			goto out_detach;
		}
		close(go_w);
		go_w = -1;
		n = read(err_r, &err, sizeof(err));
		close(err_r);
		err_r = -1;
		if (n == (ssize_t)sizeof(err)) {
			cli_error("cannot run %s: %s", cmd[0],
				  err == ENOENT ? "command not found" : strerror(err));
			waitpid(child, NULL, 0);
			child = -1;
			exit_code = err == ENOENT ? 127 : 126;
			goto out_detach;
		}
		if (ops->launched && ops->launched(e, child)) {
			cli_error("cannot attach to %s", cmd[0]);
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			child = -1;
			goto out_detach;
		}
	}

	double deadline = run->duration > 0 ? now_s() + run->duration : 0;
	double next_report = run->interval > 0 ? now_s() + run->interval : 0;

	exit_code = 0;
	while (!stopping) {
		struct pollfd fds[2];
		int nfds = 0, n;
		struct signalfd_siginfo si;

		n = ops->poll(e, 0, run->on_event, run->ctx);
		if (n < 0) {
			cli_error("reading events failed: %s", strerror(-n));
			exit_code = 1;
			break;
		}
		if (run->flush && run->flush(run->ctx))
			break;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo == SIGCHLD || si.ssi_signo == SIGPIPE)
				continue;
			if (child > 0 && si.ssi_signo == SIGINT && ++sigints < 2)
				continue;	/* the terminal sent it to COMMAND too */
			if (child > 0 && si.ssi_signo != SIGINT)
				kill(child, (int)si.ssi_signo);
			else
				stopping = true;
		}
		if (child > 0) {
			if (waitpid(child, &child_status, WNOHANG) == child) {
				target_gone = true;
				child = -1;
			}
		} else if (pfd >= 0) {
			struct pollfd p = {.fd = pfd, .events = POLLIN};

			if (poll(&p, 1, 0) > 0)
				target_gone = true;
		}
		if (target_gone)
			break;
		if (deadline && now_s() >= deadline)
			break;
		if (next_report && now_s() >= next_report && run->report) {
			struct usc_stats st = {0};

			if (ops->stats(e, &st) == 0)
				run->report(run->ctx, &s, &st, false);
			next_report += run->interval;
		}
		if (n > 0)
			continue;	/* more may be waiting: drain without sleeping */
		fds[nfds++] = (struct pollfd){.fd = sfd, .events = POLLIN};
		if (pfd >= 0)
			fds[nfds++] = (struct pollfd){.fd = pfd, .events = POLLIN};
		poll(fds, (nfds_t)nfds, 20);
	}

	/* No new hits, then everything already recorded, then the counts. */
	ops->stop(e);
	for (int k = 0; k < 1000; k++) {
		int n = ops->poll(e, 0, run->on_event, run->ctx);

		if (run->flush)
			run->flush(run->ctx);
		if (n <= 0)
			break;
	}
	struct usc_stats st = {0};

	ops->stats(e, &st);
	if (run->report)
		run->report(run->ctx, &s, &st, true);
	if (!run->quiet && !run->no_summary)
		print_summary(&s, &st);
	if (target_gone && cmd) {
		if (WIFEXITED(child_status))
			exit_code = WEXITSTATUS(child_status);
		else if (WIFSIGNALED(child_status))
			exit_code = 128 + WTERMSIG(child_status);
	}

out_detach:
	if (go_w >= 0)
		close(go_w);	/* a held child sees EOF and exits 127 */
	if (err_r >= 0)
		close(err_r);
	if (e) {
		ops->detach(e);
		ops->destroy(e);
	}
	/* When we stop before COMMAND does (-d, Ctrl-C twice, an error), it
	 * runs on, untraced. */
out_restore:
	if (pfd >= 0)
		close(pfd);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
out_free:
	resolve_sites_free(s.sites, s.nsites);
	resolve_cache_free();
	free(s.target.exe);
	return exit_code;
}

int cli_parse_args(int argc, char **argv, unsigned extra, const char *name, const char *usage,
		   struct cli_run *run, struct cli_args *a)
{
	static const struct option all[] = {
		{"pid", required_argument, NULL, 'p'},
		{"duration", required_argument, NULL, 'd'},
		{"engine", required_argument, NULL, 'e'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"json", no_argument, NULL, 'j'},
		{"output", required_argument, NULL, 'o'},
		{"interval", required_argument, NULL, 'i'},
		{"uretprobe", no_argument, NULL, 'R'},
		{"no-inlines", no_argument, NULL, 'N'},
	};
	static const unsigned need[] = {0, 0, 0, 0, 0, 0, CLI_ARG_JSON, CLI_ARG_OUTPUT,
					CLI_ARG_INTERVAL, CLI_ARG_URETPROBE, 0};
	struct option opts[sizeof(all) / sizeof(all[0]) + 1];
	char shorts[32] = "p:d:e:qvh";
	size_t n = 0;
	int c;

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!need[i] || (extra & need[i]))
			opts[n++] = all[i];
	opts[n] = (struct option){NULL, 0, NULL, 0};
	if (extra & CLI_ARG_OUTPUT)
		strcat(shorts, "o:");
	if (extra & CLI_ARG_INTERVAL)
		strcat(shorts, "i:");

	/* COMMAND follows the first "--"; everything before it is ours */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			run->cmd = argv + i + 1;
			if (!run->cmd[0]) {
				cli_error("nothing after '--': give a COMMAND to run");
				return 2;
			}
			argc = i;
			break;
		}
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'p':
			errno = 0;
			run->pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || run->pid <= 0 || errno) {
				cli_error("-p wants a process id, not '%s'", optarg);
				return 2;
			}
			break;
		case 'd':
		case 'i':
			*(c == 'd' ? &run->duration : &run->interval) = strtod(optarg, &end);
			if (*end || (c == 'd' ? run->duration : run->interval) <= 0) {
				cli_error("-%c wants a positive number of seconds, not '%s'", c, optarg);
				return 2;
			}
			break;
		case 'e':
			run->engine = optarg;
			break;
		case 'q':
			run->quiet = true;
			break;
		case 'v':
			cli_verbose = true;
			break;
		case 'j':
			a->json = true;
			break;
		case 'o':
			a->outfile = optarg;
			break;
		case 'R':
			run->uretprobe = true;
			break;
		case 'N':
			run->no_inlines = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		cli_error("%s needs at least one PROBE (see uscope %s --help)", name, name);
		return 2;
	}
	if (run->cmd && run->pid) {
		cli_error("give either -p PID or a COMMAND, not both");
		return 2;
	}
	a->nspecs = (size_t)(argc - optind);
	if (cli_parse_probes(argv + optind, argc - optind, &a->specs))
		return 1;
	return -1;
}
