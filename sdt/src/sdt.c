/* libuscope-sdt: providers, probes, loading (see uscope/sdt.h).
 *
 * Loading writes the object elfgen.c builds into a memfd named after the
 * provider and dlopens it through /proc/self/fd/N: no file on disk, and
 * the kernel can place uprobes on the memfd's inode like on any file's.
 * The memfd stays open while the object is loaded: glibc knows a loaded
 * object by the name it was opened under, and a later provider must not
 * get the same /proc/self/fd/N while this one is in use. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sdt_int.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U	/* Linux 6.3: the memfd may be executable */
#endif

struct probe {
	struct usc_probe pub;	/* first: the handle the caller holds is its address */
	char name[USC_SDT_NAME_MAX + 1];
	char args[USC_PROBE_MAX_ARGS * 10 + 1];	/* "-4@%r8d " each */
	char sema_sym[2 * USC_SDT_NAME_MAX + 16];
	unsigned nargs;
	int types[USC_PROBE_MAX_ARGS];
};

struct usc_provider {
	char name[USC_SDT_NAME_MAX + 1];
	struct probe **probes;	/* pointers: handles stay put as the array grows */
	size_t n, cap;
	int fd;			/* the memfd while loaded, else -1 */
	void *dl;		/* the dlopen handle while loaded */
};

/* What a probe points to when its provider is not loaded: a zero
 * semaphore and a stub that does nothing. */
static const volatile uint16_t unloaded_semaphore;

static void unloaded_fire(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
	(void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
}

/* ---- errors ---------------------------------------------------------- */

static __thread char errmsg[512];

int sdt_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	va_end(ap);
	return err;
}

const char *usc_sdt_error(void)
{
	return errmsg;
}

/* ---- providers and probes --------------------------------------------- */

/* A C identifier of at most USC_SDT_NAME_MAX characters: what sys/sdt.h
 * accepts, and what a tracer's probe syntax can name. */
