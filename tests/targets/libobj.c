/* A tiny library of objects for uscope objtrace (tests/e2e/test_objtrace.py):
 * obj_new takes the first free object of a static pool (so a freed address
 * is the next one given out again: reuse is deterministic), obj_free gives
 * it back; op_* receive objects (or not) in various argument registers.
 *
 * Every function takes six integer arguments, the callers passing 0 for
 * those it does not use: without debug info objtrace tests every SysV
 * argument register, and a register beyond a function's own parameters
 * holds whatever its caller left there (a pointer to a followed object,
 * sometimes). With six, the events are exactly the calls that pass an
 * object, with or without debug info. */
#include <pthread.h>
#include <stddef.h>

struct obj {
	long id;
	unsigned value;		/* at offset 8: --field 8:u32 */
	unsigned pad;
};

#define POOL 8

static struct obj pool[POOL];
static int taken[POOL];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define API __attribute__((noipa, visibility("default")))

API struct obj *obj_new(long id, long a2, long a3, long a4, long a5, long a6)
{
	struct obj *o = NULL;

	(void)a2, (void)a3, (void)a4, (void)a5, (void)a6;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < POOL && !o; i++)
		if (!taken[i]) {
			taken[i] = 1;
			o = &pool[i];
		}
	pthread_mutex_unlock(&lock);
	if (o) {
		o->id = id;
		o->value = (unsigned)(id * 100);
	}
	return o;
}

API void obj_free(struct obj *o, long a2, long a3, long a4, long a5, long a6)
{
	(void)a2, (void)a3, (void)a4, (void)a5, (void)a6;
	pthread_mutex_lock(&lock);
	taken[o - pool] = 0;
	pthread_mutex_unlock(&lock);
}

/* an object in arg1 */
API long op_use(struct obj *o, long v, long a3, long a4, long a5, long a6)
{
	return (long)o + v + a3 + a4 + a5 + a6;
}

/* an object in arg2 */
API long op_touch(long n, struct obj *o, long a3, long a4, long a5, long a6)
{
	return n + (long)o + a3 + a4 + a5 + a6;
}

/* no object */
API long op_peek(long a1, long a2, long a3, long a4, long a5, long a6)
{
	return a1 + a2 + a3 + a4 + a5 + a6;
}

/* two objects, in arg3 and arg6 */
API long op_link(long a1, long a2, struct obj *x, long a4, long a5, struct obj *y)
{
	return a1 + a2 + (long)x + a4 + a5 + (long)y;
}
