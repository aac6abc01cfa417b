/* The script parser (parse.c) and the passes after it: what each takes and
 * gives. */
#ifndef USC_SCRIPT_PARSE_H
#define USC_SCRIPT_PARSE_H

#include <stddef.h>

#include "script/ast.h"
#include "script/script.h"

/* src[0..n) into prog, its nodes in a. 0, or -EINVAL with d filled. */
int script_parse(const char *src, size_t n, struct arena *a, struct ast_program *prog,
		 struct script_diag *d);

#endif
