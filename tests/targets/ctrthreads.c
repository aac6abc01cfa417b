/* uscope e2e target for containers (tests/e2e/test_containers.py):
 * `ctrthreads [N]` starts N threads (default 3) and prints "ready"; for each
 * line read from stdin (round k = 1, 2, ...), thread t = 0..N-1 in turn
 * calls work(t, k), then "round k" is printed (flushed). Exits 0 at EOF. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXT 16

static sem_t go[MAXT], done;
static int round_k;

__attribute__((noipa, used)) long work(int t, int k)
{
	return (long)t * 1000 + k;
}

static void *run(void *arg)
{
	int t = (int)(long)arg;

	for (;;) {
		sem_wait(&go[t]);
		work(t, round_k);
		sem_post(&done);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	char line[256];

	if (n < 1 || n > MAXT)
		return 2;
	sem_init(&done, 0, 0);
	for (int t = 0; t < n; t++) {
		pthread_t th;

		sem_init(&go[t], 0, 0);
		if (pthread_create(&th, NULL, run, (void *)(long)t))
			return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		round_k++;
		for (int t = 0; t < n; t++) {
			sem_post(&go[t]);
			sem_wait(&done);
		}
		printf("round %d\n", round_k);
		fflush(stdout);
	}
	return 0;
}
