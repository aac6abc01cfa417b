/* Finding modules (executables and shared libraries) by short name or path,
 * and the mappings of a running process.
 *
 * Global state: the parsed output of `ldconfig -p` (the ld.so cache) is
 * cached for the life of the process, under a mutex (ldcache_*). */
#include "objfile/modules.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/grow.h"
#include "core/log.h"
#include "ns/ns.h"
#include "objfile/objfile.h"
#include "objfile/modules_int.h"

const char *const module_default_dirs[] = {
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
};
const size_t module_ndefault_dirs = sizeof(module_default_dirs) / sizeof(module_default_dirs[0]);

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static char *path_join(const char *dir, const char *name)
{
	char *s;

	if (asprintf(&s, "%s%s%s", dir, *dir && dir[strlen(dir) - 1] != '/' ? "/" : "",
		     name) < 0)
		return NULL;
	return s;
}

bool module_is_x86_64_elf(const char *path)
{
	unsigned char h[20];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	     pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	     !memcmp(h, "\177ELF", 4) && h[4] == 2 /* ELFCLASS64 */ &&
	     h[5] == 1 /* LSB */ && (h[18] | h[19] << 8) == 62 /* EM_X86_64 */;
	close(fd);
	return ok;
}

/* ---- /proc/PID/maps -------------------------------------------------- */

void procmaps_free(struct proc_map *maps, size_t n)
{
	if (!maps)
		return;
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

static bool pid_exists(pid_t pid)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d", (int)pid);
	return access(p, F_OK) == 0;
}

/* path is the text after the inode: a file path, a pseudo name such as
 * "[heap]" or "[vdso]" (kept), or NULL when empty. */
ssize_t procmaps_read(pid_t pid, struct proc_map **out)
{
	char fn[64], *line = NULL;
	size_t cap = 0, n = 0, alloc = 0;
	struct proc_map *maps = NULL;
	ssize_t len;
	FILE *f;
	int err = 0;

	*out = NULL;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", (int)pid);
	f = fopen(fn, "re");
	if (!f) {
		/* the caller says what it means to its user ("no such process") */
		err = errno == ENOENT ? -ESRCH : -errno;
		log_debug("cannot read %s: %s", fn, strerror(-err));
		return err;
	}
	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		struct proc_map m = { 0 };
		unsigned maj, min;
		int pos = 0;
		char *p;

		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
			   &m.start, &m.end, m.perms, &m.pgoff, &maj, &min, &m.inode, &pos) < 7 ||
		    !pos) {
			log_warn("%s: cannot parse '%s'", fn, line);
			continue;
		}
		m.dev = makedev(maj, min);
		p = line + pos;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p && !(m.path = strdup(p))) {
			err = -ENOMEM;
			break;
		}
		if (core_reserve(maps, alloc, n + 1, 64)) {
			free(m.path);
			err = -ENOMEM;
			break;
		}
		maps[n++] = m;
		errno = 0;
	}
	if (!err && ferror(f))
		err = errno == ESRCH || !pid_exists(pid) ? -ESRCH : -EIO;
	if (!err && n == 0 && !pid_exists(pid))
		err = -ESRCH;
	free(line);
	fclose(f);
	if (!err)
		err = procmaps_rooted(pid, maps, n);	/* a container's: under its root */
	if (err) {
		if (err == -ESRCH)
			log_info("process %d has gone", (int)pid);
		procmaps_free(maps, n);
		return err;
	}
	*out = maps;
	return (ssize_t)n;
}

