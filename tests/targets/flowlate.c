/* uscope e2e target for `uscope flow -p`: main calls longcall(), which
 * prints "ready" and then blocks reading one line from stdin, so that a
 * tracer can attach while the process is inside longcall. After the line
 * (or EOF), longcall returns; main then calls after() once, prints
 * "flowlate done" and exits 0. */
#include <stdio.h>
#include <string.h>

#define FLOW __attribute__((noipa, noinline, used))

volatile long g_sink;

FLOW long after(long x)
{
	g_sink += x;
	return x + 1;
}

FLOW long longcall(void)
{
	char buf[256];

	printf("ready\n");
	fflush(stdout);
	if (!fgets(buf, sizeof(buf), stdin))
		buf[0] = 0;
	g_sink += (long)strlen(buf);
	return (long)strlen(buf);
}

int main(void)
{
	long n = longcall();

	after(n);
	printf("flowlate done\n");
	fflush(stdout);
	return 0;
}
