/* Unit-test fixtures: tests/unit/fixtures/NAME/build.sh builds small ELF
 * files into a fresh temporary directory, found from the repository root
 * (make unit) or from the test binary's place (build/san/tests/). */
#ifndef USC_TESTS_FIXTURE_H
#define USC_TESTS_FIXTURE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline bool fixture_find(const char *name, char *dir, size_t len)
{
	char exe[PATH_MAX], cand[PATH_MAX], *slash;
	ssize_t n;

	snprintf(cand, sizeof(cand), "%s", __FILE__);
	if ((slash = strrchr(cand, '/')))
		*slash = 0;
	else
		snprintf(cand, sizeof(cand), ".");
	snprintf(dir, len, "%s/fixtures/%s", cand, name);
	if (!access(dir, R_OK))
		return true;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return false;
	exe[n] = 0;
	for (int i = 0; i < 4 && (slash = strrchr(exe, '/')); i++)
		*slash = 0;
	snprintf(dir, len, "%s/tests/unit/fixtures/%s", exe, name);
	return !access(dir, R_OK);
}

/* Find fixtures/NAME, make a temporary directory and run build.sh into it.
 * 0 or -1 (with a message on stderr). */
static inline int fixture_build(const char *name, char *dir, size_t dirlen, char *tmp,
				size_t tmplen)
{
	char cmd[3 * PATH_MAX + 256];

	if (!fixture_find(name, dir, dirlen)) {
		fprintf(stderr, "fixtures/%s not found\n", name);
		return -1;
	}
	snprintf(tmp, tmplen, "/tmp/uscope-test-%s-XXXXXX", name);
	if (!mkdtemp(tmp))
		return -1;
	snprintf(cmd, sizeof(cmd), "sh '%s/build.sh' '%s'", dir, tmp);
	if (system(cmd) != 0) {
		fprintf(stderr, "fixture build failed: %s\n", cmd);
		return -1;
	}
	return 0;
}

static inline int fixture_remove(const char *tmp)
{
	char cmd[PATH_MAX + 16];

	if (!tmp[0])
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