int procmaps_file_offset_to_addr(const struct proc_map *maps, size_t n,
				 const char *path, uint64_t off, uint64_t *addr)
{
	char *real = NULL;
	struct stat st;
	bool have_st = stat(path, &st) == 0;
	const struct proc_map *best = NULL;

	ns_realpath(path, &real);	/* not the host's file: inside a /proc/N/root */

	for (size_t i = 0; i < n; i++) {
		const struct proc_map *m = &maps[i];
		/* the same file: the same inode of the same device (a memfd's
		 * path is a /proc link), or the same path, when it still names
		 * the file mapped (overlayfs shows another device there) */
		bool same = have_st && m->path && m->inode == (uint64_t)st.st_ino &&
			    m->dev == (uint64_t)st.st_dev;

		if (!same && (!m->path || (strcmp(m->path, path) && (!real || strcmp(m->path, real)))))
			continue;
		if (!same && have_st && m->inode && m->inode != (uint64_t)st.st_ino)
			continue;	/* the file was replaced since */
		if (off < m->pgoff || off - m->pgoff >= m->end - m->start)
			continue;
		if (!best || (m->perms[2] == 'x' && best->perms[2] != 'x'))
			best = m;
	}
	free(real);
	if (!best)
		return -ENOENT;
	*addr = best->start - best->pgoff + off;
	return 0;
}

bool procmaps_placed_whole(const struct proc_map *maps, size_t n, const char *path,
			   uint64_t vaddr0, uint64_t off0, uint64_t vaddr, uint64_t addr)
{
	for (size_t j = 0; j < n; j++)
		if (maps[j].path && !strcmp(maps[j].path, path) && maps[j].pgoff == off0)
			return addr - vaddr == maps[j].start - vaddr0;
	return false;
}

/* " (deleted)" suffix of a mapping whose file was unlinked. */
static void strip_deleted(char *p)
{
	size_t l = strlen(p), sl = strlen(" (deleted)");

	if (l > sl && !strcmp(p + l - sl, " (deleted)"))
		p[l - sl] = 0;
}

bool module_pathless(const char *p)
{
	size_t l = strlen(p), sl = strlen(" (deleted)");

	return !strncmp(p, "/memfd:", 7) || (l > sl && !strcmp(p + l - sl, " (deleted)"));
}

/* A /proc/PID/fd/N of pid that has the file (dev, ino) open, or NULL. */
static char *fd_with(pid_t pid, uint64_t dev, uint64_t ino)
{
	char dir[64], *found = NULL;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(dir)))
		return NULL;
	while (!found && (de = readdir(d))) {
		struct stat st;
		char *p;

		if (de->d_name[0] == '.' || !(p = path_join(dir, de->d_name)))
			continue;
		if (!stat(p, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_dev == dev &&
		    (uint64_t)st.st_ino == ino)
			found = p;
		else
			free(p);
	}
	closedir(d);
	return found;
}

int procmaps_module(pid_t pid, const struct proc_map *maps, size_t n, size_t i, char **path,
		    char **name)
{
	const struct proc_map *m = &maps[i], *first = m;
	struct stat st;
	char *p, *nm;

	*path = NULL;
	if (name)
		*name = NULL;
	if (!module_pathless(m->path)) {
		p = strdup(m->path);
		nm = name ? strdup(base_name(m->path)) : NULL;
	} else {
		/* every mapping of the file gives the same path: its first */
		for (size_t k = 0; k < n; k++)
			if (maps[k].path && maps[k].dev == m->dev && maps[k].inode == m->inode &&
			    maps[k].start < first->start)
				first = &maps[k];
		if (asprintf(&p, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, first->start,
			     first->end) < 0)
			return -ENOMEM;
		if (stat(p, &st)) {	/* no CAP_SYS_ADMIN: a descriptor may do */
			char *fd = fd_with(pid, m->dev, m->inode);

			if (fd) {
				free(p);
				p = fd;
			}
		}
		nm = NULL;
		if (name) {
			const char *b = strncmp(m->path, "/memfd:", 7) ? base_name(m->path) : m->path + 7;

			if ((nm = strdup(b)))
				strip_deleted(nm);
		}
	}
	if (!p || (name && !nm)) {
		free(p);
		free(nm);
		return -ENOMEM;
	}
	*path = p;
	if (name)
		*name = nm;
	return 0;
}

