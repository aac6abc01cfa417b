/* JIT frames' names from a process's perf map (src/stack/perfmap.c): the
 * lines perf reads ("START SIZE name", hex), a later line winning over an
 * earlier one it overlaps, the map read on as it grows (a line not whole
 * yet left for later), the .dump read after the .map. The process here is
 * a pid no process has (no /proc entry): its maps are /tmp's. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "stack/stack_int.h"

static pid_t free_pid(void)
{
	char path[64];

	for (pid_t p = 4000000; p > 1; p--) {
		snprintf(path, sizeof(path), "/proc/%d", (int)p);
		if (access(path, F_OK))
			return p;
	}
	return 0;
}

static void put(const char *path, const char *text, const char *mode)
{
	FILE *f = fopen(path, mode);

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void assert_sym(struct stack_cache *sc, pid_t pid, uint64_t addr, const char *name,
		       uint64_t start)
{
	uint64_t got = 0;
	const char *s = stack_perfmap_sym(sc, pid, addr, &got);

	if (!name) {
		if (s)
			fail_msg("%#llx: %s, want none", (unsigned long long)addr, s);
		return;
	}
	if (!s)
		fail_msg("%#llx: none, want %s", (unsigned long long)addr, name);
	assert_string_equal(s, name);
	assert_int_equal(got, start);
}

static void test_perfmap_lines(void **state)
{
	struct stack_cache *sc = calloc(1, sizeof(*sc));
	pid_t pid = free_pid();
	char map[64], dump[64];

	(void)state;
	assert_non_null(sc);
	assert_true(pid > 0);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	snprintf(dump, sizeof(dump), "/tmp/perf-%d.dump", (int)pid);
	unlink(dump);
	put(map, "1000 100 JS:*first /app/a.js:1:1\n"
		 "0x2000 0x10 LazyCompile:~second\n"
		 "junk line\n"
		 "3000 0 empty\n"
		 "1080 20 later_inside\n"
		 "4000 40 partial", "w");
	assert_sym(sc, pid, 0x1000, "JS:*first /app/a.js:1:1", 0x1000);
	assert_sym(sc, pid, 0x10ff, "JS:*first /app/a.js:1:1", 0x1000);
	assert_sym(sc, pid, 0x1100, NULL, 0);
	assert_sym(sc, pid, 0x2008, "LazyCompile:~second", 0x2000);
	assert_sym(sc, pid, 0x3000, NULL, 0);	/* size 0: no symbol */
	/* a later line over an earlier one's range wins there */
	assert_sym(sc, pid, 0x1090, "later_inside", 0x1080);
	assert_sym(sc, pid, 0x10a0, "JS:*first /app/a.js:1:1", 0x1000);
	/* the last line is not whole yet: not read */
	assert_sym(sc, pid, 0x4000, NULL, 0);
	/* the map grows: read on (the line finished, and a new one that
	 * covers an older symbol: code compiled again where other code was) */
	put(map, "_line\n1000 100 recompiled\n", "a");
	assert_sym(sc, pid, 0x4010, "partial_line", 0x4000);
	assert_sym(sc, pid, 0x1010, "recompiled", 0x1000);
	assert_sym(sc, pid, 0x1090, "recompiled", 0x1000);
	/* a .dump: read after the .map, so its lines win */
	put(dump, "2000 10 from_dump\n", "w");
	stack_perfmaps_free(sc->perfmaps);
	sc->perfmaps = NULL;
	assert_sym(sc, pid, 0x2000, "from_dump", 0x2000);
	assert_sym(sc, pid, 0x1010, "recompiled", 0x1000);
	/* the files gone: what was read stays (a process that has exited) */
	unlink(map);
	unlink(dump);
	assert_sym(sc, pid, 0x2000, "from_dump", 0x2000);
	stack_perfmaps_free(sc->perfmaps);
	free(sc);
}

static void test_perfmap_none(void **state)
{
	struct stack_cache *sc = calloc(1, sizeof(*sc));
	pid_t pid = free_pid();
	char map[64];

	(void)state;
	assert_non_null(sc);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	unlink(map);
	assert_sym(sc, pid, 0x1000, NULL, 0);
	stack_perfmaps_free(sc->perfmaps);
	free(sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_perfmap_lines),
		cmocka_unit_test(test_perfmap_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
