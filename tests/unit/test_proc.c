/* Unit tests for src/core/proc.c's descendants: a process tree built here
 * (sh, which forks a sleep and waits on another) is found whole by its
 * parents' links, the root left out; the tree's own copies of this
 * executable (a fork that has not exec'd: uscope's own, to the library) are
 * left out with what descends from them; proc_descendants_each gives each
 * process once. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/proc.h"

/* A child of ours: sh with a sleep in the background and one it waits on
 * (3 processes), or, copy: a fork of this executable that starts that sh
 * (uscope's own, to proc_descendants: none of them counts). */
static pid_t spawn(bool copy)
{
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		if (copy && fork() == 0) {
			execl("/bin/sh", "sh", "-c", "sleep 60 & sleep 61; :", (char *)NULL);
			_exit(127);
		}
		if (copy) {
			pause();
			_exit(0);
		}
		execl("/bin/sh", "sh", "-c", "sleep 60 & sleep 61; :", (char *)NULL);
		_exit(127);
	}
	return p;
}

/* The descendants of root, waiting (bounded) until there are want; sorted. */
static long wait_for(pid_t root, long want, pid_t **out)
{
	long n = -1;

	for (int i = 0; i < 500; i++) {
		n = proc_descendants(root, out);
		if (n == want)
			break;
		free(*out);
		*out = NULL;
		usleep(10000);
	}
	return n;
}

/* p and what descends from it ended (the copy's tree is not ours to
 * proc_descendants, but below p it is). */
static void reap(pid_t p)
{
	pid_t *d = NULL;
	long n = proc_descendants(p, &d);

	for (long i = 0; i < n; i++)
		kill(d[i], SIGKILL);
	free(d);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

static int count_fn(pid_t pid, void *ctx)
{
	pid_t *seen = ctx;

	for (int i = 0; i < 8; i++)
		if (!seen[i]) {
			seen[i] = pid;
			return 0;
		}
	return -E2BIG;
}

static void test_tree_found(void **state)
{
	pid_t sh, *d = NULL, seen[8] = {0};
	long n;

	(void)state;
	sh = spawn(false);
	n = wait_for(getpid(), 3, &d);
	assert_int_equal(n, 3);	/* sh, and its two sleeps */
	for (long i = 0; i < n; i++)
		assert_int_not_equal(d[i], getpid());
	assert_true(d[0] == sh || d[1] == sh || d[2] == sh);
	free(d);
	/* below sh: its two sleeps */
	assert_int_equal(proc_descendants(sh, &d), 2);
	free(d);
	assert_int_equal(proc_descendants_each(getpid(), count_fn, seen), 0);
	assert_true(seen[2] && !seen[3]);	/* each once */
	reap(sh);
}

static void test_own_copies_left_out(void **state)
{
	pid_t copy, *d = NULL;
	long n;

	(void)state;
	copy = spawn(true);
	/* the copy's sh and sleeps exist (below it) but are not ours to take */
	for (int i = 0; i < 500; i++) {
		n = proc_descendants(copy, &d);
		free(d);
		if (n == 3)
			break;
		usleep(10000);
	}
	assert_int_equal(n, 3);
	assert_int_equal(proc_descendants(getpid(), &d), 0);
	assert_null(d);
	reap(copy);
}

static void test_no_such_root(void **state)
{
	pid_t *d = NULL;

	(void)state;
	assert_int_equal(proc_descendants(0x3ffffff0, &d), 0);
	assert_null(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tree_found),
		cmocka_unit_test(test_own_copies_left_out),
		cmocka_unit_test(test_no_such_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
