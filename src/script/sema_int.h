/* The semantic analyser's parts (sema.c: names, types, statements;
 * sema_call.c: the calls, bpftrace's functions), and what they share. */
#ifndef USC_SCRIPT_SEMA_INT_H
#define USC_SCRIPT_SEMA_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "script/script_int.h"

struct sema {
	struct usc_script *s;
	struct script_diag *d;
	struct script_probeinfo *pr;
	unsigned probe;
	bool final;
	int loops;
	int err;
};

#define FAIL(sm, n, ...) (script_fail((sm)->d, (n)->pos, (n)->len ? (n)->len : 1, __VA_ARGS__), \
			  (sm)->err = -EINVAL)

int sema_expr(struct sema *sm, struct ast *n);
int sema_map_of(struct sema *sm, struct ast *n);
int sema_map_keys(struct sema *sm, struct ast *n);
/* Does every probe of the statement fire at a site of the process (not
 * BEGIN, END, interval)? */
bool sema_on_sites(const struct sema *sm);
int sema_one_stack(struct sema *sm, struct ast *n, unsigned frames);
/* a an integer (what names the call or operand), a a constant integer */
int sema_want_int(struct sema *sm, struct ast *a, const char *what);
int sema_want_const(struct sema *sm, struct ast *a, const char *what, int64_t *v);
/* A call's type (sema_call.c): bpftrace's functions, checked */
int sema_call(struct sema *sm, struct ast *n);
/* A C integer type's name (int32, uint64_t, unsigned long ...) */
int sema_int_type(struct sema *sm, const char *name, struct ast *n, struct ty *t);

#endif
