/* uscope e2e target (interposition): calls ip_alloc, ip_ver and ip_only_b
 * of libipb.so, and says whose definition each call reached (libipa's
 * answers 3n, libipb's 2n: "ipa" or "ipb").
 *   ipmain            prints "ready"; for each line read, one call of each,
 *                     then "got K alloc=WHO ver=WHO"; exits at EOF.
 *   ipmain N [FIFO]   N calls of each, prints "ipmain n=N alloc=WHO
 *                     ver=WHO", then (FIFO) reads FIFO until EOF; exit 0.
 * Built twice: ipmain (libipb.so only: run it with LD_PRELOAD=libipa.so)
 * and ipdeps (libipa.so first in its DT_NEEDED, then libipb.so). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int ip_alloc(int n);
int ip_ver(int n);
int ip_only_b(int n);

static const char *who(int got, int n)
{
	return got == 3 * n ? "ipa" : got == 2 * n ? "ipb" : "?";
}

static void one(int k, const char **a, const char **v)
{
	*a = who(ip_alloc(k), k);
	*v = who(ip_ver(k), k);
	ip_only_b(k);
}

int main(int argc, char **argv)
{
	const char *a = "-", *v = "-";
	char line[256];
	int k = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1) {
		int n = atoi(argv[1]);

		for (k = 1; k <= n; k++)
			one(k, &a, &v);
		printf("ipmain n=%d alloc=%s ver=%s\n", n, a, v);
		if (argc > 2) {
			int fd = open(argv[2], O_RDONLY);

			while (fd >= 0 && read(fd, line, sizeof(line)) > 0)
				;
		}
		return 0;
	}
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		one(++k, &a, &v);
		printf("got %d alloc=%s ver=%s\n", k, a, v);
	}
	return 0;
}
