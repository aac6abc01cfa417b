/* uscope e2e target: `threads N M` starts N threads (default 4); thread t
 * (0..N-1) calls work(t, i) for i = 0..M-1 (default 2000). Then joins them,
 * prints "threads done n=N m=M total=T" and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int M = 2000;
static long results[256];

__attribute__((noipa, used)) long work(int thread_index, int i)
{
	return (long)thread_index * 100000 + i;
}

static void *run(void *arg)
{
	int t = (int)(long)arg;
	long sum = 0;

	for (int i = 0; i < M; i++)
		sum += work(t, i);
	results[t] = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 0) : 4;
	pthread_t tids[256];
	long total = 0;

	if (argc > 2)
		M = (int)strtol(argv[2], NULL, 0);
	if (n < 1 || n > 256)
		return 2;
	for (int t = 0; t < n; t++)
		if (pthread_create(&tids[t], NULL, run, (void *)(long)t))
			return 1;
	for (int t = 0; t < n; t++) {
		pthread_join(tids[t], NULL);
		total += results[t];
	}
	printf("threads done n=%d m=%d total=%ld\n", n, M, total);
	return 0;
}