int module_path_resolve(const char *path, char **out)
{
	char *real = NULL;
	struct stat st;
	int err = -ns_realpath(path, &real);	/* a /proc/N/root path stays under it */

	*out = NULL;
	if (real) {
		*out = real;
		return 0;
	}
	/* realpath follows /proc/PID/map_files/X to "/memfd:NAME (deleted)",
	 * which is no path; the link itself leads to the file */
	if (!strncmp(path, "/proc/", 6) && !stat(path, &st) && S_ISREG(st.st_mode))
		return (*out = strdup(path)) ? 0 : -ENOMEM;
	return -err;
}

/* The same, logged. */
static int path_resolve(const char *path, char **out)
{
	int err = module_path_resolve(path, out);

	if (err)
		log_error("cannot find %s: %s", path, strerror(-err));
	return err;
}

/* ---- names ------------------------------------------------------------ */

bool module_name_matches(const char *name, const char *path)
{
	const char *base;
	size_t len;

	if (!name || !*name || !path)
		return false;
	if (strchr(name, '/')) {
		char *a, *b;
		bool eq;
		if (!strcmp(name, path))
			return true;
		a = b = NULL;
		ns_realpath(name, &a);
		ns_realpath(path, &b);
		eq = a && b && !strcmp(a, b);
		free(a);
		free(b);
		return eq;
	}
	base = base_name(path);
	len = strlen(name);
	if (!strcmp(base, name))
		return true;
	if (strncmp(base, name, len))
		return false;
	/* libc -> libc.so.6, libfoo -> libfoo-2.0.so.0 */
	if (!strncmp(base + len, ".so", 3) && (base[len + 3] == 0 || base[len + 3] == '.'))
		return true;
	if (base[len] == '-')
		return true;
	/* libc.so -> libc.so.6, libsqlite3.so.0 -> libsqlite3.so.0.8.6 */
	if (base[len] == '.' && strstr(name, ".so"))
		return true;
	return false;
}

/* ---- candidate sets --------------------------------------------------- */

struct cand {
	char *real;
	bool exact;
	uint64_t dev, ino;	/* a mapped file's (0: not known): one file, one module */
};

struct candset {
	struct cand *v;
	size_t n, cap;
};

static void candset_free(struct candset *cs)
{
	for (size_t i = 0; i < cs->n; i++)
		free(cs->v[i].real);
	free(cs->v);
	cs->v = NULL;
	cs->n = cs->cap = 0;
}

/* Add a file by its real path (deduplicated). check_elf: skip files that
 * are not x86-64 ELF (linker scripts, 32-bit libraries). */
static int candset_add(struct candset *cs, const char *path, const char *name,
		       bool check_elf)
{
	char *real = realpath(path, NULL);
	bool exact;

	if (!real)
		return 0;
	if (check_elf && !module_is_x86_64_elf(real)) {
		free(real);
		return 0;
	}
	exact = !strcmp(base_name(path), name) || !strcmp(base_name(real), name);
	for (size_t i = 0; i < cs->n; i++)
		if (!strcmp(cs->v[i].real, real)) {
			cs->v[i].exact |= exact;
			free(real);
			return 0;
		}
	if (core_reserve(cs->v, cs->cap, cs->n + 1, 8)) {
		free(real);
		return -ENOMEM;
	}
	cs->v[cs->n].real = real;
	cs->v[cs->n].exact = exact;
	cs->v[cs->n].dev = cs->v[cs->n].ino = 0;
	cs->n++;
	return 0;
}

/* One candidate, or the only exact basename match among several. */
static int candset_pick(struct candset *cs, const char *name, const char *where,
			char **out)
{
	size_t nexact = 0, ex = 0;

	if (cs->n == 0)
		return -ENOENT;
	for (size_t i = 0; i < cs->n; i++)
		if (cs->v[i].exact) {
			nexact++;
			ex = i;
		}
	if (cs->n == 1)
		ex = 0;
	else if (nexact != 1) {
		log_error("module '%s' is ambiguous in %s: %zu candidates", name, where,
			  cs->n);
		for (size_t i = 0; i < cs->n; i++)
			log_error("  candidate: %s", cs->v[i].real);
		return -EEXIST;
	}
	*out = cs->v[ex].real;
	cs->v[ex].real = NULL;
	return 0;
}

