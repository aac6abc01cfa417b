/* uscope e2e target: a forking server (tests/e2e/test_children.py). Its
 * children are forked after uscope is attached to it (-p), when the test
 * says so on stdin; each calls handle() a known number of times.
 *
 *   prefork
 *	prints "ready", then reads commands, one a line:
 *	serve N K    forks N children that each call handle(i) K times
 *	             (i = 0..K-1) and exit 0; reaps them; prints "served N K"
 *	grand N K    as serve, and each child forks a grandchild that calls
 *	             handle K times too; prints "grand N K"
 *	exec N K P   forks N children that each call handle K times, then exec
 *	             program P ("P calls K": P calls its handle K times);
 *	             prints "exec N K"
 *	self K       calls handle K times itself; prints "self K"
 *	reexec K     execs itself to call handle K times and exit (prefork calls K)
 *	seccomp      puts itself under a seccomp filter (one that allows
 *	             everything, as a sandbox's allows what it needs), which
 *	             uscope's inject engine does not patch; prints "seccomp on"
 *	hold N K     forks N children that each call handle K times, then wait
 *	             on a pipe; prints "held PID,PID,..." once all have called
 *	release      the held children each call handle K times more and exit;
 *	             prints "released ok=M" (M: the children that exited 0)
 *	end of input: exits 0.
 *
 *   prefork calls K
 *	calls handle K times and exits 0 (an exec'd child).
 *
 * Every command's line is printed only once everything it started has
 * ended, so the test knows when the calls are in. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long g_sink;
#ifdef PREFORK_COPY
volatile long g_copy = 2;	/* prefork2: another build id than prefork's */
#endif

__attribute__((noinline)) long handle(int v)
{
	long s = 0;

	for (int i = 0; i <= v % 5; i++)
		s += (long)i * v + 1;
	g_sink += s;
	return s;
}

static void calls(int k)
{
	for (int i = 0; i < k; i++)
		handle(i);
}

/* Reap every child; how many exited 0. */
static int reap_all(void)
{
	int st, ok = 0;

	while (wait(&st) > 0)
		ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
	return ok;
}

static void serve(int n, int k, int grand)
{
	for (int c = 0; c < n; c++) {
		pid_t p = fork();

		if (p < 0)
			exit(3);
		if (p)
			continue;
		if (grand && fork() == 0) {
			calls(k);
			_exit(0);
		}
		calls(k);
		reap_all();
		_exit(0);
	}
	reap_all();
}

static void exec_children(int n, int k, const char *prog)
{
	for (int c = 0; c < n; c++) {
		char arg[16];

		if (fork())
			continue;
		calls(k);
		snprintf(arg, sizeof(arg), "%d", k);
		execl(prog, prog, "calls", arg, (char *)NULL);
		_exit(4);
	}
	reap_all();
}

static int hold_w = -1;

/* Children that call handle K times, say so on a pipe, and wait for the
 * other pipe to close (release). */
static void hold(int n, int k)
{
	int go[2], said[2];
	char b;

	if (pipe(go) || pipe(said))
		exit(3);
	printf("held");
	for (int c = 0; c < n; c++) {
		pid_t p = fork();

		if (p < 0)
			exit(3);
		if (p == 0) {
			close(go[1]);
			close(said[0]);
			calls(k);
			if (write(said[1], "x", 1) != 1)
				_exit(5);
			while (read(go[0], &b, 1) > 0)
				;
			calls(k);
			_exit(0);
		}
		printf("%s%d", c ? "," : " ", (int)p);
	}
	close(go[0]);
	close(said[1]);
	for (int c = 0; c < n; c++)
		if (read(said[0], &b, 1) != 1)
			exit(3);
	close(said[0]);
	hold_w = go[1];
	printf("\n");
}

static void release(void)
{
	close(hold_w);
	hold_w = -1;
	printf("released ok=%d\n", reap_all());
}

static int seccomp_on(void)
{
	struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
	struct sock_fprog prog = {.len = 1, .filter = allow};

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(int argc, char **argv)
{
	char line[512], prog[400];
	int n, k;

	if (argc == 3 && !strcmp(argv[1], "calls")) {
		calls(atoi(argv[2]));
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "serve %d %d", &n, &k) == 2) {
			serve(n, k, 0);
			printf("served %d %d\n", n, k);
		} else if (sscanf(line, "grand %d %d", &n, &k) == 2) {
			serve(n, k, 1);
			printf("grand %d %d\n", n, k);
		} else if (sscanf(line, "exec %d %d %399s", &n, &k, prog) == 3) {
			exec_children(n, k, prog);
			printf("exec %d %d\n", n, k);
		} else if (sscanf(line, "self %d", &k) == 1) {
			calls(k);
			printf("self %d\n", k);
		} else if (sscanf(line, "hold %d %d", &n, &k) == 2) {
			hold(n, k);
		} else if (sscanf(line, "reexec %d", &k) == 1) {
			char kk[16];

			snprintf(kk, sizeof(kk), "%d", k);
			execl("/proc/self/exe", argv[0], "calls", kk, (char *)NULL);
			printf("reexec failed\n");
		} else if (!strcmp(line, "seccomp\n")) {
			printf("seccomp %s\n", seccomp_on() ? "failed" : "on");
		} else if (!strcmp(line, "release\n")) {
			release();
		} else {
			printf("what? %s", line);
		}
	}
	return 0;
}
