/* uscope e2e target: calls lib_mul(i, i + 1) from libdemo.so for i = 1..N
 * (argv[1], default 4), prints "uselib done n=N total=T".
 * With argv[2] == "wait": then prints "ready", and waits for EOF on stdin
 * (so a test can inspect the running process, e.g. `list -p`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lib_mul(int a, int b);

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 0) : 4;
	long total = 0;

	for (int i = 1; i <= n; i++)
		total += lib_mul(i, i + 1);
	printf("uselib done n=%d total=%ld\n", n, total);
	fflush(stdout);
	if (argc > 2 && strcmp(argv[2], "wait") == 0) {
		char buf[256];
		printf("ready\n");
		fflush(stdout);
		while (fgets(buf, sizeof(buf), stdin))
			;
	}
	return 0;
}
