/* uscope e2e target: `churn N` starts N threads one after the other (each
 * calls work(t, 0..2) and exits), pausing 300 ms after every 50, so more
 * threads than a tracer may have rings for come and go. Prints "churn done". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noipa, used)) long work(int t, int i)
{
	volatile long x = (long)t * 1000 + i;

	return x;
}

static void *run(void *arg)
{
	for (int i = 0; i < 3; i++)
		work((int)(long)arg, i);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;

	for (int t = 0; t < n; t++) {
		pthread_t th;

		pthread_create(&th, NULL, run, (void *)(long)t);
		pthread_join(th, NULL);
		if (t % 50 == 49) {
			struct timespec ts = {0, 300000000};

			nanosleep(&ts, NULL);
		}
	}
	printf("churn done\n");
	return 0;
}
