/* The unwind tables of a session's engines (unwstore.h): every module's
 * table once, in the order modules were first met, and each process's
 * mappings against them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "cache/cache.h"
#include "objfile/modules.h"
#include "stack/stack_int.h"
#include "stack/unwstore.h"

struct stack_store {
	struct stack_tabset *set;
	struct stack_image img;		/* tabs, rows, idx: maps unused */
	struct stack_vmemo memo;
	uint32_t ntabs_logged;
	double build_ms;		/* tables built or read, all of them */
};

void stack_store_free(struct stack_store *s)
{
	if (!s)
		return;
	if (s->img.ntabs)
		log_debug("stack: %u unwind tables, %u rows, %.1f ms to have them", s->img.ntabs,
			  s->img.nrows, s->build_ms);
	stack_tabset_free(s->set);
	stack_image_free(&s->img);
	stack_vmemo_free(&s->memo);
	free(s);
}

struct stack_store *stack_store_of(struct usc_cache *c)
{
	struct stack_cache *sc = stack_cache_get(c);
	char *dir;

	if (!sc)
		return NULL;
	if (sc->store)
		return sc->store;
	sc->store = calloc(1, sizeof(*sc->store));
	if (!sc->store)
		return NULL;
	dir = getenv("USCOPE_NO_UNWIND_CACHE") ? NULL : stack_cache_dir();
	sc->store->set = stack_tabset_new(dir);
	free(dir);
	if (!sc->store->set) {
		free(sc->store);
		sc->store = NULL;
	}
	return sc->store;
}

const struct stack_image *stack_store_image(const struct stack_store *s)
{
	return &s->img;
}

static double mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int stack_store_maps(struct stack_store *s, pid_t pid, const struct proc_map *m, size_t n,
		     struct stack_map **out, uint32_t *nout)
{
	struct stack_image maps = {0};
	double t0 = mono_ms();
	int err;

	*out = NULL;
	*nout = 0;
	err = stack_image_add_maps(&s->img, s->set, &s->memo, pid, m, n, &maps);
	s->build_ms += mono_ms() - t0;
	if (s->img.ntabs != s->ntabs_logged) {
		log_debug("stack: %u unwind tables (%u rows) after %.1f ms", s->img.ntabs,
			  s->img.nrows, s->build_ms);
		s->ntabs_logged = s->img.ntabs;
	}
	if (err) {
		stack_image_free(&maps);
		return err;
	}
	*out = maps.maps;
	*nout = maps.nmaps;
	maps.maps = NULL;
	stack_image_free(&maps);
	return 0;
}

int stack_store_proc(struct stack_store *s, struct usc_cache *c, pid_t pid, bool refresh,
		     struct stack_map **out, uint32_t *nout)
{
	size_t n = 0;
	const struct proc_map *m = cache_maps(c, pid, refresh, &n);

	*out = NULL;
	*nout = 0;
	if (!m)
		return -ESRCH;
	/* a recording's processes are gone: their pids may be others' now */
	return stack_store_maps(s, cache_frozen(c) ? 0 : pid, m, n, out, nout);
}
