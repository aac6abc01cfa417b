/* A COMMAND that is a script: the program the kernel runs for it. The
 * process image is the interpreter's (`#!/usr/bin/python3.11`), or, through
 * env, the program env runs (`#!/usr/bin/env python3`): probes on the
 * executable resolve there. Scripts of scripts are followed as the kernel
 * does (exec_binprm: at most 5 scripts before the program). The engines
 * follow the execs themselves; this only names the file. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objfile/modules.h"

#define SHEBANG_DEPTH 5		/* exec_binprm's: a 6th script is -ELOOP */
#define SHEBANG_LINE 256	/* the kernel's BINPRM_BUF_SIZE */

/* The "#!" line of path, split into interpreter and its one argument (the
 * kernel passes the rest of the line as one word). 1 when path is a script,
 * 0 when it is not, -errno. */
static int shebang_read(const char *path, char *interp, size_t isz, char *arg, size_t asz)
{
	char line[SHEBANG_LINE + 1];
	FILE *f = fopen(path, "rb");
	size_t n, i = 2, k;

	if (!f)
		return -errno;
	n = fread(line, 1, SHEBANG_LINE, f);
	fclose(f);
	if (n < 2 || line[0] != '#' || line[1] != '!')
		return 0;
	line[n] = 0;
	line[strcspn(line, "\n")] = 0;
	while (line[i] == ' ' || line[i] == '\t')
		i++;
	k = strcspn(line + i, " \t");
	if (!k || k >= isz)
		return -ENOEXEC;
	memcpy(interp, line + i, k);
	interp[k] = 0;
	i += k;
	while (line[i] == ' ' || line[i] == '\t')
		i++;
	k = strlen(line + i);
	while (k && isspace((unsigned char)line[i + k - 1]))
		k--;
	if (k >= asz)
		return -ENOEXEC;
	memcpy(arg, line + i, k);
	arg[k] = 0;
	return 1;
}

/* env's argument: the program it runs ("python3", "-S python3 -u"), or NULL
 * for what env does not run directly (an assignment, another option). */
static const char *env_program(char *arg)
{
	char *p = arg;

	if (!strncmp(p, "-S", 2) && (p[2] == ' ' || p[2] == '\t'))
		p += 3;
	while (*p == ' ' || *p == '\t')
		p++;
	p[strcspn(p, " \t")] = 0;
	if (!*p || *p == '-' || strchr(p, '='))
		return NULL;
	return p;
}

int module_script_program(const char *path, char **out)
{
	char interp[SHEBANG_LINE], arg[SHEBANG_LINE], rel[SHEBANG_LINE + 2];
	char *cur = strdup(path);
	int depth = 0;

	*out = NULL;
	if (!cur)
		return -ENOMEM;
	for (;;) {
		int ret = shebang_read(cur, interp, sizeof(interp), arg, sizeof(arg));
		const char *b, *prog;
		char *next = NULL;

		if (ret <= 0 || depth == SHEBANG_DEPTH) {
			if (ret == 0 && depth) {
				*out = cur;
				return 0;
			}
			free(cur);
			return ret < 0 ? ret : depth ? -ELOOP : -ENOEXEC;
		}
		depth++;
		b = strrchr(interp, '/');
		prog = interp;
		if (!strcmp(b ? b + 1 : interp, "env") && !(prog = env_program(arg))) {
			free(cur);
			return -ENOEXEC;
		}
		/* the kernel opens an interpreter as given (a bare name in the
		 * current directory); env looks its program up on PATH */
		if (prog == interp && !strchr(interp, '/')) {
			snprintf(rel, sizeof(rel), "./%s", interp);
			prog = rel;
		}
		ret = module_which(prog, &next);
		free(cur);
		if (ret)
			return ret;
		cur = next;
	}
}
