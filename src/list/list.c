/* `uscope list`'s rows from ELF files: the binary a user names, the modules
 * of a process, the functions and the USDT probes of a file. */
#include "list/list.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "ns/ns.h"
#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "usdt/usdt.h"

/* A command on the PATH processes under root would have by default. */
static int list_which_in(const char *root, const char *bin, char **path)
{
	static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
					   "/usr/bin", "/sbin", "/bin"};
	struct stat st;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *c;

		if (asprintf(&c, "%s/%s", dirs[i], bin) < 0)
			return -ENOMEM;
		if (!ns_root_resolve(root, c, path) && !stat(*path, &st) && S_ISREG(st.st_mode)) {
			free(c);
			return 0;
		}
		free(*path);
		*path = NULL;
		free(c);
	}
	return -ENOENT;
}

/* usc_list_find_binary under another root. */
static int list_find_in_root(const char *root, const char *bin, char **path)
{
	size_t rl = strlen(root);
	int ret;

	if (!strncmp(bin, root, rl) && bin[rl] == '/')
		bin += rl;	/* a path under the root already */
	ret = strchr(bin, '/') ? ns_root_resolve(root, bin, path) : -ENOENT;

	if (ret == -ENOMEM)
		return ret;
	if (strchr(bin, '/')) {
		if (ret)
			log_error("no such file under %s: %s", root, bin);
		return ret ? -ENOENT : 0;
	}
	if (list_which_in(root, bin, path) && module_find_in_root(root, bin, path)) {
		log_error("no such file, command or library under %s: %s", root, bin);
		return -ENOENT;
	}
	return 0;
}

const char *usc_list_shown_path(const char *root, const char *path)
{
	return ns_shown_path(root, path);
}

int usc_list_find_binary(const char *root, const char *bin, char **path)
{
	if (root)
		return list_find_in_root(root, bin, path);
	if (strchr(bin, '/') || access(bin, F_OK) == 0) {
		if (module_path_resolve(bin, path)) {
			log_error("no such file: %s", bin);
			return -ENOENT;
		}
	} else if (module_which(bin, path) && module_find_system(bin, path)) {
		log_error("no such file, command or library: %s", bin);
		return -ENOENT;
	}
	return 0;
}

/* Has the module at path been handed out already? Else remember it (p is
 * kept). 1: seen, 0: new, -ENOMEM. */
