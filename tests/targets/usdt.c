/* uscope e2e target for USDT probes (<sys/sdt.h>, no semaphore) and a
 * semaphore-guarded provider from usdt_probes.d (dtrace -h / -G).
 *
 *   usdt [N [wait]]
 *
 * Built at -O2 (see the Makefile). The argument specs noted are what gcc 12
 * gives (readelf -n bin/usdt); tests/e2e/test_usdt.py checks them and skips
 * what depends on a form another compiler did not produce.
 *
 * One round, for i = 0..N-1 (N default 5), in this order:
 *   app:tick    (i, (long)i*10)          registers: -4@%ebx -8@%rax
 *   app:msg     (MSGS[i % 3])            char *: 8@%rdi; MSGS = "hello",
 *                                        "with space", "third message"
 *   app:konst   (5)                      constant: -4@$5
 *   app:global  (counter)                global int read in place:
 *                                        -4@counter(%rip); counter = i + 1
 *   app:stack   (v)                      volatile local long, in the frame:
 *                                        -8@-8(%rbp); v = 1000*i + 7
 *   app:inl     (x) at 3 sites           always_inline helper called from
 *                                        site_a/b/c with x = 100+i, 200+i,
 *                                        300+i: 3 sites, -4@%edi each
 *   app:sib     (i, TABLE[i % 8])        arg2 an indexed load, SIB form:
 *                                        -4@%edi -8@(%rax,%rsi,8);
 *                                        TABLE[k] = 1000000 + k
 *   app:sizes   (s, c, n, u)             short s = -(i+1), unsigned char
 *                                        c = 250+i, int n = -1000*(i+1),
 *                                        unsigned long u = 0xffffffff00000000+i:
 *                                        -2@%dx 1@%cl -4@%eax 8@%rdi
 *   prov:sema_event (i)                  -4@%edi, only if
 *                                        PROV_SEMA_EVENT_ENABLED() (its
 *                                        semaphore is raised; usdt_sema.c)
 * then once per round:
 *   app:noargs  ()                       no arguments
 * Without "wait": one round, then prints "usdt done n=N enabled=E" where E
 * is how many times PROV_SEMA_EVENT_ENABLED() was true, and exits 0.
 * With "wait": prints "ready", then one round per line read from stdin,
 * each followed by "round K enabled=E" (E cumulative); at EOF prints
 * "usdt done n=N enabled=E" and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>

static const char *const MSGS[3] = { "hello", "with space", "third message" };

int counter;
long TABLE[8] = { 1000000, 1000001, 1000002, 1000003,
		  1000004, 1000005, 1000006, 1000007 };
static long enabled;
volatile long g_sink;

static inline __attribute__((always_inline)) void inl_probe(int x)
{
	DTRACE_PROBE1(app, inl, x);
	g_sink += x;
}

__attribute__((noinline)) void site_a(int i) { inl_probe(100 + i); }
__attribute__((noinline)) void site_b(int i) { inl_probe(200 + i); }
__attribute__((noinline)) void site_c(int i) { inl_probe(300 + i); }

__attribute__((noinline)) void stack_probe(int i)
{
	volatile long v = 1000L * i + 7;

	DTRACE_PROBE1(app, stack, v);
}

__attribute__((noinline)) void sib_probe(int i, int idx)
{
	DTRACE_PROBE2(app, sib, i, TABLE[idx]);
}

__attribute__((noinline)) void sizes_probe(int i)
{
	short s = (short)-(i + 1);
	unsigned char c = (unsigned char)(250 + i);
	int n = -1000 * (i + 1);
	unsigned long u = 0xffffffff00000000UL + (unsigned long)i;

	DTRACE_PROBE4(app, sizes, s, c, n, u);
}

/* usdt_sema.c: the semaphore-guarded probe; returns 1 when it was enabled */
int sema_probe(int i);

__attribute__((noinline)) void msg_probe(const char *s)
{
	DTRACE_PROBE1(app, msg, s);
}

__attribute__((noinline)) void global_probe(void)
{
	DTRACE_PROBE1(app, global, counter);
}

__attribute__((noinline)) void round_(int n)
{
	for (int i = 0; i < n; i++) {
		DTRACE_PROBE2(app, tick, i, (long)i * 10);
		msg_probe(MSGS[i % 3]);
		DTRACE_PROBE1(app, konst, 5);
		counter = i + 1;
		global_probe();
		stack_probe(i);
		site_a(i);
		site_b(i);
		site_c(i);
		sib_probe(i, i % 8);
		sizes_probe(i);
		enabled += sema_probe(i);
	}
	DTRACE_PROBE(app, noargs);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 0) : 5;
	int wait = argc > 2 && strcmp(argv[2], "wait") == 0;
	char buf[256];
	int k = 0;

	if (!wait) {
		round_(n);
	} else {
		printf("ready\n");
		fflush(stdout);
		while (fgets(buf, sizeof(buf), stdin)) {
			round_(n);
			printf("round %d enabled=%ld\n", ++k, enabled);
			fflush(stdout);
		}
	}
	printf("usdt done n=%d enabled=%ld\n", n, enabled);
	return 0;
}
