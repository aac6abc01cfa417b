/* Unit tests for src/ns/: paths resolved inside a root as a process there
 * would resolve them (symbolic links, absolute ones included, and ".."
 * never leave the root: the host's file at the same path is never the
 * answer), the root a path lies under, and the paths the kernel prints
 * made paths under a root. A root is built in a temporary directory, with
 * a decoy at each path on the "host" side. */
#include <errno.h>
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

#include "ns/ns.h"

static char base[64];	/* the temporary directory */
static char root[128];	/* base/root: the "container" */

static void put(const char *rel, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void dir(const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void link_(const char *target, const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(base, sizeof(base), "/tmp/uscope-ns-XXXXXX");
	assert_non_null(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/root", base);
	dir("root");
	dir("root/opt");
	dir("root/opt/app");
	dir("root/usr");
	dir("root/usr/lib");
	dir("root/etc");
	put("root/opt/app/server", "container server");
	put("root/usr/lib/libc.so.6", "container libc");
	/* absolute links: inside the root, never the host's /usr/lib */
	link_("/usr/lib", "root/lib");
	link_("/opt/app/server", "root/etc/server-link");
	link_("../../usr/lib/libc.so.6", "root/opt/app/libc-rel");
	link_("loop2", "root/etc/loop1");
	link_("loop1", "root/etc/loop2");
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void expect_resolved(const char *cpath, const char *want_rel)
{
	char want[512], *got = NULL;

	snprintf(want, sizeof(want), "%s%s", root, want_rel);
	assert_int_equal(ns_root_resolve(root, cpath, &got), 0);
	assert_string_equal(got, want);
	free(got);
}

static void test_root_resolve(void **state)
{
	char *got = (char *)1;

	(void)state;
	expect_resolved("/opt/app/server", "/opt/app/server");
	expect_resolved("opt/./app//server", "/opt/app/server");
	/* an absolute link restarts at the root */
	expect_resolved("/lib/libc.so.6", "/usr/lib/libc.so.6");
	expect_resolved("/etc/server-link", "/opt/app/server");
	expect_resolved("/opt/app/libc-rel", "/usr/lib/libc.so.6");
	/* ".." stops at the root */
	expect_resolved("/../../../opt/app/server", "/opt/app/server");
	expect_resolved("/opt/app/../../../usr/lib/libc.so.6", "/usr/lib/libc.so.6");
	expect_resolved("/", "");
	/* the host's /etc/hostname is not the container's */
	assert_int_equal(ns_root_resolve(root, "/etc/hostname", &got), -ENOENT);
	assert_null(got);
	assert_int_equal(ns_root_resolve(root, "/etc/loop1", &got), -ELOOP);
	assert_int_equal(ns_root_resolve(root, "/opt/app/server/x", &got), -ENOTDIR);
}

static void test_root_slash_is_host(void **state)
{
	char *got = NULL;

	(void)state;
	assert_int_equal(ns_root_resolve("/", "/tmp/../tmp", &got), 0);
	assert_string_equal(got, "/tmp");
	free(got);
	assert_int_equal(ns_root_resolve("/", "/", &got), 0);
	assert_string_equal(got, "/");
	free(got);
}

static void test_magic_root(void **state)
{
	char *got = NULL, want[512];

	(void)state;
	assert_int_equal(ns_magic_root_len("/proc/42/root/opt/x"), strlen("/proc/42/root"));
	assert_int_equal(ns_magic_root_len("/proc/42/root"), strlen("/proc/42/root"));
	assert_int_equal(ns_magic_root_len("/proc/42/rootfs/x"), 0);
	assert_int_equal(ns_magic_root_len("/proc/self/root/x"), 0);
	assert_int_equal(ns_magic_root_len("/proc/42/cwd/x"), 0);
	assert_int_equal(ns_magic_root_len("/opt/x"), 0);
	assert_string_equal(ns_shown_path(NULL, "/proc/42/root/opt/x"), "/opt/x");
	assert_string_equal(ns_shown_path(root, "/proc/42/root/opt/x"), "/opt/x");
	snprintf(want, sizeof(want), "%s/opt/app/server", root);
	assert_string_equal(ns_shown_path(root, want), "/opt/app/server");
	assert_string_equal(ns_shown_path(NULL, want), want);
	assert_string_equal(ns_shown_path("/", "/opt/x"), "/opt/x");
	/* our own root, through /proc: inside it, as realpath would not go */
	snprintf(want, sizeof(want), "/proc/%d/root/tmp", (int)getpid());
	assert_int_equal(ns_realpath(want, &got), 0);
	assert_string_equal(got, want);
	free(got);
}

static void test_view_path(void **state)
{
	char kroot[128], *got = NULL, want[512];
	struct ns_view v = {.pid = 1, .root = "/proc/1/root", .kroot = kroot};
	struct ns_view mine = {.pid = 1};
	struct stat st;

	(void)state;
	/* the kernel prints from the namespace's root: a pivot_root'ed
	 * container's paths are its own */
	snprintf(kroot, sizeof(kroot), "/");
	assert_int_equal(ns_view_path(&v, "/opt/app/server", 0, &got), 0);
	assert_string_equal(got, "/proc/1/root/opt/app/server");
	free(got);
	/* a chroot: the paths start with the root as the kernel prints it */
	snprintf(kroot, sizeof(kroot), "/srv/ctr");
	assert_int_equal(ns_view_path(&v, "/srv/ctr/opt/app/server", 0, &got), 0);
	assert_string_equal(got, "/proc/1/root/opt/app/server");
	free(got);
	assert_int_equal(ns_view_path(&v, "/srv/ctrx/opt", 0, &got), -ENOENT);
	assert_int_equal(ns_view_path(&v, "/usr/lib/libc.so.6", 0, &got), -ENOENT);
	/* the inode must be the one mapped */
	v.root = root;
	snprintf(kroot, sizeof(kroot), "/");
	snprintf(want, sizeof(want), "%s/opt/app/server", root);
	assert_int_equal(stat(want, &st), 0);
	assert_int_equal(ns_view_path(&v, "/opt/app/server", st.st_ino, &got), 0);
	assert_string_equal(got, want);
	free(got);
	assert_int_equal(ns_view_path(&v, "/opt/app/server", st.st_ino + 1, &got), -ENOENT);
	/* our own files: as printed */
	assert_int_equal(ns_view_path(&mine, "/usr/lib/x", 0, &got), 0);
	assert_string_equal(got, "/usr/lib/x");
	free(got);
}

static void test_proc_root_and_ids(void **state)
{
	char *r = (char *)1;
	pid_t p = 0, t = 0;

	(void)state;
	/* this process sees our root, in our namespaces */
	assert_int_equal(ns_proc_root(getpid(), &r), 0);
	assert_null(r);
	assert_int_equal(ns_task_ids(getpid(), &p, &t), 0);
	assert_int_equal(p, getpid());
	assert_int_equal(t, getpid());
	assert_int_equal(ns_inner_tid(getpid()), getpid());
	/* a pid that does not exist */
	assert_int_equal(ns_proc_root(0x3ffffff0, &r), -ESRCH);
	assert_int_equal(ns_task_ids(0x3ffffff0, &p, &t), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_root_resolve),
		cmocka_unit_test(test_root_slash_is_host),
		cmocka_unit_test(test_magic_root),
		cmocka_unit_test(test_view_path),
		cmocka_unit_test(test_proc_root_and_ids),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
