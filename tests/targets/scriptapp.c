/* uscope e2e target for uscope script (tests/e2e/test_script*.py): calls
 * with known arguments, a known number of times, so that a program's maps
 * have exact values to check, under uscope script and under bpftrace.
 *
 *   scriptapp MODE [N] [wait]
 *
 * MODE, for i = 0..N-1 (N default 10):
 *   keys     work(i % 5, i): 5 keys, key k called N/5 times with val
 *            k, k+5, k+10 ...; work returns key + val
 *   lat      handle(NAMES[i % 3], 100 * i): NAMES = "alpha", "beta",
 *            "gamma"; returns size / 10
 *   threads  4 threads, each work(100 + t, j) for j < N
 *   usdt     app:req(NAMES[i % 3], 100 * i), its name in a register, and
 *            app:pick(NAMES[i % 3]), its name loaded through an index
 *            register (an SIB operand: 8@(%rax,%rdx,8) or the like)
 *   stack    outer() -> mid() -> leaf(i) N times, and mid() -> leaf() N times
 *   bad      take(p) with p = 1, -1, 0, a freed page's address, i cycling
 *   hot      hot(i): a loop of N calls (benchmarks)
 *   resolve  getaddrinfo(HOSTS[i % 3], "80") N times, then
 *            gethostbyname("localhost") twice (/etc/hosts' names only:
 *            HOSTS = "localhost", "ip6-localhost", "127.0.0.1")
 * With "wait": prints "ready", then one round per line read from stdin
 * (each followed by "round K"), until EOF. Then "scriptapp done MODE N".
 * Built at -O2 (the SIB operand), every probed function noipa. */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sdt.h>
#include <unistd.h>

#define PROBED __attribute__((noipa, noinline))

static const char *const NAMES[3] = {"alpha", "beta", "gamma"};
volatile long sink;
static long n_calls;

PROBED long work(long key, long val)
{
	sink += key * 3 + val;
	return key + val;
}

PROBED int handle(const char *name, int size)
{
	sink += (long)strlen(name) + size;
	return size / 10;
}

PROBED void leaf(long i)
{
	sink += i;
}

PROBED void mid(long i)
{
	leaf(i);
	sink++;
}

PROBED void outer(long i)
{
	mid(i);
	sink++;
}

PROBED void take(const char *p)
{
	sink += (long)(p != NULL);
}

PROBED long hot(long x)
{
	sink += x;
	return x;
}

PROBED void usdt_req(const char *name, int size)
{
	DTRACE_PROBE2(app, req, name, size);
}

PROBED void usdt_pick(int i, int idx)
{
	DTRACE_PROBE2(app, pick, i, NAMES[idx]);
}

static void *thread_main(void *arg)
{
	long t = (long)arg;

	for (long j = 0; j < n_calls; j++)
		work(100 + t, j);
	return NULL;
}

static void round_of(const char *mode, long n)
{
	if (!strcmp(mode, "keys")) {
		for (long i = 0; i < n; i++)
			work(i % 5, i);
	} else if (!strcmp(mode, "lat")) {
		for (long i = 0; i < n; i++)
			handle(NAMES[i % 3], (int)(100 * i));
	} else if (!strcmp(mode, "threads")) {
		pthread_t t[4];

		n_calls = n;
		for (long k = 0; k < 4; k++)
			pthread_create(&t[k], NULL, thread_main, (void *)k);
		for (long k = 0; k < 4; k++)
			pthread_join(t[k], NULL);
	} else if (!strcmp(mode, "usdt")) {
		for (int i = 0; i < n; i++) {
			usdt_req(NAMES[i % 3], 100 * i);
			usdt_pick(i, i % 3);
		}
	} else if (!strcmp(mode, "stack")) {
		for (long i = 0; i < n; i++) {
			outer(i);
			mid(i);
		}
	} else if (!strcmp(mode, "bad")) {
		char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
		const char *bad[4] = {(const char *)1, (const char *)-1L, NULL, page};

		munmap(page, 4096);
		for (long i = 0; i < n; i++)
			take(bad[i % 4]);
	} else if (!strcmp(mode, "hot")) {
		for (long i = 0; i < n; i++)
			hot(i);
	} else if (!strcmp(mode, "resolve")) {
		static const char *const hosts[3] = {"localhost", "ip6-localhost", "127.0.0.1"};

		for (long i = 0; i < n; i++) {
			struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;

			if (!getaddrinfo(hosts[i % 3], "80", &hints, &res))
				freeaddrinfo(res);
		}
		for (int i = 0; i < 2; i++)
			gethostbyname("localhost");
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "keys";
	long n = argc > 2 ? atol(argv[2]) : 10;
	char line[64];
	long k = 0;

	if (argc > 3 && !strcmp(argv[3], "wait")) {
		printf("ready\n");
		fflush(stdout);
		while (fgets(line, sizeof(line), stdin)) {
			round_of(mode, n);
			printf("round %ld\n", ++k);
			fflush(stdout);
		}
	} else {
		round_of(mode, n);
	}
	printf("scriptapp done %s %ld\n", mode, n);
	return 0;
}
