/* python/launch.h: the CPython a launcher runs, read from the launchers:
 * env's arguments, a pyenv shim with pyenv's choice of version
 * (PYENV_VERSION, PYENV_ROOT/version, "system"), a shell script's last
 * exec; CPython itself is no launcher. The CPython at the end is Debian's
 * /usr/bin/python3.11 (skipped where absent), reached through symlinks in
 * a fake pyenv root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "python/launch.h"

#define PY "/usr/bin/python3.11"

static char root[PATH_MAX], cwd[PATH_MAX];

static void put(const char *path, const char *text, int mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, (mode_t)mode), 0);
}

static int setup(void **state)
{
	char p[PATH_MAX + 64];

	(void)state;
	if (access(PY, X_OK))
		return 0;
	snprintf(root, sizeof(root), "/tmp/uscope-pylaunch-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(p, sizeof(p), "%s/shims", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/versions", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/versions/3.11.2", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/versions/3.11.2/bin", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/versions/3.11.2/bin/python3.11", root);
	if (symlink(PY, p))
		return -1;
	snprintf(p, sizeof(p), "%s/shims/python3.11", root);
	put(p, "#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\n"
	       "exec \"/nowhere/libexec/pyenv\" exec \"$program\" \"$@\"\n", 0755);
	if (!getcwd(cwd, sizeof(cwd)) || chdir(root))	/* no .python-version above */
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	if (!root[0])
		return 0;
	if (chdir(cwd))
		return -1;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) ? -1 : 0;
}

static void launched(const char *const *argv, const char *want)
{
	char *got = NULL;
	int ret = python_launched((char *const *)argv, &got);

	if (!want) {
		assert_int_equal(ret, -ENOENT);
		assert_null(got);
		return;
	}
	assert_int_equal(ret, 0);
	assert_string_equal(got, want);
	free(got);
}

static void test_pyenv_shim(void **state)
{
	char shim[PATH_MAX + 32], want[PATH_MAX + 64], ver[PATH_MAX + 16];

	(void)state;
	if (!root[0])
		skip();
	snprintf(shim, sizeof(shim), "%s/shims/python3.11", root);
	snprintf(want, sizeof(want), "%s/versions/3.11.2/bin/python3.11", root);
	setenv("PYENV_VERSION", "3.11.2", 1);
	launched((const char *[]){shim, "app.py", NULL}, want);
	/* the first version that has the program */
	setenv("PYENV_VERSION", "3.9.0:3.11.2", 1);
	launched((const char *[]){shim, NULL}, want);
	setenv("PYENV_VERSION", "system", 1);
	launched((const char *[]){shim, NULL}, NULL);
	unsetenv("PYENV_VERSION");
	snprintf(ver, sizeof(ver), "%s/version", root);
	put(ver, "3.9.0\n3.11.2\n", 0644);
	launched((const char *[]){shim, NULL}, want);
	put(ver, "3.10.1\n", 0644);
	launched((const char *[]){shim, NULL}, NULL);	/* pyenv: command not found */
}

static void test_env_and_shell(void **state)
{
	char sh[PATH_MAX + 32];

	(void)state;
	if (!root[0])
		skip();
	launched((const char *[]){"env", "A=1", "-u", "B", PY, "app.py", NULL}, PY);
	launched((const char *[]){"/usr/bin/env", "-i", PY, NULL}, PY);
	launched((const char *[]){"env", "A=1", NULL}, NULL);
	snprintf(sh, sizeof(sh), "%s/run.sh", root);
	put(sh, "#!/bin/sh\nset -e\ncd /\n  exec " PY " \"$@\"\n", 0755);
	launched((const char *[]){sh, NULL}, PY);
	put(sh, "#!/bin/sh\nexec \"$PYTHON\" \"$@\"\n", 0755);
	launched((const char *[]){sh, NULL}, NULL);	/* (not written plainly) */
	put(sh, "#!/bin/sh\nexec env X=1 " PY " -u\n", 0755);
	launched((const char *[]){sh, NULL}, PY);
	/* CPython itself, and what runs none */
	launched((const char *[]){PY, "app.py", NULL}, NULL);
	launched((const char *[]){"/bin/true", NULL}, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pyenv_shim),
		cmocka_unit_test(test_env_and_shell),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
