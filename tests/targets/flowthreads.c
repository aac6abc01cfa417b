/* uscope e2e target for `uscope flow`: `flowthreads [M]` starts 2 threads;
 * thread t (0, 1) calls outer(t) M times (default 3), and outer(t) calls
 * inner(t) once. The threads wait for each other at a barrier before their
 * calls, so that they tend to interleave. Main calls neither. Prints
 * "flowthreads done m=M total=T" and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define FLOW __attribute__((noipa, noinline, used))

static int M = 3;
static pthread_barrier_t barrier;
static long results[2];

FLOW long inner(long t)
{
	return t + 1;
}

FLOW long outer(long t)
{
	long r = inner(t);

	return r * 10;
}

static void *run(void *arg)
{
	long t = (long)arg, sum = 0;

	pthread_barrier_wait(&barrier);
	for (int i = 0; i < M; i++)
		sum += outer(t);
	results[t] = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t tids[2];

	if (argc > 1)
		M = (int)strtol(argv[1], NULL, 0);
	pthread_barrier_init(&barrier, NULL, 2);
	for (long t = 0; t < 2; t++)
		if (pthread_create(&tids[t], NULL, run, (void *)t))
			return 1;
	for (int t = 0; t < 2; t++)
		pthread_join(tids[t], NULL);
	printf("flowthreads done m=%d total=%ld\n", M, results[0] + results[1]);
	return 0;
}