static int list_module_seen(char ***seen, size_t *nseen, char *p)
{
	char **v;

	for (size_t k = 0; k < *nseen; k++)
		if (!strcmp((*seen)[k], p))
			return 1;
	v = realloc(*seen, (*nseen + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*seen = v;
	(*seen)[(*nseen)++] = p;
	return 0;
}

/* Does MODULE (a probe's: "libc", "libc.so.6", a path) name the module at
 * path (name: its short name, or NULL)? */
static bool list_module_is(const char *module, const char *path, const char *name)
{
	if (strchr(module, '/'))
		return !strcmp(module, path);
	return module_name_matches(module, path) || (name && module_name_matches(module, name));
}

int usc_list_modules(pid_t pid, const char *module,
		     void (*fn)(const char *path, const char *name, void *ctx), void *ctx)
{
	struct proc_map *maps;
	ssize_t n = procmaps_read(pid, &maps);
	char **seen = NULL;
	size_t nseen = 0, shown = 0;
	int ret = 0;

	if (n < 0) {
		if (n == -ESRCH || n == -ENOENT)
			log_error("no such process: %d", (int)pid);
		else
			log_error("cannot read the mappings of process %d: %s", (int)pid,
				  strerror((int)-n));
		return (int)n;
	}
	for (ssize_t i = 0; i < n; i++) {
		char *p, *name;
		int dup;

		if (!maps[i].path || maps[i].path[0] != '/' || maps[i].perms[2] != 'x')
			continue;
		/* a memfd (a run-time USDT provider) is opened through /proc */
		if (procmaps_module(pid, maps, (size_t)n, (size_t)i, &p, &name))
			break;
		dup = list_module_seen(&seen, &nseen, p);
		if (dup) {
			free(p);
			free(name);
			if (dup > 0)
				continue;
			break;
		}
		if (!module || list_module_is(module, p, name)) {
			fn(p, name, ctx);
			shown++;
		}
		free(name);
	}
	if (module && !shown) {
		char near[256];

		if (module_suggest(seen, nseen, module, near, sizeof(near)))
			log_error("process %d has no module '%s' loaded; did you mean: %s?",
				  (int)pid, module, near);
		else
			log_error("process %d has no module '%s' loaded", (int)pid, module);
		ret = -ENOENT;
	}
	for (size_t k = 0; k < nseen; k++)
		free(seen[k]);
	free(seen);
	procmaps_free(maps, (size_t)n);
	return ret;
}

/* Open the file at path, or log why not: "PATH is not an x86-64 ELF file"
 * when own_line (the function listing's wording), else "cannot open PATH:
 * not an x86-64 ELF file". */
static int list_open(const char *path, bool own_line, struct objfile **ef)
{
	int ret = objfile_open(path, ef);

	if (!ret)
		return 0;
	if (own_line && ret == -ENOEXEC)
		log_error("%s is not an x86-64 ELF file", path);
	else if (own_line)
		log_error("cannot open %s: %s", path, strerror(-ret));
	else
		log_error("cannot open %s: %s", path, ret == -ENOEXEC ? "not an x86-64 ELF file" :
			  strerror(-ret));
	return ret;
}

static void list_func_row(const struct objfile *ef, const struct objfile_sym *s,
			  struct usc_list_func *f)
{
	uint64_t off = 0;

	objfile_vaddr_to_offset(ef, s->vaddr, &off);
	*f = (struct usc_list_func){
		.name = objfile_sym_pretty(s),
		.mangled = s->demangled ? s->name : NULL,
		.version = s->version && !(s->flags & OBJFILE_SYM_DEFAULT_VER) ? s->version : NULL,
		.vaddr = s->vaddr,
		.size = s->size,
		.offset = off,
		.ifunc = s->flags & OBJFILE_SYM_IFUNC,
	};
}

int usc_list_functions(const char *path, const char *pattern, bool every_address,
		       void (*fn)(const struct usc_list_func *f, void *ctx), void *ctx)
{
	struct objfile *ef;
	const char *last = NULL;
	int ret = list_open(path, true, &ef);

	if (ret)
		return ret;
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *s = &ef->syms[i];
		struct usc_list_func f;

		if (pattern && fnmatch(pattern, s->name, 0) && !objfile_sym_match_cxx(s, pattern))
			continue;
		/* one row per name, unless every address is wanted */
		if (!every_address && last && !strcmp(last, objfile_sym_pretty(s)) &&
		    !(s->version && !(s->flags & OBJFILE_SYM_DEFAULT_VER)))
			continue;
		list_func_row(ef, s, &f);
		fn(&f, ctx);
		last = objfile_sym_pretty(s);	/* C1/C2 constructors are one */
	}
	objfile_close(ef);
	return 0;
}

int usc_list_usdt(const char *path, const char *pattern, bool every_site,
		  void (*fn)(const struct usc_list_usdt *u, void *ctx), void *ctx)
{
	struct objfile *ef;
	struct usdt_note *notes = NULL;
	size_t n = 0;
	int ret = list_open(path, false, &ef);

	if (ret)
		return ret;
	ret = usdt_read(ef, &notes, &n);
	if (ret) {
		if (ret != -EINVAL)	/* a malformed note was reported already */
			log_error("%s: cannot read its USDT notes: %s", path, strerror(-ret));
		objfile_close(ef);
		return ret;
	}
	for (size_t i = 0; i < n; i++) {
		const struct usdt_note *nt = &notes[i];
		char full[512];
		bool dup = false;

		snprintf(full, sizeof(full), "%s:%s", nt->provider, nt->name);
		if (pattern && fnmatch(pattern, full, 0))
			continue;
		for (size_t k = 0; k < i && !every_site; k++)
			dup |= !strcmp(notes[k].provider, nt->provider) &&
			       !strcmp(notes[k].name, nt->name);
		if (!dup)
			fn(&(struct usc_list_usdt){.provider = nt->provider, .name = nt->name,
						   .args = nt->args, .pc = nt->pc,
						   .sema = nt->sema}, ctx);
	}
	usdt_notes_free(notes, n);
	objfile_close(ef);
	return 0;
}
