/* Unit tests for src/engine/inject/fiber.c: the fibers the inject engine
 * attaches several processes with. A fiber waiting for its child does not
 * hold up another (the one whose child has exited ends first, and lets the
 * first one's child end); every item runs once, with more items than fibers
 * at once; a wait outside fibers, or with WNOHANG, is waitpid's own. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/inject/remote.h"

#define NKIDS 40

struct kids {
	pid_t pid[NKIDS];
	int status[NKIDS];
	size_t order[NKIDS], nended;
	int hold_w;		/* kid 0 reads until this closes */
	unsigned runs[NKIDS];
};

/* A child that exits with code, or, with fd >= 0, when fd reaches its end
 * (at most 30 s: a test that fails ends); it closes its copy of other. */
static pid_t kid(int code, int fd, int other)
{
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		char c;

		alarm(30);
		if (other >= 0)
			close(other);
		if (fd >= 0)
			while (read(fd, &c, 1) > 0)
				;
		_exit(code);
	}
	return p;
}

static void wait_kid(void *arg, size_t i)
{
	struct kids *k = arg;

	k->runs[i]++;
	assert_int_equal(remote_waitpid(k->pid[i], &k->status[i], 0), k->pid[i]);
	k->order[k->nended++] = i;
	if (i == 1 && k->hold_w >= 0) {
		close(k->hold_w);	/* kid 0 may end now */
		k->hold_w = -1;
	}
}

static void test_a_wait_does_not_hold_up_the_others(void **state)
{
	struct kids k = {.hold_w = -1};
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	k.pid[0] = kid(7, fds[0], fds[1]);
	k.pid[1] = kid(9, -1, fds[1]);
	close(fds[0]);
	k.hold_w = fds[1];
	remote_fibers(2, 2, wait_kid, &k);
	assert_int_equal(k.nended, 2);
	assert_int_equal(k.order[0], 1);
	assert_int_equal(k.order[1], 0);
	assert_true(WIFEXITED(k.status[0]) && WEXITSTATUS(k.status[0]) == 7);
	assert_true(WIFEXITED(k.status[1]) && WEXITSTATUS(k.status[1]) == 9);
}

static void test_more_items_than_fibers(void **state)
{
	struct kids k = {.hold_w = -1};

	(void)state;
	for (int i = 0; i < NKIDS; i++)
		k.pid[i] = kid(i + 1, -1, -1);
	remote_fibers(NKIDS, 8, wait_kid, &k);
	assert_int_equal(k.nended, NKIDS);
	for (int i = 0; i < NKIDS; i++) {
		assert_int_equal(k.runs[i], 1);
		assert_true(WIFEXITED(k.status[i]) && WEXITSTATUS(k.status[i]) == i + 1);
	}
}

static void test_outside_fibers(void **state)
{
	int fds[2], st = 0;
	pid_t p;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	p = kid(3, fds[0], fds[1]);
	close(fds[0]);
	assert_int_equal(remote_waitpid(p, &st, WNOHANG), 0);	/* still reading */
	close(fds[1]);
	assert_int_equal(remote_waitpid(p, &st, 0), p);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
	assert_int_equal(remote_waitpid(p, &st, 0), -1);
	assert_int_equal(errno, ECHILD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_wait_does_not_hold_up_the_others),
		cmocka_unit_test(test_more_items_than_fibers),
		cmocka_unit_test(test_outside_fibers),
	};
	sigset_t chld;

	/* as the session has it: SIGCHLD blocked, read when waited for */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
