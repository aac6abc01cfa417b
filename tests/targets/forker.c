/* uscope e2e target: `forker` prints "ready", waits for a line on stdin,
 * then forks 3 children that each call work(100 + k) and exit at once,
 * calls work(k) itself for k = 0..2 on a new thread and on the main thread,
 * reaps the children, and exits. With -p on the parent, only the parent's
 * threads may be reported: work(0..2) twice, never work(100..102). */
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int g_sink;

__attribute__((noinline)) void work(int v)
{
	g_sink = v;
}

static void *thread_main(void *arg)
{
	(void)arg;
	for (int k = 0; k < 3; k++)
		work(k);
	return NULL;
}

int main(void)
{
	char line[64];
	pthread_t t;

	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (int k = 0; k < 3; k++) {
		pid_t p = fork();

		if (p == 0) {
			work(100 + k);
			_exit(0);
		}
	}
	pthread_create(&t, NULL, thread_main, NULL);
	pthread_join(t, NULL);
	for (int k = 0; k < 3; k++)
		work(k);
	while (wait(NULL) > 0)
		;
	printf("done\n");
	fflush(stdout);
	return 0;
}
