/* uscope e2e target for -p: prints "ready" then, for each line read from
 * stdin (newline stripped), calls on_line(line, len) and prints
 * "got <k>" (k = 1, 2, ...; flushed, so a test knows the call happened).
 * The line "exec" makes it exec itself afresh (it prints "ready" again);
 * "exec PATH" execs PATH.
 * Exits 0 at EOF. waiter-nopie is the same, not position-independent: an
 * exec maps it at the same addresses. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

volatile int g_seen;

__attribute__((noipa, used)) int on_line(const char *line, int len)
{
	g_seen += len + (line[0] != 0);
	return len;
}

int main(void)
{
	char buf[4096];
	int k = 0;

	printf("ready\n");
	fflush(stdout);
	while (fgets(buf, sizeof(buf), stdin)) {
		size_t len = strlen(buf);
		if (len && buf[len - 1] == '\n')
			buf[--len] = 0;
		on_line(buf, (int)len);
		if (!strcmp(buf, "exec")) {
			execl("/proc/self/exe", "waiter", (char *)NULL);
			return 1;
		}
		if (!strncmp(buf, "exec ", 5)) {
			execl(buf + 5, buf + 5, (char *)NULL);
			return 1;
		}
		printf("got %d\n", ++k);
		fflush(stdout);
	}
	return 0;
}