static int scan_dir(struct candset *cs, const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int err = 0;

	if (!d)
		return 0;
	while (!err && (de = readdir(d))) {
		char *p;
		if (de->d_name[0] == '.' || !module_name_matches(name, de->d_name))
			continue;
		if (!(p = path_join(dir, de->d_name))) {
			err = -ENOMEM;
			break;
		}
		err = candset_add(cs, p, name, true);
		free(p);
	}
	closedir(d);
	return err;
}

/* Split a ':'/';'-separated list; calls fn for each non-empty element. */
static int foreach_dir(const char *list, int (*fn)(const char *dir, void *arg),
		       void *arg)
{
	char *copy, *save = NULL, *tok;
	int r = 0;

	if (!list || !*list)
		return 0;
	if (!(copy = strdup(list)))
		return -ENOMEM;
	for (tok = strtok_r(copy, ":;", &save); tok && !r; tok = strtok_r(NULL, ":;", &save))
		r = fn(tok, arg);
	free(copy);
	return r;
}

struct scan_arg {
	struct candset *cs;
	const char *name;
};

static int scan_dir_cb(const char *dir, void *arg)
{
	struct scan_arg *a = arg;

	return scan_dir(a->cs, dir, a->name);
}

/* ---- ld.so cache ------------------------------------------------------ */

struct ldent {
	char *soname, *path;
};

static pthread_mutex_t ldcache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ldent *ldcache_v;
static size_t ldcache_n;
static bool ldcache_loaded;

static void ldcache_parse(FILE *f)
{
	char *line = NULL;
	size_t cap = 0, alloc = 0;

	while (getline(&line, &cap, f) >= 0) {
		char *p = line, *sp, *paren, *arrow, *path, *nl;
		struct ldent e;

		/* "\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/.../libc.so.6" */
		if (*p != '\t' && *p != ' ')
			continue;
		while (*p == '\t' || *p == ' ')
			p++;
		sp = strchr(p, ' ');
		paren = strchr(p, '(');
		arrow = strstr(p, " => ");
		if (!sp || !paren || !arrow || paren > arrow)
			continue;
		if (!strstr(paren, "x86-64") || strstr(paren, "x86-64") > arrow)
			continue;
		path = arrow + 4;
		if ((nl = strchr(path, '\n')))
			*nl = 0;
		*sp = 0;
		if (*path != '/')
			continue;
		if (core_reserve(ldcache_v, alloc, ldcache_n + 1, 256))
			break;
		e.soname = strdup(p);
		e.path = strdup(path);
		if (!e.soname || !e.path) {
			free(e.soname);
			free(e.path);
			break;
		}
		ldcache_v[ldcache_n++] = e;
	}
	free(line);
}

/* Load the cache once; returns with ldcache_lock held. */
static void ldcache_get(void)
{
	static const char *const cmds[] = {
		"exec /sbin/ldconfig -p 2>/dev/null </dev/null",
		"exec ldconfig -p 2>/dev/null </dev/null",
	};

	pthread_mutex_lock(&ldcache_lock);
	if (ldcache_loaded)
		return;
	ldcache_loaded = true;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]) && !ldcache_n; i++) {
		FILE *f = popen(cmds[i], "re");
		if (!f)
			continue;
		ldcache_parse(f);
		pclose(f);
	}
	if (!ldcache_n)
		log_warn("cannot read the ld.so cache (ldconfig -p)");
}

static void ldcache_put(void)
{
	pthread_mutex_unlock(&ldcache_lock);
}

/* ---- lookups ----------------------------------------------------------- */

