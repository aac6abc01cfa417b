/* uscope e2e target: signals and exec under the inject engine.
 *
 *   sigexec N        calls work(1) N times from main while a 1 ms interval
 *                    timer's SIGALRM handler calls work(2); prints
 *                    "main N handler H" (H: the handler's calls), then execs
 *                    itself as `sigexec` with no argument, which calls
 *                    work(3) 5 times and prints "after exec". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handler_calls;
volatile long g_sink;

__attribute__((noipa, used)) long work(long kind)
{
	g_sink += kind;
	for (volatile int i = 0; i < 2000; i++)
		;
	return g_sink;
}

static void on_alarm(int sig)
{
	(void)sig;
	work(2);
	handler_calls++;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		for (int i = 0; i < 5; i++)
			work(3);
		printf("after exec\n");
		return 0;
	}
	long n = strtol(argv[1], NULL, 0);
	struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
	struct itimerval it = {{0, 1000}, {0, 1000}};

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (long i = 0; i < n; i++)
		work(1);
	it = (struct itimerval){{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &it, NULL);
	printf("main %ld handler %d\n", n, (int)handler_calls);
	fflush(stdout);
	execl("/proc/self/exe", "sigexec", (char *)NULL);
	perror("exec");
	return 1;
}
