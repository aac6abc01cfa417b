/* uscope e2e target: `chatter N M` starts N threads (default 4); thread t
 * (0..N-1) calls say(t, i, line) for i = 0..M-1 (default 2000) and writes
 * line to stdout, "chatter t=T i=I " and 0 to 63 dots (by i), each with one
 * write(2): the program's own lines are whole, and they fall between the
 * lines uscope writes to the same stdout, never inside one. Then prints
 * "chatter done n=N m=M lines=L" (L: the lines written) and exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int M = 2000;
static long written[256];

__attribute__((noipa, used)) int say(int t, int i, const char *line)
{
	return t + i + (int)strlen(line);
}

static void *run(void *arg)
{
	int t = (int)(long)arg;
	char line[128];

	for (int i = 0; i < M; i++) {
		int n = snprintf(line, sizeof(line), "chatter t=%d i=%d %.*s\n", t, i, i % 64,
				 "................................................................");

		say(t, i, line);
		if (write(1, line, (size_t)n) == n)
			written[t]++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 0) : 4;
	pthread_t tids[256];
	long lines = 0;
	char done[96];

	if (argc > 2)
		M = (int)strtol(argv[2], NULL, 0);
	if (n < 1 || n > 256 || M < 0)
		return 2;
	for (int t = 0; t < n; t++)
		if (pthread_create(&tids[t], NULL, run, (void *)(long)t))
			return 1;
	for (int t = 0; t < n; t++) {
		pthread_join(tids[t], NULL);
		lines += written[t];
	}
	snprintf(done, sizeof(done), "chatter done n=%d m=%d lines=%ld\n", n, M, lines);
	return write(1, done, strlen(done)) > 0 ? 0 : 1;
}
