/* uscope script: a bpftrace program on user space (src/script/). The
 * program is read and compiled first, and a mistake is said with its place
 * before any process is touched; then its uprobes, uretprobes, usdt and py:
 * probes run in a session as any of uscope's probes (the script's sink,
 * src/sink/script.c, prints what it prints), and BEGIN, END and interval
 * probes in uscope. A program of BEGIN, END and interval probes alone runs
 * without a session. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "script/run.h"
#include "script/script.h"
#include "sink/sink.h"

#define SCRIPT_FILE_MAX (4u << 20)

static const struct cli_opt script_own[] = {
	{'j', 0, NULL, "bpftrace's JSON output (-f json): one JSON object per line"},
	{'K', 0, NULL, "keys a map holds (4096; bpftrace's BPFTRACE_MAP_KEYS_MAX):\nupdates "
	 "past it are lost, and said at the end"},
	{'S', 0, NULL, "bytes of a string, its NUL included (64; bpftrace's\nBPFTRACE_STRLEN), "
	 "8 to 200"},
	{0, 0, NULL, NULL},
};

static const struct cli_cmd script_cmd = {
	.name = "script",
	.head =
	"usage: uscope script [-p PID] [-d TIME] [-e ENGINE] [--json] FILE [ARG...]\n"
	"                     [-- COMMAND [ARG...]]\n"
	"       uscope script [OPTIONS] -x PROGRAM [ARG...] [-- COMMAND [ARG...]]\n"
	"\n"
	"Runs a bpftrace program on user space: uprobe, uretprobe, usdt and uscope's\n"
	"py: probes, BEGIN, END and interval; maps, $variables, printf, hist, lhist,\n"
	"stats... (doc/scripts.md). FILE - reads it from standard input; a #! line is\n"
	"skipped, so bpftrace's tools run unchanged. ARGs are $1, $2 ... On inject the\n"
	"program runs in the traced process, on bpf in the kernel, on tracefs in uscope\n"
	"on the streamed events: the same answers. Maps are printed at the end, as\n"
	"bpftrace prints them.\n"
	"\n",
	.tail =
	"\n"
	"examples:\n"
	"  uscope script /usr/sbin/gethostlatency.bt\n"
	"  uscope script -x 'uprobe:libc:malloc { @[comm] = count(); }' -p 1234\n"
	"  uscope script -x 'uretprobe:/bin/bash:readline { printf(\"%s\\n\", str(retval)); }'\n"
	"  uscope script lat.bt -- ./app\n",
	.extra = CLI_ARG_JSON | CLI_ARG_LIVE | CLI_ARG_AGG | CLI_ARG_SCRIPT | CLI_ARG_URETPROBE |
		 CLI_ARG_OUTPUT,
	.own = script_own,
};

/* The program's text: -x's, FILE's or standard input's. NULL (said). */
static char *read_program(const char *path, size_t *n)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char *buf;
	size_t got = 0, cap = 65536;

	if (!f) {
		cli_error("cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(cap + 1);
	while (buf) {
		size_t k = fread(buf + got, 1, cap - got, f);

		got += k;
		if (got < cap)
			break;
		if (cap >= SCRIPT_FILE_MAX) {
			cli_error("%s: a program of more than %u bytes", path, SCRIPT_FILE_MAX);
			free(buf);
			buf = NULL;
			break;
		}
		char *nb = realloc(buf, 2 * cap + 1);

		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	if (buf && ferror(f)) {
		cli_error("cannot read %s: %s", path, strerror(errno));
		free(buf);
		buf = NULL;
	}
	if (f != stdin)
		fclose(f);
	if (buf) {
		buf[got] = 0;
		*n = got;
	}
	return buf;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* BEGIN, END and interval probes alone: no session. Until exit(), -d,
 * a signal, or COMMAND's end. */
static int run_local(struct cli_opts *o, struct usc_script *s, FILE *fp)
{
	struct script_rt *rt = script_rt_new(s, fp, o->json);
	uint64_t end = o->so.duration > 0 ? now_ns() + (uint64_t)(o->so.duration * 1e9) : 0;
	sigset_t mask, old;
	int sfd, code = 0, status = 0;
	pid_t child = -1;

	if (!rt) {
		cli_error("out of memory");
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, &old);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (o->so.cmd) {
		child = fork();
		if (child == 0) {
			sigprocmask(SIG_SETMASK, &old, NULL);
			execvp(o->so.cmd[0], o->so.cmd);
			fprintf(stderr, "uscope: cannot run %s: %s\n", o->so.cmd[0], strerror(errno));
			_exit(127);
		}
	}
	script_rt_begin(rt);
	while (!script_rt_exited(rt) && sfd >= 0) {
		struct pollfd p = {.fd = sfd, .events = POLLIN};
		struct signalfd_siginfo si;
		bool stop = false;

		poll(&p, 1, 10);
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			stop |= si.ssi_signo != SIGCHLD;
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			child = -1;
			stop = true;
			code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		if (stop || (end && now_ns() >= end))
			break;
		script_rt_tick(rt, now_ns());
	}
	if (script_rt_end(rt))
		code = 1;
	if (child > 0) {
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
	}
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	script_rt_free(rt);
	return code;
}

int cmd_script(int argc, char **argv)
{
	struct cli_opts o = {0};
	struct usc_script_opts so = {0};
	struct usc_script *s = NULL;
	struct script_diag d;
	struct usc_probe_spec *specs;
	size_t n = 0, nspecs;
	char *text;
	const char *name;
	int code = cli_parse_args(argc, argv, &script_cmd, &o);
	FILE *fp;

	if (code >= 0)
		return code;
	if (!o.program && o.nwords < 1) {
		cli_usage_error("give the program: a FILE (- for standard input), or -x PROGRAM");
		return 2;
	}
	if (o.program) {
		name = "PROGRAM";
		text = strdup(o.program);
		n = text ? strlen(text) : 0;
		so.params = o.words;
		so.nparams = (size_t)o.nwords;
	} else {
		name = o.words[0];
		text = read_program(name, &n);
		so.params = o.words + 1;
		so.nparams = (size_t)o.nwords - 1;
	}
	if (!text)
		return 1;
	so.name = name;
	so.strlen = o.so.agg.str_max;
	so.max_keys = o.so.agg.max_rows;
	if (so.strlen > 200) {
		cli_usage_error("--strlen wants 8 to 200 for a script (bpftrace's bound)");
		free(text);
		return 2;
	}
	code = usc_script_compile(text, n, &so, &s, &d);
	if (code) {
		char msg[4096];

		if (code == -ENOMEM) {
			cli_error("out of memory");
		} else {
			script_diag_format(text, n, name, &d, msg, sizeof(msg));
			fprintf(stderr, "uscope: %s", msg);
		}
		free(text);
		return 1;
	}
	fp = cli_open_output(&o);
	if (!fp) {
		usc_script_free(s);
		free(text);
		return 1;
	}
	if (!usc_script_has_sites(s)) {
		code = run_local(&o, s, fp);
		cli_close_output(&o, fp);
		usc_script_free(s);
		free(text);
		return code;
	}
	/* the session takes a copy of the probes (cli_run_sink frees it) */
	specs = usc_script_specs(s, &nspecs);
	o.specs = malloc(nspecs * sizeof(*o.specs));
	if (!o.specs) {
		cli_error("out of memory");
		usc_script_free(s);
		free(text);
		return 1;
	}
	memcpy(o.specs, specs, nspecs * sizeof(*o.specs));
	o.nspecs = nspecs;
	/* bpftrace's uprobe is on the function's entry, not on its inlined
	 * copies; a USDT probe reads only what the program reads */
	o.so.resolve_flags |= RESOLVE_NO_INLINES | RESOLVE_NO_DEFAULT_ARGS | RESOLVE_SKIP_MISSING |
			      RESOLVE_URETPROBE_EXACT;
	o.so.script = usc_script_blob(s);
	o.so.script_probe = usc_script_spec_probes(s);
	code = cli_run_sink(&o, fp, usc_sink_script(s, fp, o.json), USC_SUMMARY_NONE);
	usc_script_free(s);
	free(text);
	return code;
}