int module_find_system(const char *name, char **out)
{
	struct candset cs = { 0 };
	struct scan_arg sa = { &cs, name };
	int err;

	*out = NULL;
	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/'))
		return path_resolve(name, out);

	/* Like ld.so, the first place that has a match wins. */
	err = foreach_dir(getenv("LD_LIBRARY_PATH"), scan_dir_cb, &sa);
	if (err || cs.n) {
		if (!err)
			err = candset_pick(&cs, name, "LD_LIBRARY_PATH", out);
		goto out;
	}
	ldcache_get();
	for (size_t i = 0; i < ldcache_n && !err; i++)
		if (module_name_matches(name, ldcache_v[i].soname) ||
		    module_name_matches(name, ldcache_v[i].path))
			err = candset_add(&cs, ldcache_v[i].path, name, true);
	ldcache_put();
	if (err || cs.n) {
		if (!err)
			err = candset_pick(&cs, name, "the ld.so cache", out);
		goto out;
	}
	for (size_t i = 0; i < module_ndefault_dirs && !err; i++)
		err = scan_dir(&cs, module_default_dirs[i], name);
	if (!err)
		err = candset_pick(&cs, name, "the default library directories", out);
	if (err == -ENOENT)
		log_info("cannot find a module named '%s'", name);
out:
	candset_free(&cs);
	return err;
}

/* ---- dependencies ------------------------------------------------------ */

struct dep {
	char *path;	/* real path */
	char *as;	/* the name it was found under (DT_NEEDED or the argument) */
	char *soname;
};

struct deplist {
	struct dep *v;
	size_t n, cap;
};

static void deplist_free(struct deplist *dl)
{
	for (size_t i = 0; i < dl->n; i++) {
		free(dl->v[i].path);
		free(dl->v[i].as);
		free(dl->v[i].soname);
	}
	free(dl->v);
}

static int deplist_add(struct deplist *dl, const char *real, const char *as)
{
	struct dep *d;

	for (size_t i = 0; i < dl->n; i++)
		if (!strcmp(dl->v[i].path, real))
			return 0;
	if (core_reserve(dl->v, dl->cap, dl->n + 1, 16))
		return -ENOMEM;
	d = &dl->v[dl->n];
	d->path = strdup(real);
	d->as = strdup(as);
	d->soname = NULL;
	if (!d->path || !d->as) {
		free(d->path);
		free(d->as);
		return -ENOMEM;
	}
	dl->n++;
	return 0;
}

/* Expand $ORIGIN, $LIB, $PLATFORM (and the ${...} forms) in a search dir. */
static char *expand_dst(const char *dir, const char *origin)
{
	static const struct { const char *tok, *val; } fixed[] = {
		{ "LIB", "lib/x86_64-linux-gnu" }, { "PLATFORM", "x86_64" },
	};
	size_t cap = strlen(dir) + 1, len = 0;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	for (const char *p = dir; *p;) {
		const char *val = NULL;
		size_t skip = 0, vl;
		if (*p == '$') {
			bool br = p[1] == '{';
			const char *t = p + 1 + br;
			const char *toks[] = { "ORIGIN", fixed[0].tok, fixed[1].tok };
			const char *vals[] = { origin, fixed[0].val, fixed[1].val };
			for (size_t i = 0; i < 3; i++) {
				size_t tl = strlen(toks[i]);
				if (strncmp(t, toks[i], tl))
					continue;
				if (br && t[tl] != '}')
					continue;
				if (!br && (t[tl] == '_' || (t[tl] >= 'A' && t[tl] <= 'Z') ||
					    (t[tl] >= 'a' && t[tl] <= 'z') ||
					    (t[tl] >= '0' && t[tl] <= '9')))
					continue;
				val = vals[i];
				skip = 1 + br + tl + br;
				break;
			}
		}
		if (!val) {
			val = p;
			vl = 1;
			skip = 1;
		} else {
			vl = strlen(val);
		}
		if (len + vl + 1 > cap) {
			char *ns;
			cap = (len + vl + 1) * 2;
			if (!(ns = realloc(s, cap))) {
				free(s);
				return NULL;
			}
			s = ns;
		}
		memcpy(s + len, val, vl);
		len += vl;
		p += skip;
	}
	s[len] = 0;
	return s;
}

