/* printf's formats (fmt.c): split at compile time, checked against their
 * arguments; formatted by the tracer (print.c). */
#ifndef USC_SCRIPT_FMT_H
#define USC_SCRIPT_FMT_H

#include "script/script_int.h"

/* text[0..n) into f's conversions (pos, len: the format's place, for a
 * mistake). 0 or -EINVAL with d. */
int script_fmt_split(struct usc_script *s, const char *text, size_t n, struct script_fmt *f,
		     uint32_t pos, uint32_t len, struct script_diag *d);
/* The arguments (typed: sema) against f's conversions, and their places in
 * the record (f->size bytes). what: "printf". 0 or -EINVAL with d. */
int script_fmt_check(struct usc_script *s, struct script_fmt *f, const char *what,
		     struct ast *args, uint32_t pos, uint32_t len, struct script_diag *d);

#endif
