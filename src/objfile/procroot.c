/* Modules of a process that sees another root (a container: its own mount
 * namespace, or a chroot), and modules under a root given: the paths the
 * kernel prints for it made paths the host opens, never the host's own
 * file at the same path (ns/ns.h). */
#include "objfile/modules.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "ns/ns.h"
#include "objfile/modules_int.h"

/* The /proc/PID/map_files link of the first mapping of m's file. */
static char *map_files_path(pid_t pid, const struct proc_map *maps, size_t n,
			    const struct proc_map *m)
{
	const struct proc_map *first = m;
	char *p;

	for (size_t k = 0; k < n; k++)
		if (maps[k].dev == m->dev && maps[k].inode == m->inode &&
		    maps[k].start < first->start)
			first = &maps[k];
	if (asprintf(&p, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, first->start,
		     first->end) < 0)
		return NULL;
	return p;
}

int procmaps_rooted(pid_t pid, struct proc_map *maps, size_t n)
{
	struct ns_view v;
	char *prev_k = NULL, *prev_h = NULL;
	uint64_t prev_ino = 0;
	int ret = 0;

	if (ns_view_get(pid, &v) || !v.root) {
		ns_view_free(&v);
		return 0;	/* ours, or not ours to look into: as the kernel prints them */
	}
	for (size_t i = 0; i < n && !ret; i++) {
		struct proc_map *m = &maps[i];
		char *h = NULL;

		if (!m->path || m->path[0] != '/' || module_pathless(m->path))
			continue;
		if (prev_k && m->inode == prev_ino && !strcmp(prev_k, m->path)) {
			h = strdup(prev_h);	/* the next mapping of the same file */
		} else {
			ret = ns_view_path(&v, m->path, m->inode, &h);
			if (ret == -ENOENT) {
				log_debug("process %d: %s is not in its root: mapped through /proc",
					  (int)pid, m->path);
				h = map_files_path(pid, maps, n, m);
			}
			ret = 0;
		}
		if (!h) {
			ret = -ENOMEM;
			break;
		}
		free(prev_k);
		prev_k = m->path;	/* kept to compare */
		prev_ino = m->inode;
		prev_h = m->path = h;
	}
	free(prev_k);
	ns_view_free(&v);
	return ret;
}

/* The path of the mapping of the file with inode ino (procmaps_rooted's
 * form), or NULL. */
static char *exe_from_maps(pid_t pid, uint64_t ino)
{
	struct proc_map *maps;
	ssize_t n = procmaps_read(pid, &maps);
	char *p = NULL;

	for (ssize_t i = 0; i < n && !p; i++)
		if (maps[i].inode == ino && maps[i].path && maps[i].path[0] == '/')
			p = strdup(maps[i].path);
	if (n >= 0)
		procmaps_free(maps, (size_t)n);
	return p;
}

ssize_t procexe_read(pid_t pid, char *buf, size_t len)
{
	char link[64], *h = NULL;
	struct ns_view v;
	struct stat st;
	uint64_t ino;
	ssize_t n;
	size_t hl;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = 0;
	if (module_pathless(buf) || ns_view_get(pid, &v))
		return n;	/* deleted: the caller says so */
	ino = stat(link, &st) ? 0 : (uint64_t)st.st_ino;
	if (v.root && ns_view_path(&v, buf, ino, &h) && !(ino && (h = exe_from_maps(pid, ino))))
		h = strdup(link);
	ns_view_free(&v);
	if (!h)
		return n;	/* our root: as it is */
	hl = strlen(h);
	if (hl >= len) {
		free(h);
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, h, hl + 1);
	free(h);
	return (ssize_t)hl;
}

/* ---- a MODULE under a root ---------------------------------------------- */

struct root_cands {
	char **v;
	bool *exact;
	size_t n;
};

static int root_cand_add(struct root_cands *c, char *real, bool exact)
{
	char **v;
	bool *e;

	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i], real)) {
			c->exact[i] |= exact;
			free(real);
			return 0;
		}
	v = realloc(c->v, (c->n + 1) * sizeof(*v));
	if (v)
		c->v = v;
	e = v ? realloc(c->exact, (c->n + 1) * sizeof(*e)) : NULL;
	if (e)
		c->exact = e;
	if (!v || !e) {
		free(real);
		return -ENOMEM;
	}
	c->v[c->n] = real;
	c->exact[c->n++] = exact;
	return 0;
}

/* The files of directory dir (as root's processes name it) that name
 * matches, resolved inside root. */
static int root_scan(const char *root, const char *dir, const char *name, struct root_cands *c)
{
	char *full, *cpath, *real;
	struct dirent *de;
	int err = 0;
	DIR *d;

	if (asprintf(&full, "%s%s", root, dir) < 0)
		return -ENOMEM;
	d = opendir(full);
	free(full);
	if (!d)
		return 0;
	while (!err && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !module_name_matches(name, de->d_name))
			continue;
		if (asprintf(&cpath, "%s/%s", dir, de->d_name) < 0) {
			err = -ENOMEM;
			break;
		}
		if (ns_root_resolve(root, cpath, &real)) {
			free(cpath);
			continue;
		}
		free(cpath);
		if (!module_is_x86_64_elf(real)) {
			free(real);
			continue;
		}
		err = root_cand_add(c, real, !strcmp(de->d_name, name) ||
					     !strcmp(strrchr(real, '/') + 1, name));
	}
	closedir(d);
	return err;
}

static int root_pick(struct root_cands *c, const char *root, const char *name, char **out)
{
	size_t nexact = 0, ex = 0;

	for (size_t i = 0; i < c->n; i++)
		if (c->exact[i]) {
			nexact++;
			ex = i;
		}
	if (c->n == 0)
		return -ENOENT;
	if (c->n > 1 && nexact != 1) {
		log_error("module '%s' is ambiguous in %s: %zu candidates", name, root, c->n);
		for (size_t i = 0; i < c->n; i++)
			log_error("  candidate: %s", ns_shown_path(root, c->v[i]));
		return -EEXIST;
	}
	if (c->n == 1)
		ex = 0;
	*out = c->v[ex];
	c->v[ex] = NULL;
	return 0;
}

int module_find_in_root(const char *root, const char *name, char **out)
{
	struct root_cands c = {0};
	int err = 0;

	*out = NULL;
	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/'))
		return ns_root_resolve(root, name, out);
	for (size_t i = 0; i < module_ndefault_dirs && !err; i++)
		err = root_scan(root, module_default_dirs[i], name, &c);
	if (!err)
		err = root_pick(&c, root, name, out);
	for (size_t i = 0; i < c.n; i++)
		free(c.v[i]);
	free(c.v);
	free(c.exact);
	return err;
}
