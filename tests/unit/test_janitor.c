/* The session's janitor (session/janitor.c), without root: what an engine
 * told it and did not say it undid is undone once uscope's end of the
 * socket closes, newest first, and nothing else; the janitor then ends,
 * and holds nothing of ours meanwhile. Its EOF is the same whether uscope
 * exited or was killed (the kernel closes a dead process's files): here the
 * session's end closes it. */
#include <dirent.h>
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

#include "session/session.h"
#include "session/session_int.h"

static char dir[] = "/tmp/uscope-test-janitor-XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static char *slurp(const char *path)
{
	static char buf[256];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = 0;
	return buf;
}

/* The janitor of this process: "uscope-janitor", with our command line. */
static pid_t janitor(void)
{
	char self[512], other[512], path[300];
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;
	ssize_t n;
	int fd;

	fd = open("/proc/self/cmdline", O_RDONLY);
	n = read(fd, self, sizeof(self));
	close(fd);
	assert_true(d && n > 0);
	while ((de = readdir(d))) {
		char comm[32] = "";

		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		if (read(fd, comm, sizeof(comm) - 1) <= 0 || strcmp(comm, "uscope-janitor\n")) {
			close(fd);
			continue;
		}
		close(fd);
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd >= 0 && read(fd, other, sizeof(other)) == n && !memcmp(self, other, (size_t)n))
			found = atoi(de->d_name);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	return found;
}

/* Its open files: the socket and a pidfd of uscope (to know its end), and
 * /dev/null as 0, 1 and 2. */
static void holds_nothing(pid_t pid)
{
	char path[300], link[256];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d))) {
		char fd[600];
		ssize_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(fd, sizeof(fd), "%s/%s", path, de->d_name);
		len = readlink(fd, link, sizeof(link) - 1);
		assert_true(len > 0);
		link[len] = 0;
		if (atoi(de->d_name) < 3)
			assert_string_equal(link, "/dev/null");
		else if (atoi(de->d_name) == 3)
			assert_true(!strncmp(link, "socket:", 7));
		else
			assert_string_equal(link, "anon_inode:[pidfd]");
		n++;
	}
	closedir(d);
	assert_int_equal(n, 5);
}

static void test_undoes_what_is_left(void **state)
{
	struct usc_session_opts o = {0};
	struct usc_session *s;
	char file[300], gone[300], kept[300];
	const struct usc_undo *u;
	int a, b, c, d;
	pid_t pid;
	int fd;

	(void)state;
	path_of(file, sizeof(file), "events");
	path_of(gone, sizeof(gone), "instance");
	path_of(kept, sizeof(kept), "kept");
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(write(fd, "p:one\n", 6), 6);
	close(fd);
	assert_int_equal(mkdir(gone, 0755), 0);
	assert_int_equal(mkdir(kept, 0755), 0);

	assert_int_equal(usc_session_new(&o, &s), 0);
	u = &s->undo;
	assert_null(s->janitor);	/* nothing to undo: no janitor */
	a = u->add(u, USC_UNDO_RMDIR, gone, NULL);
	b = u->add(u, USC_UNDO_WRITE, file, "-:one\n");
	c = u->add(u, USC_UNDO_WRITE, file, "-:two\n");
	d = u->add(u, USC_UNDO_RMDIR, kept, NULL);
	assert_true(a > 0 && b > a && c > b && d > c);
	u->done(u, d);		/* removed by the engine itself: left alone */
	pid = janitor();
	assert_true(pid > 0);
	holds_nothing(pid);
	usc_session_free(s);	/* our end closes: it undoes the rest, and ends */

	/* the newest first, appended */
	assert_string_equal(slurp(file), "p:one\n-:two\n-:one\n");
	assert_int_equal(access(gone, F_OK), -1);
	assert_int_equal(access(kept, F_OK), 0);
	assert_int_equal(janitor(), 0);
	unlink(file);
	rmdir(kept);
}

static void test_nothing_left(void **state)
{
	struct usc_session_opts o = {0};
	struct usc_session *s;
	char file[300];
	const struct usc_undo *u;
	int fd, a;

	(void)state;
	path_of(file, sizeof(file), "events2");
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	close(fd);
	assert_int_equal(usc_session_new(&o, &s), 0);
	u = &s->undo;
	a = u->add(u, USC_UNDO_WRITE, file, "-:x\n");
	assert_true(a > 0);
	u->done(u, a);
	usc_session_free(s);
	assert_string_equal(slurp(file), "");
	assert_int_equal(janitor(), 0);
	unlink(file);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_undoes_what_is_left),
		cmocka_unit_test(test_nothing_left),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
