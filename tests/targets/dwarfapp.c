/* uscope e2e target for arguments by name from debug info. Built at -O0 and
 * -O2 (and a stripped copy whose DWARF sits in a separate file found through
 * .gnu_debuglink). `dwarfapp [N]` calls, for i = 1..N:
 *   handle(&r, i, i % 2, i % 3 ? GREEN : RED) with r = {id=10*i, tag="t<i>",
 *   path=PATHS[i % 3], size=1000*i, next=&head} and head.id = 77,
 * and bumps g_counter before each call, so g_counter == i in handle(i). */
#include <stdio.h>
#include <stdlib.h>

enum color { RED, GREEN = 5 };

struct req {
	int id;
	char tag[8];
	const char *path;
	long size;
	struct req *next;
};

int g_counter;
static const char *const PATHS[3] = {"/zero", "/one", "/two"};

__attribute__((noinline)) long handle(struct req *r, int n, unsigned char flag, enum color c)
{
	long v = r->size + n + flag + (long)c + r->next->id;

	__asm__ volatile("" : "+r"(v)); /* LINE:v-computed */
	return v;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	struct req head = {.id = 77, .tag = "head", .path = "/head"};
	long total = 0;

	for (int i = 1; i <= n; i++) {
		struct req r = {.id = 10 * i, .path = PATHS[i % 3], .size = 1000L * i, .next = &head};

		snprintf(r.tag, sizeof(r.tag), "t%d", i);
		g_counter++;
		total += handle(&r, i, (unsigned char)(i % 2), i % 3 ? GREEN : RED);
	}
	printf("dwarfapp done %ld\n", total);
	return 0;
}
