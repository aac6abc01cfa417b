/* The driver of libobj.c for uscope objtrace (tests/e2e/test_objtrace.py).
 *   objdrv basic     objects made, used, freed, an address reused
 *   objdrv threads   two threads, an object each, at the same time
 *   objdrv full      two objects made (for --max-objects 1)
 *   objdrv MODE hold MODE, then "ready", then waits for the end of stdin
 *                    (a served run, tests/e2e/test_metrics.py)
 * It prints each object's address as NAME=0x... on stdout. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct obj;

struct obj *obj_new(long id, long a2, long a3, long a4, long a5, long a6);
void obj_free(struct obj *o, long a2, long a3, long a4, long a5, long a6);
long op_use(struct obj *o, long v, long a3, long a4, long a5, long a6);
long op_touch(long n, struct obj *o, long a3, long a4, long a5, long a6);
long op_peek(long a1, long a2, long a3, long a4, long a5, long a6);
long op_link(long a1, long a2, struct obj *x, long a4, long a5, struct obj *y);

#define NEW(id) obj_new(id, 0, 0, 0, 0, 0)
#define FREE(o) obj_free(o, 0, 0, 0, 0, 0)

static void show(const char *name, const struct obj *o)
{
	printf("%s=%p\n", name, (const void *)o);
	fflush(stdout);
}

static void basic(void)
{
	struct obj *a = NEW(1), *b = NEW(2), *c;

	show("a", a);
	show("b", b);
	op_use(a, 10, 0, 0, 0, 0);
	op_touch(5, b, 0, 0, 0, 0);
	op_peek(3, 4, 0, 0, 0, 0);
	op_link(0, 0, b, 0, 0, a);
	FREE(a);
	op_use(a, 11, 0, 0, 0, 0);	/* freed: no longer followed */
	c = NEW(3);			/* a's address again */
	show("c", c);
	op_use(c, 12, 0, 0, 0, 0);
	FREE(b);
	FREE(c);
	op_touch(6, b, 0, 0, 0, 0);
}

static pthread_barrier_t bar;

static void *worker(void *arg)
{
	long id = (long)arg;
	struct obj *o;
	char name[8];

	pthread_barrier_wait(&bar);
	o = NEW(id);
	snprintf(name, sizeof(name), "t%ld", id);
	show(name, o);
	pthread_barrier_wait(&bar);	/* both objects exist */
	for (long k = 0; k < 3; k++)
		op_use(o, k, 0, 0, 0, 0);
	pthread_barrier_wait(&bar);
	FREE(o);
	return NULL;
}

static void threads(void)
{
	pthread_t t[2];

	pthread_barrier_init(&bar, NULL, 2);
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

static void full(void)
{
	struct obj *a = NEW(1), *b = NEW(2);

	show("a", a);
	show("b", b);
	op_use(a, 1, 0, 0, 0, 0);
	op_use(b, 2, 0, 0, 0, 0);	/* not followed: the set was full */
	FREE(a);
	FREE(b);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "basic"))
		basic();
	else if (argc >= 2 && !strcmp(argv[1], "threads"))
		threads();
	else if (argc >= 2 && !strcmp(argv[1], "full"))
		full();
	else {
		fprintf(stderr, "usage: objdrv basic|threads|full [hold]\n");
		return 2;
	}
	if (argc >= 3 && !strcmp(argv[2], "hold")) {
		char buf[256];

		printf("ready\n");
		fflush(stdout);
		while (fread(buf, 1, sizeof(buf), stdin) > 0)
			;
	}
	return 0;
}
