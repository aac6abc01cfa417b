/* The CPython a launcher runs (launch.h): read, never run. */
#include "python/launch.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ns/ns.h"
#include "objfile/modules.h"
#include "python/detect.h"

#define LAUNCH_DEPTH 8		/* launchers of launchers */
#define SCRIPT_BYTES 65536	/* of a shell script read */

static const char *base(const char *p)
{
	const char *b = strrchr(p, '/');

	return b ? b + 1 : p;
}

/* path holds CPython (the runtime, or a libpython it links). */
static bool is_cpython(const char *path)
{
	struct python_runtime rt;
	char **deps = NULL;
	ssize_t n;
	bool yes = !python_find_file(path, &rt);

	if (yes) {
		python_runtime_free(&rt);
		return true;
	}
	n = module_deps(path, &deps);
	for (ssize_t i = 0; i < n && !yes; i++)
		if (!strncmp(base(deps[i]), "libpython", 9) && !python_find_file(deps[i], &rt)) {
			python_runtime_free(&rt);
			yes = true;
		}
	if (n > 0)
		module_list_free(deps, (size_t)n);
	return yes;
}

/* The file's first bytes (NUL-ended, at most SCRIPT_BYTES), or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(SCRIPT_BYTES + 1);
	n = buf ? fread(buf, 1, SCRIPT_BYTES, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = 0;
	if (buf && memchr(buf, 0, n))
		buf[0] = 0;	/* binary: not a script */
	return buf;
}

/* The versions pyenv picks, in its order (blank-separated into v):
 * PYENV_VERSION (colon-separated), else .python-version in the current
 * directory or one above, else PYENV_ROOT/version. */
static int pyenv_versions(const char *root, char *v, size_t len)
{
	const char *env = getenv("PYENV_VERSION");
	char dir[PATH_MAX], file[PATH_MAX + 32];
	FILE *f = NULL;
	size_t n;

	if (env && *env) {
		snprintf(v, len, "%s", env);
		for (char *p = v; *p; p++)
			*p = *p == ':' ? ' ' : *p;
		return 0;
	}
	if (getcwd(dir, sizeof(dir))) {
		for (;;) {
			char *slash;

			snprintf(file, sizeof(file), "%s/.python-version", dir);
			if ((f = fopen(file, "r")))
				break;
			if (!(slash = strrchr(dir, '/')) || slash == dir)
				break;
			*slash = 0;
		}
	}
	if (!f) {
		snprintf(file, sizeof(file), "%s/version", root);
		f = fopen(file, "r");
	}
	if (!f)
		return -ENOENT;
	n = fread(v, 1, len - 1, f);
	fclose(f);
	v[n] = 0;
	for (char *p = v; *p; p++)
		*p = isspace((unsigned char)*p) ? ' ' : *p;
	return 0;
}

/* A pyenv shim (a bash script that runs `pyenv exec NAME`): the program of
 * the first version pyenv would pick that has it. -ENOENT: not a shim;
 * -ESRCH: a shim whose program no version picked has (pyenv refuses it). */
static int pyenv_shim(const char *path, const char *text, char **out)
{
	char root[PATH_MAX], v[1024], prog[PATH_MAX + 300];
	const char *r = getenv("PYENV_ROOT"), *home = getenv("HOME"), *shims;

	if (!strstr(text, "pyenv\" exec") && !strstr(text, "pyenv exec"))
		return -ENOENT;
	/* the shim lives in ROOT/shims */
	if ((shims = strstr(path, "/shims/")))
		snprintf(root, sizeof(root), "%.*s", (int)(shims - path), path);
	else if (r && *r)
		snprintf(root, sizeof(root), "%s", r);
	else
		snprintf(root, sizeof(root), "%s/.pyenv", home ? home : "/root");
	if (pyenv_versions(root, v, sizeof(v)))
		return -ESRCH;
	for (char *w = strtok(v, " "); w; w = strtok(NULL, " ")) {
		if (!strcmp(w, "system"))
			continue;
		snprintf(prog, sizeof(prog), "%s/versions/%s/bin/%s", root, w, base(path));
		if (!access(prog, X_OK))
			return (*out = strdup(prog)) ? 0 : -ENOMEM;
	}
	return -ESRCH;
}

/* A shell script whose last exec runs a program named plainly (no
 * expansion): that program. */
static int shell_exec(const char *text, char **out)
{
	const char *line = text, *last = NULL;
	bool env = false;

	for (; *line; line += strcspn(line, "\n"), line += *line == '\n') {
		const char *p = line;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, "exec", 4) && (p[4] == ' ' || p[4] == '\t'))
			last = p + 5;
	}
	while (last) {
		char word[PATH_MAX];
		size_t k;

		while (*last == ' ' || *last == '\t')
			last++;
		k = strcspn(last, " \t\n;&|");
		if (!k || k >= sizeof(word))
			return -ENOENT;
		memcpy(word, last, k);
		word[k] = 0;
		if (word[0] == '"' || word[0] == '\'') {
			memmove(word, word + 1, k);
			if (k > 1 && (word[k - 2] == '"' || word[k - 2] == '\''))
				word[k - 2] = 0;
		}
		last += k;
		if (!strcmp(base(word), "env")) {
			env = true;	/* exec env [-i] [VAR=x] prog */
			continue;
		}
		if ((env && word[0] == '-') || (strchr(word, '=') && !strchr(word, '/')))
			continue;
		if (strchr(word, '$') || strchr(word, '`') || word[0] == '-')
			return -ENOENT;
		return module_which(word, out);
	}
	return -ENOENT;
}