struct try_arg {
	const char *needed, *origin;
	char *found;
};

static int try_dir_cb(const char *dir, void *arg)
{
	struct try_arg *a = arg;
	char *d = expand_dst(dir, a->origin), *p;

	if (!d)
		return -ENOMEM;
	p = path_join(d, a->needed);
	free(d);
	if (!p)
		return -ENOMEM;
	if (module_is_x86_64_elf(p)) {
		a->found = p;
		return 1;
	}
	free(p);
	return 0;
}

/* Find a DT_NEEDED entry of obj (exe: the executable) as ld.so would. */
static int find_needed(const struct objfile *obj, const char *obj_real,
		       const struct objfile *exe, const char *exe_real,
		       const char *needed, char **out)
{
	char *origin = strdup(obj_real), *slash;
	struct try_arg ta = { needed, NULL, NULL };
	int r = 0;

	if (!origin)
		return -ENOMEM;
	if ((slash = strrchr(origin, '/')))
		*(slash == origin ? slash + 1 : slash) = 0;
	ta.origin = origin;
	if (strchr(needed, '/')) {
		if (module_is_x86_64_elf(needed) && !(ta.found = strdup(needed)))
			r = -ENOMEM;
		goto out;
	}
	if (!obj->runpath && obj->rpath && (r = foreach_dir(obj->rpath, try_dir_cb, &ta)))
		goto out;
	if (obj != exe && !exe->runpath && exe->rpath) {
		char *eo = strdup(exe_real), *es;
		if (!eo) {
			r = -ENOMEM;
			goto out;
		}
		if ((es = strrchr(eo, '/')))
			*(es == eo ? es + 1 : es) = 0;
		ta.origin = eo;
		r = foreach_dir(exe->rpath, try_dir_cb, &ta);
		ta.origin = origin;
		free(eo);
		if (r)
			goto out;
	}
	if ((r = foreach_dir(getenv("LD_LIBRARY_PATH"), try_dir_cb, &ta)))
		goto out;
	if (obj->runpath && (r = foreach_dir(obj->runpath, try_dir_cb, &ta)))
		goto out;
	ldcache_get();
	for (size_t i = 0; i < ldcache_n; i++)
		if (!strcmp(ldcache_v[i].soname, needed) && module_is_x86_64_elf(ldcache_v[i].path)) {
			if (!(ta.found = strdup(ldcache_v[i].path)))
				r = -ENOMEM;
			break;
		}
	ldcache_put();
	if (ta.found || r)
		goto out;
	for (size_t i = 0; i < module_ndefault_dirs && !r; i++)
		r = try_dir_cb(module_default_dirs[i], &ta);
out:
	free(origin);
	if (r < 0) {
		free(ta.found);
		return r;
	}
	if (!ta.found)
		return -ENOENT;
	*out = ta.found;
	return 0;
}

static bool deplist_has_name(const struct deplist *dl, const char *needed)
{
	for (size_t i = 0; i < dl->n; i++)
		if ((dl->v[i].soname && !strcmp(dl->v[i].soname, needed)) ||
		    !strcmp(base_name(dl->v[i].as), needed))
			return true;
	return false;
}

