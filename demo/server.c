/* A toy request handler for `make demo`: uscope traces it without any change
 * to this program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct request {
	int id;
	int flags;
	const char *path;
	long size;
};

__attribute__((noinline)) long handle(struct request *r)
{
	long cost = r->size / 512 + (long)strlen(r->path);

	return r->flags & 1 ? -cost : cost;
}

int main(int argc, char **argv)
{
	static const char *const paths[] = {"/index.html", "/api/users", "/img/logo.png",
					    "/api/orders?id=42"};
	int n = argc > 1 ? atoi(argv[1]) : 4;
	long total = 0;

	for (int i = 0; i < n; i++) {
		struct request r = {.id = i, .flags = i % 3 == 2, .path = paths[i % 4],
				    .size = 1024L * (i + 1)};

		total += handle(&r);
	}
	printf("server: handled %d requests, total cost %ld\n", n, total);
	return 0;
}