/* env's program in argv (options and assignments skipped). */
static int env_program(char *const *argv, size_t *at)
{
	size_t i = 1;

	for (; argv[i]; i++) {
		if (!strcmp(argv[i], "-u") || !strcmp(argv[i], "--unset") ||
		    !strcmp(argv[i], "-C") || !strcmp(argv[i], "--chdir")) {
			if (!argv[++i])
				return -ENOENT;
			continue;
		}
		if (argv[i][0] == '-' || strchr(argv[i], '='))
			continue;
		*at = i;
		return 0;
	}
	return -ENOENT;
}

/* chroot [--userspec=U:G] [--groups=G] [--skip-chdir] NEWROOT COMMAND ...:
 * COMMAND inside NEWROOT, as chroot's execvp finds it there (a name on
 * PATH, each directory under NEWROOT), the path the host opens it by
 * (NEWROOT/..., symbolic links followed inside NEWROOT). *at: COMMAND's
 * argv index. */
static int chroot_program(char *const *argv, size_t *at, char **out)
{
	const char *root, *path = getenv("PATH");
	char dirs[4096], cand[PATH_MAX];
	size_t i = 1;

	for (; argv[i] && argv[i][0] == '-'; i++)
		if (!strcmp(argv[i], "--userspec") || !strcmp(argv[i], "--groups"))
			i++;	/* (the value apart) */
	if (!argv[i] || !argv[i + 1])
		return -ENOENT;	/* (no COMMAND: a shell) */
	root = argv[i];
	*at = i + 1;
	if (strchr(argv[i + 1], '/'))
		return ns_root_resolve(root, argv[i + 1], out) ? -ENOENT : 0;
	snprintf(dirs, sizeof(dirs), "%s", path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = strtok(dirs, ":"); d; d = strtok(NULL, ":")) {
		snprintf(cand, sizeof(cand), "%s/%s", d, argv[i + 1]);
		if (!ns_root_resolve(root, cand, out)) {
			if (!access(*out, X_OK))
				return 0;
			free(*out);
			*out = NULL;
		}
	}
	return -ENOENT;
}

/* unshare [OPTION]... COMMAND ...: COMMAND (its options with a value
 * apart skipped: -S, -G, -R, -w, --setuid, --setgid, --root, --wd,
 * --propagation, --setgroups, --map-user, --map-group, ...). */
static int unshare_program(char *const *argv, size_t *at)
{
	static const char *const valued[] = {"-S", "-G", "-R", "-w", "-l", "--setuid",
					     "--setgid", "--root", "--wd", "--propagation",
					     "--setgroups", "--map-user", "--map-group",
					     "--map-users", "--map-groups", "--load-interp", NULL};
	size_t i = 1;

	for (; argv[i] && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		for (size_t k = 0; valued[k]; k++)
			if (!strcmp(argv[i], valued[k]) && argv[i + 1])
				i++;
	}
	if (argv[i] && !strcmp(argv[i], "--"))
		i++;
	if (!argv[i])
		return -ENOENT;
	*at = i;
	return 0;
}

int python_launched(char *const *argv, char **out)
{
	char *const *args = argv;	/* the running launcher's, or NULL */
	char *cur = NULL;

	*out = NULL;
	if (!argv || !argv[0] || module_which(argv[0], &cur))
		return -ENOENT;
	for (int depth = 0; depth < LAUNCH_DEPTH; depth++) {
		char *next = NULL, *text;
		size_t i = 0;
		int ret = -ENOENT;

		if (is_cpython(cur)) {
			if (!depth)
				break;	/* COMMAND itself: not a launcher */
			*out = cur;
			return 0;
		}
		if (!strcmp(base(cur), "env")) {
			if (args && !env_program(args, &i) && !(ret = module_which(args[i], &next)))
				args += i;
		} else if (!strcmp(base(cur), "chroot")) {
			/* (what it runs is named inside its root: no further
			 * launcher of that root is read) */
			if (args && !(ret = chroot_program(args, &i, &next)) && !is_cpython(next)) {
				free(next);
				next = NULL;
				ret = -ENOENT;
			}
			if (!ret) {
				free(cur);
				*out = next;
				return 0;
			}
		} else if (!strcmp(base(cur), "unshare")) {
			if (args && !unshare_program(args, &i) && !(ret = module_which(args[i], &next)))
				args += i;
		} else if ((text = slurp(cur))) {
			if (text[0] == '#' && text[1] == '!')
				ret = pyenv_shim(cur, text, &next);
			if (ret == -ENOENT && text[0] == '#' && text[1] == '!')
				ret = shell_exec(text, &next);
			free(text);
			args = NULL;	/* what it runs has arguments of its own */
		}
		free(cur);
		if (ret)
			return -ENOENT;
		cur = next;
	}
	free(cur);
	return -ENOENT;
}