static int deps_collect(const char *exe_path, struct deplist *dl)
{
	struct objfile *exe = NULL;
	char *exe_real = realpath(exe_path, NULL);
	int err;

	if (!exe_real) {
		err = -errno;
		log_error("cannot find %s: %s", exe_path, strerror(errno));
		return err;
	}
	if ((err = objfile_open_headers(exe_real, &exe)) || (err = deplist_add(dl, exe_real, exe_path)))
		goto out;
	for (size_t i = 0; i < dl->n && !err; i++) {
		struct objfile *obj = exe;
		char *obj_real;

		if (i > 0) {
			int e = objfile_open_headers(dl->v[i].path, &obj);
			if (e) {
				log_warn("cannot read %s: %s", dl->v[i].path, strerror(-e));
				continue;
			}
		}
		if (obj->soname && !(dl->v[i].soname = strdup(obj->soname)))
			err = -ENOMEM;
		obj_real = dl->v[i].path;
		for (size_t k = 0; k < obj->nneeded && !err; k++) {
			const char *nd = obj->needed[k];
			char *found = NULL, *real;
			int e;

			if (deplist_has_name(dl, nd))
				continue;
			e = find_needed(obj, obj_real, exe, exe_real, nd, &found);
			if (e == -ENOENT) {
				log_warn("%s: cannot find %s (needed by %s)", exe_path, nd, obj_real);
				continue;
			}
			if (e) {
				err = e;
				break;
			}
			real = realpath(found, NULL);
			free(found);
			if (!real)
				continue;
			/* dl->v may move: do not keep pointers into it */
			err = deplist_add(dl, real, nd);
			free(real);
			obj_real = dl->v[i].path;
		}
		if (obj != exe)
			objfile_close(obj);
	}
	if (!err && exe->interp) {
		char *real = realpath(exe->interp, NULL);
		if (real) {
			err = deplist_add(dl, real, exe->interp);
			free(real);
		}
	}
out:
	objfile_close(exe);
	free(exe_real);
	return err;
}

