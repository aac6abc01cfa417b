/* uscope e2e target: functions with known arguments, called a deterministic
 * number of times.
 *
 *   args [N [STATUS [SIGNAL]]]
 *
 * For i = 1..N (default 5), in this order:
 *   g_iter = i
 *   add(i, 2*i)                       returns 3*i
 *   adjust(-i)                        returns -i - 1 (a negative int argument)
 *   area(i, i+1)                      returns i*(i+1)
 *   handle(&r)  r = {id=i, path=PATHS[i % 3], size=1000*i}, returns i + 7
 *   compute(100003*i)                 returns 3*x + 1
 *   note(msg)   msg = "note <i>"      returns strlen(msg)
 *   pack(word, &bits)  bits = {lo=5, mid=i & 31, hi=0xab, top=7*i}, word is
 *                      the same 32 bits as an unsigned int; returns mid
 *   sum3(&v[1]) v = {i, 10*i, 100*i}  returns 111*i
 * then once: peek((const char *)1), peek("ok") and peek(NULL).
 * Prints "args done n=N total=T" and exits with STATUS (default 0), or kills
 * itself with SIGNAL when given and non-zero.
 *
 * Functions whose name starts with 'a': add, adjust, area (exactly these). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBED __attribute__((noipa, used))

struct req {
	int id;
	char pad[4];
	const char *path;
	long size;
};

struct bits {
	unsigned lo : 3;
	unsigned mid : 5;
	unsigned hi : 8;
	unsigned top : 16;
};

static const char *const PATHS[3] = {
	"/etc/hosts",
	"/tmp/with space",
	"tab\there \"q\"\\",
};

/* Read by tests through @ADDR (args-nopie) and @+FILE_OFFSET. */
volatile long g_iter;
__attribute__((used)) const long g_magic = 0x5eed1234abcdL;
volatile const char *g_sink;

PROBED int add(int a, int b) { return a + b; }
PROBED int adjust(int delta) { return delta - 1; }
PROBED int area(int w, int h) { return w * h; }
PROBED int handle(struct req *r) { return r->id + 7; }
PROBED long compute(long x) { return x * 3 + 1; }
PROBED int note(const char *msg) { return (int)strlen(msg); }
PROBED unsigned pack(unsigned word, const struct bits *b) { (void)word; return b->mid; }
PROBED long sum3(const long *mid) { return mid[-1] + mid[0] + mid[1]; }
PROBED void peek(const char *s) { g_sink = s; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 0) : 5;
	int status = argc > 2 ? (int)strtol(argv[2], NULL, 0) : 0;
	int sig = argc > 3 ? (int)strtol(argv[3], NULL, 0) : 0;
	long total = 0;
	char msg[32];

	for (int i = 1; i <= n; i++) {
		g_iter = i;
		total += add(i, 2 * i);
		total += adjust(-i);
		total += area(i, i + 1);
		struct req r = { .id = i, .path = PATHS[i % 3], .size = 1000L * i };
		total += handle(&r);
		total += compute(100003L * i);
		snprintf(msg, sizeof(msg), "note %d", i);
		total += note(msg);
		struct bits b = { .lo = 5, .mid = (unsigned)i & 31, .hi = 0xab,
				  .top = (unsigned)(7 * i) };
		unsigned word;
		memcpy(&word, &b, sizeof(word));
		total += pack(word, &b);
		long v[3] = { i, 10L * i, 100L * i };
		total += sum3(&v[1]);
	}
	peek((const char *)1);
	peek("ok");
	peek(NULL);
	printf("args done n=%d total=%ld\n", n, total);
	fflush(stdout);
	if (sig)
		raise(sig);
	return status;
}