static bool valid_name(const char *s)
{
	size_t i = 0;

	if (!s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return false;
	for (; s[i]; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return i <= USC_SDT_NAME_MAX;
}

int usc_provider_new(const char *name, struct usc_provider **out)
{
	struct usc_provider *p;

	if (!out)
		return sdt_set_error(-EINVAL, "usc_provider_new: no place for the provider");
	*out = NULL;
	if (!valid_name(name))
		return sdt_set_error(-EINVAL, "bad provider name '%s': a C identifier of at most %d "
				     "characters is expected", name ? name : "(null)",
				     USC_SDT_NAME_MAX);
	p = calloc(1, sizeof(*p));
	if (!p)
		return sdt_set_error(-ENOMEM, "out of memory");
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->fd = -1;
	*out = p;
	return 0;
}

static const char *type_name(int t)
{
	switch (t) {
	case USC_ARG_UINT8: return "uint8";
	case USC_ARG_INT8: return "int8";
	case USC_ARG_UINT16: return "uint16";
	case USC_ARG_INT16: return "int16";
	case USC_ARG_UINT32: return "uint32";
	case USC_ARG_INT32: return "int32";
	case USC_ARG_UINT64: return "uint64";
	case USC_ARG_INT64: return "int64";
	case USC_ARG_STRING: return "string";
	default: return NULL;
	}
}

/* The argument registers of the SysV ABI, by argument and by size (8, 4,
 * 2, 1 bytes), as GNU as spells them: what sys/sdt.h would write for an
 * argument that is in its register at the site. */
static const char *const arg_regs[USC_PROBE_MAX_ARGS][4] = {
	{"rdi", "edi", "di", "dil"}, {"rsi", "esi", "si", "sil"}, {"rdx", "edx", "dx", "dl"},
	{"rcx", "ecx", "cx", "cl"}, {"r8", "r8d", "r8w", "r8b"}, {"r9", "r9d", "r9w", "r9b"},
};

static void build_args(struct probe *pr)
{
	size_t len = 0;

	pr->args[0] = 0;
	for (unsigned i = 0; i < pr->nargs; i++) {
		int t = pr->types[i] == USC_ARG_STRING ? USC_ARG_UINT64 : pr->types[i];
		int size = t < 0 ? -t : t;
		int k = size == 8 ? 0 : size == 4 ? 1 : size == 2 ? 2 : 3;

		len += (size_t)snprintf(pr->args + len, sizeof(pr->args) - len, "%s%d@%%%s",
					i ? " " : "", t, arg_regs[i][k]);
	}
}

int usc_provider_add_probev(struct usc_provider *p, struct usc_probe **out, const char *name,
			    const int *types, unsigned n)
{
	struct probe *pr;

	if (out)
		*out = NULL;
	if (!p)
		return sdt_set_error(-EINVAL, "usc_provider_add_probe: no provider");
	if (p->dl)
		return sdt_set_error(-EBUSY, "provider %s is loaded: unload it to add probes",
				     p->name);
	if (!valid_name(name))
		return sdt_set_error(-EINVAL, "bad probe name '%s': a C identifier of at most %d "
				     "characters is expected", name ? name : "(null)",
				     USC_SDT_NAME_MAX);
	if (n > USC_PROBE_MAX_ARGS)
		return sdt_set_error(-E2BIG, "probe %s: %u arguments, at most %d (the SysV "
				     "argument registers)", name, n, USC_PROBE_MAX_ARGS);
	if (n && !types)
		return sdt_set_error(-EINVAL, "probe %s: no argument types", name);
	for (unsigned i = 0; i < n; i++)
		if (!type_name(types[i]))
			return sdt_set_error(-EINVAL, "probe %s: argument %u has an unknown type (%d)",
					     name, i + 1, types[i]);

	pr = calloc(1, sizeof(*pr));
	if (!pr)
		return sdt_set_error(-ENOMEM, "out of memory");
	snprintf(pr->name, sizeof(pr->name), "%s", name);
	snprintf(pr->sema_sym, sizeof(pr->sema_sym), "%s_%s_semaphore", p->name, name);
	/* every probe defines two dynamic symbols: its stub (its name) and
	 * its semaphore; dlsym must find each one's own */
	for (size_t i = 0; i < p->n; i++) {
		const struct probe *o = p->probes[i];

		if (!strcmp(o->name, pr->name) || !strcmp(o->sema_sym, pr->name) ||
		    !strcmp(o->name, pr->sema_sym)) {
			int dup = !strcmp(o->name, pr->name);

			free(pr);
			if (dup)
				return sdt_set_error(-EEXIST, "provider %s already has a probe %s",
						     p->name, name);
			return sdt_set_error(-EEXIST, "probe %s: its symbols clash with probe %s's "
					     "(%s_semaphore names a semaphore)", name, o->name,
					     p->name);
		}
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		struct probe **v = realloc(p->probes, cap * sizeof(*v));

		if (!v) {
			free(pr);
			return sdt_set_error(-ENOMEM, "out of memory");
		}
		p->probes = v;
		p->cap = cap;
	}
	pr->nargs = n;
	for (unsigned i = 0; i < n; i++)
		pr->types[i] = types[i];
	build_args(pr);
	pr->pub.semaphore = &unloaded_semaphore;
	pr->pub.fire = unloaded_fire;
	p->probes[p->n++] = pr;
	if (out)
		*out = &pr->pub;
	return 0;
}

int usc_provider_add_probe(struct usc_provider *p, struct usc_probe **out, const char *name, ...)
{
	int types[USC_PROBE_MAX_ARGS + 1];
	unsigned n = 0;
	va_list ap;
	int t;

	va_start(ap, name);
	while ((t = va_arg(ap, int)) != USC_ARG_END) {
		if (n > USC_PROBE_MAX_ARGS) {
			n++;
			break;	/* too many: say so without reading on */
		}
		types[n++] = t;
	}
	va_end(ap);
	if (n > USC_PROBE_MAX_ARGS) {
		if (out)
			*out = NULL;
		return sdt_set_error(-E2BIG, "probe %s: more than %d arguments (the SysV "
				     "argument registers)", name ? name : "(null)",
				     USC_PROBE_MAX_ARGS);
	}
	return usc_provider_add_probev(p, out, name, types, n);
}

/* ---- loading ----------------------------------------------------------- */

static void probes_unbind(struct usc_provider *p)
{
	for (size_t i = 0; i < p->n; i++) {
		p->probes[i]->pub.semaphore = &unloaded_semaphore;
		p->probes[i]->pub.fire = unloaded_fire;
	}
}

static int memfd_for(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);

	/* before 6.3 MFD_EXEC is unknown (EINVAL); with vm.memfd_noexec = 2
	 * it is refused (EACCES): either way the default is what we need,
	 * since mapping a memfd executable does not depend on its mode */
	if (fd < 0 && (errno == EINVAL || errno == EACCES))
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	return fd;
}

int usc_provider_load(struct usc_provider *p)
{
	struct sdt_gen_probe *gp = NULL;
	struct link_map *lm = NULL;
	char path[64];
	int fd = -1, ret;
	void *dl = NULL;

	if (!p)
		return sdt_set_error(-EINVAL, "usc_provider_load: no provider");
	if (p->dl)
		return sdt_set_error(-EALREADY, "provider %s is already loaded", p->name);
	if (!p->n)
		return sdt_set_error(-ENOENT, "provider %s has no probes to load", p->name);
	gp = calloc(p->n, sizeof(*gp));
	if (!gp)
		return sdt_set_error(-ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n; i++) {
		gp[i].name = p->probes[i]->name;
		gp[i].args = p->probes[i]->args;
		snprintf(gp[i].sema_sym, sizeof(gp[i].sema_sym), "%s", p->probes[i]->sema_sym);
	}
	fd = memfd_for(p->name);
	if (fd < 0) {
		ret = sdt_set_error(-errno, "memfd_create: %s", strerror(errno));
		goto fail;
	}
	ret = sdt_gen_object(fd, p->name, gp, p->n);
	if (ret)
		goto fail;
	/* Nobody changes it from now on. Best effort: a kernel without
	 * sealing still gives a working object. */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();

		ret = sdt_set_error(-EIO, "dlopen of the generated object failed: %s",
				    e ? e : "unknown error");
		goto fail;
	}
	if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) || !lm) {
		ret = sdt_set_error(-EIO, "dlinfo of the generated object failed");
		goto fail;
	}
	for (size_t i = 0; i < p->n; i++) {
		void *fire = dlsym(dl, gp[i].name);
		void *sema = dlsym(dl, gp[i].sema_sym);

		/* the loader's symbols must be the addresses the notes give
		 * (an object already loaded under this name would not be) */
		if (fire != (void *)(lm->l_addr + gp[i].stub_vaddr) ||
		    sema != (void *)(lm->l_addr + gp[i].sema_vaddr)) {
			ret = sdt_set_error(-EIO, "the generated object's symbols %s and %s are not "
					    "where its notes say", gp[i].name, gp[i].sema_sym);
			goto fail;
		}
	}
	for (size_t i = 0; i < p->n; i++) {
		p->probes[i]->pub.semaphore = (const volatile uint16_t *)(lm->l_addr +
									 gp[i].sema_vaddr);
		p->probes[i]->pub.fire = (void (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
						   uint64_t))(lm->l_addr + gp[i].stub_vaddr);
	}
	p->dl = dl;
	p->fd = fd;
	free(gp);
	return 0;

fail:
	if (dl)
		dlclose(dl);
	if (fd >= 0)
		close(fd);
	free(gp);
	return ret;
}

int usc_provider_unload(struct usc_provider *p)
{
	int ret = 0;

	if (!p)
		return sdt_set_error(-EINVAL, "usc_provider_unload: no provider");
	if (!p->dl)
		return sdt_set_error(-EINVAL, "provider %s is not loaded", p->name);
	probes_unbind(p);
	if (dlclose(p->dl)) {
		const char *e = dlerror();

		ret = sdt_set_error(-EIO, "dlclose of the generated object failed: %s",
				    e ? e : "unknown error");
	}
	p->dl = NULL;
	close(p->fd);
	p->fd = -1;
	return ret;
}

void usc_provider_free(struct usc_provider *p)
{
	if (!p)
		return;
	if (p->dl)
		usc_provider_unload(p);
	for (size_t i = 0; i < p->n; i++)
		free(p->probes[i]);
	free(p->probes);
	free(p);
}

int usc_provider_fd(const struct usc_provider *p)
{
	return p && p->dl ? p->fd : -1;
}
