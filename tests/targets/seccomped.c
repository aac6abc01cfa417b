/* uscope e2e target: a process under a seccomp filter (one that allows
 * everything, as a sandbox's would allow what it needs). Prints "ready",
 * then calls tick(n) every millisecond until killed. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

volatile long g_ticks;

__attribute__((noipa, used)) void tick(int n)
{
	g_ticks += n;
}

int main(void)
{
	struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
	struct sock_fprog prog = {.len = 1, .filter = allow};
	struct timespec ms = {0, 1000000};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (int n = 1;; n++) {
		tick(n);
		nanosleep(&ms, NULL);
	}
}
