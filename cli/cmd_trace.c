/* uscope trace: put probes in place, print their events, clean up. */
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "output/output.h"
#include "resolve/resolve.h"

static const char trace_usage[] =
	"usage: uscope trace [-p PID] [--json] [-o FILE] [-d SECONDS] [-e ENGINE] PROBE...\n"
	"                    [-- COMMAND [ARG...]]\n"
	"\n"
	"  PROBE is one shell word: [p|r][:EVENT] LOCATION [FETCHARG ...]\n"
	"    LOCATION  [MODULE:]SYMBOL | [MODULE:]SYMBOL+OFFSET | [MODULE:]ADDRESS\n"
	"    FETCHARG  [NAME=]EXPR[:TYPE]\n"
	"    EXPR      %REG | $argN | $retval | $stackN | $stack | $comm | @ADDR |\n"
	"              @+FILE_OFFSET | +OFFS(EXPR) | -OFFS(EXPR)\n"
	"    TYPE      u8..u64 s8..s64 x8..x64 string ustring symbol b<width>@<offset>/<size>\n"
	"\n"
	"  -p, --pid PID        trace a running process (all its threads)\n"
	"  -- COMMAND           start COMMAND with the probes in place; exit with its status\n"
	"                       (neither: system-wide, for every process running the file)\n"
	"      --json           one JSON object per event\n"
	"  -o, --output FILE    write events to FILE\n"
	"  -d, --duration SECS  stop after SECS seconds\n"
	"  -e, --engine NAME    auto (default) or tracefs\n"
	"  -q, --quiet          no readiness line or summary on stderr\n"
	"  -v, --verbose        say more on stderr\n"
	"\n"
	"examples:\n"
	"  uscope trace 'libc:getaddrinfo host=+0($arg1):string' -- getent ahosts localhost\n"
	"  uscope trace 'r:libc:malloc ptr=$retval' -p 1234\n";

struct trace_ctx {
	struct usc_output out;
	FILE *fp;
	int write_error;
};

static int on_event(const struct usc_event *ev, void *ctx)
{
	struct trace_ctx *tc = ctx;

	if (output_event(&tc->out, ev))
		return -1;
	/* flush in batches of 64 KiB; the caller flushes at the end of a drain */
	if (tc->out.len >= 65536) {
		if (fwrite(tc->out.buf, 1, tc->out.len, tc->fp) != tc->out.len)
			tc->write_error = errno ? errno : EIO;
		output_reset(&tc->out);
	}
	return 0;
}

static void flush_out(struct trace_ctx *tc)
{
	if (tc->out.len && fwrite(tc->out.buf, 1, tc->out.len, tc->fp) != tc->out.len)
		tc->write_error = errno ? errno : EIO;
	output_reset(&tc->out);
	if (fflush(tc->fp))
		tc->write_error = errno ? errno : EIO;
}

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
 * comes back through `err` (close-on-exec). */