void module_list_free(char **list, size_t n)
{
	if (!list)
		return;
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

ssize_t module_deps(const char *exe, char ***out)
{
	struct deplist dl = { 0 };
	char **v;
	int err;

	*out = NULL;
	if ((err = deps_collect(exe, &dl))) {
		deplist_free(&dl);
		return err;
	}
	if (!(v = calloc(dl.n ? dl.n : 1, sizeof(*v)))) {
		deplist_free(&dl);
		return -ENOMEM;
	}
	for (size_t i = 0; i < dl.n; i++) {
		v[i] = dl.v[i].path;
		dl.v[i].path = NULL;
	}
	*out = v;
	err = (int)dl.n;
	deplist_free(&dl);
	return err;
}

int module_find_for_exe(const char *exe, const char *name, char **out)
{
	struct deplist dl = { 0 };
	struct candset cs = { 0 };
	int err;

	*out = NULL;
	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/'))
		return path_resolve(name, out);
	if ((err = deps_collect(exe, &dl)))
		goto out;
	for (size_t i = 0; i < dl.n && !err; i++) {
		const struct dep *d = &dl.v[i];
		bool m = module_name_matches(name, d->path) ||
			 module_name_matches(name, d->as) ||
			 (d->soname && module_name_matches(name, d->soname));
		if (!m)
			continue;
		err = candset_add(&cs, d->path, name, false);
		if (!err && ((d->soname && !strcmp(d->soname, name)) ||
			     !strcmp(base_name(d->as), name))) {
			for (size_t k = 0; k < cs.n; k++)
				if (!strcmp(cs.v[k].real, d->path))
					cs.v[k].exact = true;
		}
	}
	if (!err)
		err = candset_pick(&cs, name, exe, out);
	if (err == -ENOENT)
		log_info("%s does not use a module named '%s'", exe, name);
out:
	candset_free(&cs);
	deplist_free(&dl);
	return err;
}

int module_find_in_pid(pid_t pid, const char *name, char **out)
{
	char fn[64], exe[PATH_MAX];
	struct proc_map *maps = NULL;
	struct candset cs = { 0 };
	ssize_t n, el;
	int err = 0;

	*out = NULL;
	if (!name || !*name)
		return -EINVAL;
	snprintf(fn, sizeof(fn), "/proc/%d/exe", (int)pid);
	el = procexe_read(pid, exe, sizeof(exe));	/* under its root, a container's */
	if (el < 0) {
		if (!pid_exists(pid)) {
			log_info("process %d has gone", (int)pid);
			return -ESRCH;
		}
		if (errno == EACCES || errno == EPERM) {
			err = -errno;
			log_info("cannot read %s: %s", fn, strerror(errno));
			return err;
		}
		el = 0;
	}
	exe[el] = 0;
	if (strchr(name, '/'))
		return path_resolve(name, out);
	n = procmaps_read(pid, &maps);
	if (n < 0)
		return (int)n;

	/* the executable first, then the executable file mappings (a memfd's
	 * by its name: a run-time USDT provider's) */
	for (ssize_t i = -1; i < n && !err; i++) {
		char *p, *short_name = NULL;
		bool exact, dup = false;

		if (i < 0) {
			/* a deleted executable is found among the mappings */
			if (!*exe || module_pathless(exe))
				continue;
			if (!(p = strdup(exe))) {
				err = -ENOMEM;
				break;
			}
		} else {
			if (!maps[i].path || maps[i].path[0] != '/' || maps[i].perms[2] != 'x')
				continue;
			if ((err = procmaps_module(pid, maps, (size_t)n, (size_t)i, &p, &short_name)))
				break;
		}
		if (!module_name_matches(name, short_name ? short_name : p)) {
			free(p);
			free(short_name);
			continue;
		}
		exact = !strcmp(short_name ? short_name : base_name(p), name);
		free(short_name);
		for (size_t k = 0; k < cs.n; k++)
			if (!strcmp(cs.v[k].real, p) ||
			    (i >= 0 && cs.v[k].ino && cs.v[k].ino == maps[i].inode &&
			     cs.v[k].dev == maps[i].dev)) {
				cs.v[k].exact |= exact;
				dup = true;
			}
		if (dup) {
			free(p);
			continue;
		}
		if (core_reserve(cs.v, cs.cap, cs.n + 1, 8)) {
			free(p);
			err = -ENOMEM;
			break;
		}
		cs.v[cs.n].real = p;
		cs.v[cs.n].exact = exact;
		cs.v[cs.n].dev = i >= 0 ? maps[i].dev : 0;
		cs.v[cs.n].ino = i >= 0 ? maps[i].inode : 0;
		cs.n++;
	}
	if (!err) {
		char where[64];
		snprintf(where, sizeof(where), "process %d", (int)pid);
		err = candset_pick(&cs, name, where, out);
		if (err == -ENOENT)
			log_info("process %d has no module named '%s'", (int)pid, name);
	}
	candset_free(&cs);
	procmaps_free(maps, (size_t)n);
	return err;
}

/* ---- PATH ---------------------------------------------------------------- */

static char *make_absolute(const char *p)
{
	char cwd[PATH_MAX];

	if (p[0] == '/')
		return strdup(p);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return path_join(cwd, p);
}

static bool is_exec_file(const char *p)
{
	struct stat st;

	return !stat(p, &st) && S_ISREG(st.st_mode) && !access(p, X_OK);
}

/* The path is made absolute but symlinks are kept (argv[0] semantics). */
int module_which(const char *cmd, char **out)
{
	const char *path;
	char *copy;
	int err = -ENOENT;

	*out = NULL;
	if (!cmd || !*cmd)
		return -ENOENT;
	if (strchr(cmd, '/')) {
		if (!is_exec_file(cmd))
			return -ENOENT;
		return (*out = make_absolute(cmd)) ? 0 : -ENOMEM;
	}
	path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";
	if (!(copy = strdup(path)))
		return -ENOMEM;
	/* empty elements mean the current directory: split by hand */
	for (char *s = copy;; ) {
		char *colon = strchr(s, ':'), *p;
		if (colon)
			*colon = 0;
		p = path_join(*s ? s : ".", cmd);
		if (!p) {
			err = -ENOMEM;
			break;
		}
		if (is_exec_file(p)) {
			*out = make_absolute(p);
			err = *out ? 0 : -ENOMEM;
			free(p);
			break;
		}
		free(p);
		if (!colon)
			break;
		s = colon + 1;
	}
	free(copy);
	if (err == -ENOENT)
		log_debug("%s: not found on PATH", cmd);
	return err;
}
