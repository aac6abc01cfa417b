/* Roots: the files of a process in another mount namespace (or chrooted),
 * reached from the host through /proc/PID/root (see ns.h). */
#include "ns/ns.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NS_MAX_LINKS 40		/* as the kernel's path walk */

/* The mount namespace link of /proc/<who>/ns/mnt ("mnt:[4026531841]"). */
static int mnt_ns(const char *who, char *buf, size_t len)
{
	char p[64];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/%s/ns/mnt", who);
	n = readlink(p, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

/* A process's /proc entry is gone: -ESRCH; else the errno. */
static int proc_err(pid_t pid, int err)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d", (int)pid);
	if (err == ENOENT || err == ESRCH || access(p, F_OK))
		return -ESRCH;
	return -err;
}

int ns_proc_root(pid_t pid, char **root)
{
	char p[64], who[16], mine[64], theirs[64];
	struct stat a, b;
	int ret;

	*root = NULL;
	snprintf(p, sizeof(p), "/proc/%d/root", (int)pid);
	if (stat(p, &a))
		return proc_err(pid, errno);
	if (stat("/", &b))
		return -errno;
	snprintf(who, sizeof(who), "%d", (int)pid);
	ret = mnt_ns(who, theirs, sizeof(theirs));
	if (ret)
		return proc_err(pid, -ret);
	if (mnt_ns("self", mine, sizeof(mine)))
		mine[0] = 0;
	if (a.st_dev == b.st_dev && a.st_ino == b.st_ino && !strcmp(mine, theirs))
		return 0;
	*root = strdup(p);
	return *root ? 0 : -ENOMEM;
}

size_t ns_magic_root_len(const char *path)
{
	const char *p;

	if (!path || strncmp(path, "/proc/", 6))
		return 0;
	p = path + 6;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	if (strncmp(p, "/root", 5) || (p[5] && p[5] != '/'))
		return 0;
	return (size_t)(p + 5 - path);
}

/* Append "/" name[0..n) to the canonical path res (len *rl). */
static int res_push(char *res, size_t *rl, const char *name, size_t n)
{
	if (*rl + 1 + n >= PATH_MAX)
		return -ENAMETOOLONG;
	res[(*rl)++] = '/';
	memcpy(res + *rl, name, n);
	*rl += n;
	res[*rl] = 0;
	return 0;
}

/* The path still to walk becomes link's target followed by rest. */
static int walk_relink(char *work, const char *target, const char *rest)
{
	char tmp[PATH_MAX];
	int n = snprintf(tmp, sizeof(tmp), "%s%s%s", target, *rest ? "/" : "", rest);

	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(work, tmp, (size_t)n + 1);
	return 0;
}

/* The walk of ns_root_resolve: res (the canonical path so far, "" at the
 * root) through each component of work. */
static int root_walk(const char *root, char *work, char *res)
{
	char full[PATH_MAX + 64], target[PATH_MAX];
	size_t rl = 0;
	unsigned links = 0;
	char *p = work;

	res[0] = 0;
	for (;;) {
		struct stat st;
		const char *name;
		size_t n, keep;
		ssize_t tl;
		int ret;

		while (*p == '/')
			p++;
		if (!*p)
			return 0;
		name = p;
		n = strcspn(p, "/");
		p += n;
		if (n == 1 && name[0] == '.')
			continue;
		if (n == 2 && name[0] == '.' && name[1] == '.') {
			char *s = strrchr(res, '/');

			rl = s ? (size_t)(s - res) : 0;	/* never above the root */
			res[rl] = 0;
			continue;
		}
		keep = rl;
		if ((ret = res_push(res, &rl, name, n)))
			return ret;
		if (snprintf(full, sizeof(full), "%s%s", root, res) >= (int)sizeof(full))
			return -ENAMETOOLONG;
		if (lstat(full, &st))
			return -errno;
		if (S_ISLNK(st.st_mode)) {
			if (++links > NS_MAX_LINKS)
				return -ELOOP;
			tl = readlink(full, target, sizeof(target) - 1);
			if (tl < 0)
				return -errno;
			target[tl] = 0;
			rl = target[0] == '/' ? 0 : keep;	/* absolute: from the root */
			res[rl] = 0;
			if ((ret = walk_relink(work, target, p)))
				return ret;
			p = work;
			continue;
		}
		if (*p && !S_ISDIR(st.st_mode))
			return -ENOTDIR;
	}
}

int ns_root_resolve(const char *root, const char *cpath, char **out)
{
	char work[PATH_MAX], res[PATH_MAX];
	size_t rootl;
	int ret;

	*out = NULL;
	if (!root) {
		if (!(*out = realpath(cpath, NULL)))
			return -errno;
		return 0;
	}
	rootl = strlen(root);
	while (rootl > 0 && root[rootl - 1] == '/')
		rootl--;	/* "/" is "" */
	if (snprintf(work, sizeof(work), "%s", cpath) >= (int)sizeof(work))
		return -ENAMETOOLONG;
	{
		char r[PATH_MAX];

		if (rootl >= sizeof(r))
			return -ENAMETOOLONG;
		memcpy(r, root, rootl);
		r[rootl] = 0;
		ret = root_walk(r, work, res);
		if (ret)
			return ret;
		if (asprintf(out, "%s%s", r, res[0] ? res : r[0] ? "" : "/") < 0) {
			*out = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

int ns_realpath(const char *path, char **out)
{
	size_t l = ns_magic_root_len(path);
	char root[64];

	if (!l || l >= sizeof(root))
		return ns_root_resolve(NULL, path, out);
	memcpy(root, path, l);
	root[l] = 0;
	return ns_root_resolve(root, path[l] ? path + l : "/", out);
}

const char *ns_shown_path(const char *root, const char *path)
{
	size_t l = root ? strlen(root) : 0;

	while (l > 1 && root[l - 1] == '/')
		l--;
	if (l > 1 && !strncmp(path, root, l) && path[l] == '/')
		return path + l;
	l = ns_magic_root_len(path);
	if (l && path[l] == '/')
		return path + l;
	return path;
}

void ns_view_free(struct ns_view *v)
{
	free(v->root);
	free(v->kroot);
	v->root = v->kroot = NULL;
}

int ns_view_get(pid_t pid, struct ns_view *v)
{
	char buf[PATH_MAX];
	ssize_t n;
	int ret;

	*v = (struct ns_view){.pid = pid};
	ret = ns_proc_root(pid, &v->root);
	if (ret || !v->root)
		return ret;
	n = readlink(v->root, buf, sizeof(buf) - 1);
	if (n < 0) {
		ret = proc_err(pid, errno);
		ns_view_free(v);
		return ret;
	}
	buf[n] = 0;
	if (!(v->kroot = strdup(buf))) {
		ns_view_free(v);
		return -ENOMEM;
	}
	return 0;
}

int ns_view_path(const struct ns_view *v, const char *kpath, uint64_t ino, char **out)
{
	const char *cpath = kpath;
	size_t kl;
	struct stat st;

	*out = NULL;
	if (!v->root)
		return (*out = strdup(kpath)) ? 0 : -ENOMEM;
	kl = strlen(v->kroot);
	while (kl > 0 && v->kroot[kl - 1] == '/')
		kl--;
	if (kl) {
		if (strncmp(kpath, v->kroot, kl) || kpath[kl] != '/')
			return -ENOENT;	/* outside its root */
		cpath = kpath + kl;
	}
	if (cpath[0] != '/')
		return -ENOENT;
	if (asprintf(out, "%s%s", v->root, cpath) < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	if (ino && (stat(*out, &st) || (uint64_t)st.st_ino != ino)) {
		free(*out);
		*out = NULL;
		return -ENOENT;
	}
	return 0;
}