static pid_t spawn_held(const char *exe, char **argv, const sigset_t *oldmask, int *go_w,
			int *err_r)
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

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {
		{"pid", required_argument, NULL, 'p'},
		{"json", no_argument, NULL, 'j'},
		{"output", required_argument, NULL, 'o'},
		{"duration", required_argument, NULL, 'd'},
		{"engine", required_argument, NULL, 'e'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct usc_session s = {0};
	struct trace_ctx tc = {0};
	const struct usc_engine_ops *ops;
	struct usc_engine *e = NULL;
	const char *outfile = NULL, *engine = "auto";
	double duration = 0;
	bool quiet = false, stopping = false, target_gone = false;
	pid_t pid = 0, child = -1;
	char **cmd = NULL;
	int cmd_argc = 0, c, ret, exit_code = 1, sfd = -1, pfd = -1, go_w = -1, err_r = -1;
	int child_status = 0, sigints = 0;
	sigset_t mask, oldmask;

	/* COMMAND follows the first "--"; everything before it is ours */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd = argv + i + 1;
			cmd_argc = argc - i - 1;
			argc = i;
			break;
		}
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:o:d:e:qvh", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'p':
			errno = 0;
			pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || pid <= 0 || errno) {
				cli_error("-p wants a process id, not '%s'", optarg);
				return 2;
			}
			break;
		case 'j':
			tc.out.json = true;
			break;
		case 'o':
			outfile = optarg;
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (*end || duration <= 0) {
				cli_error("-d wants a positive number of seconds, not '%s'", optarg);
				return 2;
			}
			break;
		case 'e':
			engine = optarg;
			break;
		case 'q':
			quiet = true;
			break;
		case 'v':
			cli_verbose = true;
			break;
		case 'h':
			fputs(trace_usage, stdout);
			return 0;
		default:
			fputs(trace_usage, stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		cli_error("trace needs at least one PROBE (see uscope trace --help)");
		return 2;
	}
	if (cmd && cmd_argc == 0) {
		cli_error("nothing after '--': give a COMMAND to run");
		return 2;
	}
	if (cmd && pid) {
		cli_error("give either -p PID or a COMMAND, not both");
		return 2;
	}
	if (engine_lookup(engine, &ops))
		return 2;
	s.nspecs = (size_t)(argc - optind);
	if (cli_parse_probes(argv + optind, argc - optind, &s.specs))
		return 1;

	s.target.kind = cmd ? USC_TARGET_COMMAND : pid ? USC_TARGET_PID : USC_TARGET_SYSTEM;
	s.target.pid = pid;
	if (resolve_target(&s.target, cmd ? cmd[0] : NULL)) {
		exit_code = cmd ? 127 : 1;
		goto out_free;
	}
	if (resolve_probes(&s.target, s.specs, s.nspecs, &s.sites, &s.nsites))
		goto out_free;

	tc.fp = stdout;
	if (outfile) {
		tc.fp = fopen(outfile, "w");
		if (!tc.fp) {
			cli_error("cannot write %s: %s", outfile, strerror(errno));
			goto out_free;
		}
	}

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
		child = spawn_held(s.target.exe, cmd, &oldmask, &go_w, &err_r);
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
	if (!quiet)
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
	}

	double deadline = duration > 0 ? now_s() + duration : 0;

	exit_code = 0;
	while (!stopping) {
		struct pollfd fds[2];
		int nfds = 0, n;
		struct signalfd_siginfo si;

		n = ops->poll(e, 0, on_event, &tc);
		if (n < 0) {
			cli_error("reading events failed: %s", strerror(-n));
			exit_code = 1;
			break;
		}
		flush_out(&tc);
		if (tc.write_error) {
			if (tc.write_error != EPIPE)
				cli_error("cannot write events: %s", strerror(tc.write_error));
			break;
		}
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
			pid_t w = waitpid(child, &child_status, WNOHANG);

			if (w == child) {
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
		int n = ops->poll(e, 0, on_event, &tc);

		flush_out(&tc);
		if (n <= 0)
			break;
	}
	struct usc_stats st = {0};

	ops->stats(e, &st);
	if (!quiet) {
		fprintf(stderr, "uscope: %llu events, %llu lost%s\n", (unsigned long long)st.events,
			(unsigned long long)st.lost,
			st.lost && st.sites && s.nsites && st.sites[0].lost < 0 ?
				" (the kernel does not say which probes lost them)" : "");
		for (size_t i = 0; i < s.nsites; i++) {
			if (st.sites[i].lost >= 0)
				fprintf(stderr, "  %s: %llu events, %lld lost\n", s.sites[i].event,
					(unsigned long long)st.sites[i].events,
					(long long)st.sites[i].lost);
			else
				fprintf(stderr, "  %s: %llu events\n", s.sites[i].event,
					(unsigned long long)st.sites[i].events);
		}
	}
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
	if (tc.fp && tc.fp != stdout)
		fclose(tc.fp);
out_free:
	output_free(&tc.out);
	resolve_sites_free(s.sites, s.nsites);
	resolve_cache_free();
	free(s.target.exe);
	free(s.specs);
	return exit_code;
}
