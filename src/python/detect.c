/* Recognising CPython (detect.h): exported symbols through libelf, version
 * from Py_Version, addresses in a process through its mappings. */
#include "python/detect.h"

#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "ns/ns.h"
#include "objfile/modules.h"
#include "python/debugoffs.h"

enum { S_VERSION, S_RUNTIME, S_CODE, S_UNICODE, S_BYTES, S_INIT,
	/* what tells 3.8, 3.9 and 3.10 apart (no Py_Version before 3.11) */
	S_POSONLY, S_FRAME_GETCODE, S_IS_NONE, S_REFTOTAL,
	/* struct python_api's, in its order */
	S_SET_PROFILE, S_ADD_PENDING, S_NONE, S_TRUE, S_FALSE, S_LONG, S_BOOL,
	S_SYS_GET, S_CALL_METHOD, S_GETATTR, S_CMETHOD_NEW, S_INCREF, S_DECREF, S_ERR_FETCH,
	S_ERR_RESTORE, S_ERR_CLEAR, S_LONG_AS_LONG, S_TSTATE_GET, S_EVAL_DEFAULT, S_EVAL_SET,
	S_EVAL_GET, S_N };
static const char *const sym_names[S_N] = {
	"Py_Version", "_PyRuntime", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type",
	"Py_Initialize", "PyCode_NewWithPosOnlyArgs", "PyFrame_GetCode", "Py_IsNone",
	"_Py_RefTotal", "_PyEval_SetProfile", "Py_AddPendingCall", "_Py_NoneStruct",
	"_Py_TrueStruct", "_Py_FalseStruct", "PyLong_Type", "PyBool_Type",
	"PySys_GetObject", "PyObject_CallMethod", "PyObject_GetAttrString", "PyCMethod_New",
	"Py_IncRef", "Py_DecRef", "PyErr_Fetch", "PyErr_Restore", "PyErr_Clear", "PyLong_AsLong",
	"PyThreadState_GetUnchecked", "_PyEval_EvalFrameDefault",
	"_PyInterpreterState_SetEvalFrameFunc", "_PyInterpreterState_GetEvalFrameFunc",
};

struct pyfile {
	uint64_t vaddr[S_N];	/* 0: not defined */
	uint64_t foff[S_N];	/* file offsets of the data symbols */
	/* the first PT_LOAD, its page: mapped at the load bias plus vaddr0 */
	uint64_t vaddr0, off0;
	bool have_load0;
};

/* vaddr -> file offset through a PT_LOAD that has it in the file. */
static bool file_offset(Elf *e, uint64_t vaddr, uint64_t len, uint64_t *off)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(e, &n))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr <= ph.p_filesz &&
		    ph.p_filesz - (vaddr - ph.p_vaddr) >= len) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return true;
		}
	}
	return false;
}

static void first_load(Elf *e, struct pyfile *pf)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(e, &n))
		return;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
			pf->vaddr0 = ph.p_vaddr & ~0xfffULL;
			pf->off0 = ph.p_offset & ~0xfffULL;
			pf->have_load0 = true;
			return;
		}
}

static void scan_syms(Elf *e, struct pyfile *pf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    !(name = elf_strptr(e, sh.sh_link, sym.st_name)))
				continue;
			for (int k = 0; k < S_N; k++)
				if (!pf->vaddr[k] && !strcmp(name, sym_names[k]))
					pf->vaddr[k] = sym.st_value;
		}
	}
}

/* Is name a defined symbol of .dynsym, by its .gnu.hash (the dynamic
 * linker's lookup)? 1 yes, 0 no, -1 no such table. A large program that is
 * no Python (node: 75,000 exported and 107,000 local symbols) is told so in
 * microseconds, not by reading every name (0.4 s). */
static int dynsym_has(Elf *e, const char *name)
{
	Elf_Scn *scn = NULL, *hs = NULL, *ds = NULL;
	GElf_Shdr sh, dsh;
	Elf_Data *hd, *dd;
	const uint32_t *w, *buckets, *chain;
	uint32_t h = 5381, nb, symoff, nbloom;
	size_t words;

	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_HASH)
			hs = scn;
	if (!hs || !gelf_getshdr(hs, &sh) || !(ds = elf_getscn(e, sh.sh_link)) ||
	    !gelf_getshdr(ds, &dsh) || dsh.sh_type != SHT_DYNSYM || !dsh.sh_entsize ||
	    !(hd = elf_rawdata(hs, NULL)) || !(dd = elf_getdata(ds, NULL)) ||
	    hd->d_size < 16 || ((uintptr_t)hd->d_buf & 3))
		return -1;
	w = hd->d_buf;
	words = hd->d_size / 4;
	nb = w[0];
	symoff = w[1];
	nbloom = w[2];
	if (!nb || (uint64_t)4 + 2ull * nbloom + nb > words)
		return -1;
	buckets = w + 4 + 2 * (size_t)nbloom;
	chain = buckets + nb;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	if (buckets[h % nb] < symoff)
		return 0;	/* an empty bucket */
	for (uint32_t i = buckets[h % nb]; i >= symoff; i++) {
		GElf_Sym sym;
		const char *n;
		size_t ci = (size_t)(chain - w) + (i - symoff);

		if (ci >= words)
			return -1;
		if ((w[ci] | 1) == (h | 1) && gelf_getsym(dd, (int)i, &sym) &&
		    (n = elf_strptr(e, dsh.sh_link, sym.st_name)) && !strcmp(n, name))
			return sym.st_shndx != SHN_UNDEF;
		if (w[ci] & 1)
			break;
	}
	return 0;
}

/* "3.10" out of a name such as python3.10 or libpython3.10.so.1.0 */
static bool version_in_name(const char *path, char *buf, size_t len)
{
	const char *b = strrchr(path, '/'), *p;

	b = b ? b + 1 : path;
	if (!(p = strstr(b, "python")))
		return false;
	p += 6;
	if (!isdigit((unsigned char)p[0]) || p[1] != '.' || !isdigit((unsigned char)p[2]))
		return false;
	snprintf(buf, len, "%c.%.*s", p[0], (int)strspn(p + 2, "0123456789"), p + 2);
	return true;
}

static int refuse(const char *path, const char *version, bool quiet)
{
	if (!quiet)
		log_error("python: %s is CPython %s; uscope reads the frames of CPython 3.8 to "
			  "3.15 only", path, version);
	return -ENOTSUP;
}

/* Before 3.11 (no Py_Version): the minor version by what the runtime
 * exports, which each adds (PyCode_NewWithPosOnlyArgs 3.8,
 * PyFrame_GetCode 3.9, Py_IsNone 3.10), as PY_VERSION_HEX with no patch
 * level (python_version_str says "3.10"); 0: older than 3.8. The name
 * (python3.10, libpython3.10.so.1.0) must not say otherwise. */
static uint32_t version_before_311(const char *path, const struct pyfile *pf, bool quiet)
{
	uint32_t v = !pf->vaddr[S_POSONLY] ? 0 : pf->vaddr[S_IS_NONE] ? 0x030a0000 :
		     pf->vaddr[S_FRAME_GETCODE] ? 0x03090000 : 0x03080000;
	char name[16], mine[16];

	if (v && version_in_name(path, name, sizeof(name))) {
		python_version_str(v, mine, sizeof(mine));
		if (strcmp(name, mine)) {
			if (!quiet)
				log_error("python: %s is named for CPython %s, but exports what "
					  "%s does: not read", path, name, mine);
			return 0;
		}
	}
	return v;
}

/* USCOPE_PY_DEBUG_OFFSETS=1: walk with the interpreter's own debug offsets
 * even where the table has the version, and find a thread's state as 3.14
 * does (its interpreter's thread list, not the thread-specific key, which
 * the debug offsets do not carry); the table still gives what they do not
 * carry. */
static bool debug_offsets_forced(void)
{
	const char *e = getenv("USCOPE_PY_DEBUG_OFFSETS");

	return e && !strcmp(e, "1");
}

/* 3.13 on: the _Py_DebugOffsets at the start of _PyRuntime. 3.13: they
 * must agree with the table (or be forced over it). 3.14: they are taken,
 * over the table's entry for what they do not carry, which must agree with
 * them where both have a field. Anything else is refused in one line. */
static int debug_offsets(const char *path, int fd, Elf *e, const struct pyfile *pf,
			 struct python_runtime *rt, const char *name)
{
	uint8_t dbg[PYTHON_DEBUGOFFS_MAX];
	struct python_debugoffs d;
	const char *missing;
	bool forced = debug_offsets_forced();
	size_t len = sizeof(dbg);
	uint64_t off;
	int err;

	/* the largest layout first, then the smallest (3.13's 584 bytes) */
	if (!file_offset(e, pf->vaddr[S_RUNTIME], len, &off))
		len = 584;
	if (!file_offset(e, pf->vaddr[S_RUNTIME], len, &off) ||
	    pread(fd, dbg, len, (off_t)off) != (ssize_t)len) {
		log_error("python: %s: cannot read _PyRuntime's debug offsets", path);
		return -ENOEXEC;
	}
	if ((err = python_debugoffs_parse(dbg, len, &d))) {
		if (err == -EINVAL)
			log_error("python: %s (CPython %s): no _Py_DebugOffsets at the start of "
				  "_PyRuntime", path, name);
		return err == -ENOTSUP ? -ENOTSUP : -EPROTO;
	}
	if ((d.version & 0xffff0000u) != (rt->version & 0xffff0000u)) {
		log_error("python: %s: _Py_DebugOffsets says version %#x, Py_Version %s", path,
			  d.version, name);
		return -EPROTO;
	}
	if (rt->off && !forced) {
		if ((err = python_debugoffs_check(&d, rt->off, 1)))
			return err;	/* (the field named) */
		if (rt->version < 0x030e0000)
			return 0;	/* 3.13: the table, checked */
	}
	if ((err = python_debugoffs_apply(&d, rt->off, &rt->own)))
		return err;
	if (forced)
		rt->own.rt_tss_key = rt->own.rt_tss_init = PYOFF_NONE;
	if ((missing = python_offsets_missing(&rt->own))) {
		log_error("python: %s is CPython %s: its _Py_DebugOffsets do not carry %s, which "
			  "uscope reads; not guessed", path, name, missing);
		return -ENOTSUP;
	}
	rt->off = &rt->own;
	log_info("python: %s (CPython %s): walking with its own _Py_DebugOffsets; a thread's "
		 "state found in its interpreter's thread list", path, name);
	return 0;
}

static int check_version(const char *path, int fd, Elf *e, const struct pyfile *pf,
			 struct python_runtime *rt, bool quiet)
{
	char name[32];
	uint64_t off;

	if (!pf->vaddr[S_VERSION]) {
		if (!pf->vaddr[S_RUNTIME] && !pf->vaddr[S_INIT])
			return -ENOENT;
		rt->version = version_before_311(path, pf, quiet);
		if (!rt->version) {
			if (!version_in_name(path, name, sizeof(name)))
				snprintf(name, sizeof(name), "older than 3.8");
			return refuse(path, name, quiet);
		}
	} else if (!file_offset(e, pf->vaddr[S_VERSION], 4, &off) ||
		   pread(fd, &rt->version, 4, (off_t)off) != 4) {
		log_error("python: %s: cannot read Py_Version", path);
		return -ENOEXEC;
	}
	python_version_str(rt->version, name, sizeof(name));
	/* Py_DEBUG (python3.X-dbg, _Py_RefTotal before 3.12): other layouts */
	if (pf->vaddr[S_REFTOTAL] && rt->version < 0x030c0000) {
		if (!quiet)
			log_error("python: %s is a debug build of CPython %s (Py_DEBUG): its "
				  "structures are laid out otherwise, which uscope does not read",
				  path, name);
		return -ENOTSUP;
	}
	rt->off = python_offsets_for(rt->version);
	/* (quiet: a version the table lacks is not looked into, nor said) */
	if (!rt->off && (rt->version < 0x030d0000 || quiet))
		return refuse(path, name, quiet);
	if (!pf->vaddr[S_RUNTIME]) {
		log_error("python: %s (CPython %s) does not export _PyRuntime", path, name);
		return -ENOEXEC;
	}
	if (rt->version >= 0x030d0000)
		return debug_offsets(path, fd, e, pf, rt, name);
	return 0;
}

static int detect(const char *path, struct python_runtime *rt, struct pyfile *pf, bool quiet)
{
	Elf *e = NULL;
	GElf_Ehdr eh;
	int fd, err;

	memset(rt, 0, sizeof(*rt));
	memset(pf, 0, sizeof(*pf));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		err = -ENOENT;	/* not ours to read: no runtime */
		goto out;
	}
	/* every CPython uscope reads exports _PyRuntime (3.7 on); a file
	 * named for Python is read whole, to say which one it is */
	if (!strstr(path, "python") && dynsym_has(e, "_PyRuntime") == 0 &&
	    dynsym_has(e, "Py_Version") == 0) {
		err = -ENOENT;
		goto out;
	}
	scan_syms(e, pf);
	first_load(e, pf);
	if ((err = check_version(path, fd, e, pf, rt, quiet)))
		goto out;
	for (int k = S_RUNTIME; k < S_N; k++)
		if (pf->vaddr[k] && !file_offset(e, pf->vaddr[k], 8, &pf->foff[k]))
			pf->foff[k] = 0;
	rt->runtime = pf->vaddr[S_RUNTIME];
	rt->types.code = pf->vaddr[S_CODE];
	rt->types.unicode = pf->vaddr[S_UNICODE];
	rt->types.bytes = pf->vaddr[S_BYTES];
	for (int k = S_SET_PROFILE; k < S_N; k++)
		((uint64_t *)&rt->api)[k - S_SET_PROFILE] = pf->vaddr[k];
	if (!(rt->path = strdup(path)))
		err = -ENOMEM;
out:
	if (e)
		elf_end(e);
	close(fd);
	if (err)
		python_runtime_free(rt);
	return err;
}

int python_detect_file(const char *path, struct python_runtime *rt)
{
	struct pyfile pf;

	return detect(path, rt, &pf, false);
}

int python_find_file(const char *path, struct python_runtime *rt)
{
	struct pyfile pf;

	return detect(path, rt, &pf, true);
}

void python_runtime_free(struct python_runtime *rt)
{
	free(rt->path);
	memset(rt, 0, sizeof(*rt));
}

/* A file-backed symbol's run-time address; a type object that cannot be
 * placed is not checked (0). */
static int place(const struct proc_map *maps, size_t n, const char *mpath, uint64_t foff,
		 uint64_t *addr)
{
	if (!foff || procmaps_file_offset_to_addr(maps, n, mpath, foff, addr)) {
		*addr = 0;
		return -ENOENT;
	}
	return 0;
}

/* The process's executable, or a libpython: the executable by its file
 * (device and inode of /proc/PID/exe), not by path: a container's paths
 * (procmaps_read gives them under /proc/PID/root) are not the ones
 * /proc/PID/exe prints. */
/* A symbol with no bytes in the file (.bss: 3.8's and 3.9's _PyRuntime),
 * placed by the load bias of the file's first PT_LOAD, where a mapping
 * holds it. */
static int bss_place(const struct proc_map *maps, size_t n, const char *mpath,
		     const struct pyfile *pf, uint64_t vaddr, uint64_t *addr)
{
	uint64_t a = 0;
	bool base = false;

	for (size_t j = 0; j < n && !base && pf->have_load0; j++)
		if (maps[j].path && !strcmp(maps[j].path, mpath) && maps[j].pgoff == pf->off0) {
			a = maps[j].start - pf->vaddr0 + vaddr;
			base = true;
		}
	for (size_t j = 0; j < n && base; j++)
		if (maps[j].start <= a && a < maps[j].end) {
			*addr = a;
			return 0;
		}
	return -ENOENT;
}

/* The process's executable (its inode and device, and the name
 * /proc/PID/exe gives it), or a libpython? By its file, not its path: a
 * container's paths (procmaps_read gives them under /proc/PID/root) are not
 * the ones /proc/PID/exe prints; on overlayfs the device a mapping shows
 * is the layer's, so there the inode and the name decide. */
struct exe_id {
	struct stat st;
	const char *base;	/* NULL: not known */
};

static bool candidate(const struct proc_map *m, const struct exe_id *exe)
{
	const char *b;

	if (!m->path)
		return false;
	b = strrchr(m->path, '/');
	b = b ? b + 1 : m->path;
	if (!strncmp(b, "libpython", 9))
		return true;
	return exe && m->inode == (uint64_t)exe->st.st_ino &&
	       (m->dev == (uint64_t)exe->st.st_dev || (exe->base && !strcmp(b, exe->base)));
}

static int detect_pid(pid_t pid, struct python_runtime *rt, bool quiet);

/* The release of the glibc at path ("2.36"), from the banner in its
 * .rodata ("... release version 2.36."): 0, or -ENOENT (not glibc, or not
 * said). */
static int glibc_release(const char *path, char *out, size_t len)
{
	static const char tag[] = "release version ";
	Elf *e = NULL;
	Elf_Scn *scn = NULL;
	size_t shstr;
	int fd, ret = -ENOENT;

	if (elf_version(EV_CURRENT) == EV_NONE || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -ENOENT;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getshdrstrndx(e, &shstr))
		goto out;
	while (ret && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name, *p, *end;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(name = elf_strptr(e, shstr, sh.sh_name)) || strcmp(name, ".rodata") ||
		    !(d = elf_getdata(scn, NULL)) || !d->d_buf)
			continue;
		end = (const char *)d->d_buf + d->d_size;
		for (p = d->d_buf; ret && (p = memmem(p, (size_t)(end - p), tag, sizeof(tag) - 1));
		     p++) {
			size_t k = 0;

			p += sizeof(tag) - 1;
			while (p + k < end && k + 1 < len && (isdigit((unsigned char)p[k]) ||
							      (p[k] == '.' && p + k + 1 < end &&
							       isdigit((unsigned char)p[k + 1]))))
				k++;
			if (k >= 3 && !memcmp(p, "2.", 2)) {
				memcpy(out, p, k);
				out[k] = 0;
				ret = 0;
			}
		}
	}
out:
	if (e)
		elf_end(e);
	close(fd);
	return ret;
}

/* The glibc process pid maps: its struct pthread's layout into rt->glibc
 * when uscope knows it; otherwise (another glibc: a container's; musl)
 * none, and a version that finds a thread's state by CPython's key finds
 * it in its interpreter's thread list instead (the key's slot is in
 * struct pthread). */
static void process_glibc(pid_t pid, const struct proc_map *maps, size_t n,
			  struct python_runtime *rt)
{
	const struct python_glibc *g = NULL;
	char release[16] = "";

	for (size_t i = 0; i < n && !g && !release[0]; i++) {
		const char *b = maps[i].path ? strrchr(maps[i].path, '/') : NULL;

		if (b && (!strcmp(b + 1, "libc.so.6") || !strncmp(b + 1, "libc-2.", 7)) &&
		    !glibc_release(maps[i].path, release, sizeof(release)))
			g = python_glibc_for(release);
	}
	memset(&rt->glibc, 0, sizeof(rt->glibc));
	if (g) {
		rt->glibc = *g;
		return;
	}
	if (rt->off->rt_tss_key == PYOFF_NONE)
		return;		/* (found by the thread list already) */
	if (rt->off != &rt->own)
		rt->own = *rt->off;
	rt->own.rt_tss_key = rt->own.rt_tss_init = PYOFF_NONE;
	rt->off = &rt->own;
	log_debug("python: process %d: %s%s%s: a thread's state is found in its interpreter's "
		  "thread list, not by CPython's key", (int)pid,
		  release[0] ? "glibc " : "no glibc", release,
		  release[0] ? ", whose struct pthread uscope has not read" : "");
}

int python_detect_pid(pid_t pid, struct python_runtime *rt)
{
	return detect_pid(pid, rt, false);
}

int python_find_pid(pid_t pid, struct python_runtime *rt)
{
	return detect_pid(pid, rt, true);
}

static int detect_pid(pid_t pid, struct python_runtime *rt, bool quiet)
{
	char link[64], target[PATH_MAX];
	struct proc_map *maps = NULL;
	struct exe_id exe = {.base = NULL};
	struct pyfile pf;
	bool have_exe;
	ssize_t n, len;
	int err = -ENOENT;

	memset(rt, 0, sizeof(*rt));
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	have_exe = !stat(link, &exe.st);
	if ((len = readlink(link, target, sizeof(target) - 1)) > 0) {
		target[len] = 0;
		exe.base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	}
	if ((n = procmaps_read(pid, &maps)) < 0)
		return (int)n;
	for (ssize_t i = 0; i < n && err == -ENOENT; i++) {
		char *path = NULL, *name = NULL;
		bool seen = false;

		if (!candidate(&maps[i], have_exe ? &exe : NULL))
			continue;
		for (ssize_t j = 0; j < i; j++)
			seen |= maps[j].dev == maps[i].dev && maps[j].inode == maps[i].inode;
		if (seen)
			continue;
		if ((err = procmaps_module(pid, maps, (size_t)n, (size_t)i, &path, &name))) {
			free(path);
			free(name);
			break;
		}
		err = detect(path, rt, &pf, quiet);
		free(path);
		free(name);
		if (err)
			continue;
		if (place(maps, (size_t)n, maps[i].path, pf.foff[S_RUNTIME], &rt->runtime) &&
		    bss_place(maps, (size_t)n, maps[i].path, &pf, pf.vaddr[S_RUNTIME], &rt->runtime)) {
			log_error("python: process %d: _PyRuntime of %s is not mapped", (int)pid,
				  rt->path);
			python_runtime_free(rt);
			err = -ENOEXEC;
			break;
		}
		if (pf.have_load0 &&
		    !procmaps_placed_whole(maps, (size_t)n, maps[i].path, pf.vaddr0, pf.off0,
					   pf.vaddr[S_RUNTIME], rt->runtime)) {
			log_debug("python: process %d: %s is still being mapped", (int)pid,
				  rt->path);
			python_runtime_free(rt);
			err = -EAGAIN;
			break;
		}
		place(maps, (size_t)n, maps[i].path, pf.foff[S_CODE], &rt->types.code);
		place(maps, (size_t)n, maps[i].path, pf.foff[S_UNICODE], &rt->types.unicode);
		place(maps, (size_t)n, maps[i].path, pf.foff[S_BYTES], &rt->types.bytes);
		for (int k = S_SET_PROFILE; k < S_N; k++)
			place(maps, (size_t)n, maps[i].path, pf.foff[k],
			      &((uint64_t *)&rt->api)[k - S_SET_PROFILE]);
		rt->bias = rt->runtime - pf.vaddr[S_RUNTIME];
		process_glibc(pid, maps, (size_t)n, rt);
	}
	procmaps_free(maps, (size_t)n);
	if (err == -EAGAIN && !quiet)
		log_error("python: process %d is loading its CPython now: try again", (int)pid);
	if (err == -ENOENT && !quiet)
		log_error("python: process %d runs no CPython: neither its executable nor a "
			  "libpython it maps exports Py_Version or _PyRuntime", (int)pid);
	return err;
}

int python_find_linked(const char *exe, struct python_runtime *rt, bool quiet)
{
	char **deps = NULL;
	int ret = quiet ? python_find_file(exe, rt) : python_detect_file(exe, rt);
	ssize_t n = ret == -ENOENT ? module_deps(exe, &deps) : 0;

	for (ssize_t i = 0; i < n && ret == -ENOENT; i++) {
		const char *b = strrchr(deps[i], '/');

		if (!strncmp(b ? b + 1 : deps[i], "libpython", 9))
			ret = quiet ? python_find_file(deps[i], rt) : python_detect_file(deps[i], rt);
	}
	if (n > 0)
		module_list_free(deps, (size_t)n);
	return ret;
}

/* ---- system-wide ---------------------------------------------------------- */

struct found {
	char **v;
	dev_t *dev;
	ino_t *ino;
	size_t n;
};

/* path (under root) a runtime uscope reads, not found before: kept. */
static int keep(struct found *f, char *path)
{
	struct python_runtime rt;
	struct stat st;
	void *p;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		goto drop;
	for (size_t i = 0; i < f->n; i++)
		if (f->dev[i] == st.st_dev && f->ino[i] == st.st_ino)
			goto drop;
	if (python_find_file(path, &rt))
		goto drop;
	python_runtime_free(&rt);
	if (!(p = realloc(f->v, (f->n + 1) * sizeof(*f->v))))
		goto oom;
	f->v = p;
	if (!(p = realloc(f->dev, (f->n + 1) * sizeof(*f->dev))))
		goto oom;
	f->dev = p;
	if (!(p = realloc(f->ino, (f->n + 1) * sizeof(*f->ino))))
		goto oom;
	f->ino = p;
	f->v[f->n] = path;
	f->dev[f->n] = st.st_dev;
	f->ino[f->n++] = st.st_ino;
	return 0;
oom:
	free(path);
	return -ENOMEM;
drop:
	free(path);
	return 0;
}

/* A name of a runtime: python3.X (not python3.X-config, nor python3) or
 * libpython3.X[m].so... */
static bool runtime_name(const char *n, bool lib)
{
	const char *p = lib ? (strncmp(n, "libpython3.", 11) ? NULL : n + 11) :
			      (strncmp(n, "python3.", 8) ? NULL : n + 8);
	size_t k = p ? strspn(p, "0123456789") : 0;

	if (!k)
		return false;
	if (lib)
		return !strncmp(p + k, ".so", 3) || !strncmp(p + k, "m.so", 4);
	return !p[k];
}

ssize_t python_runtimes_under(const char *root, char ***out)
{
	static const char *const bins[] = {"/usr/local/bin", "/usr/bin", "/bin"};
	static const char *const libs[] = {"/usr/local/lib", "/usr/lib/x86_64-linux-gnu",
					   "/usr/lib", "/lib/x86_64-linux-gnu"};
	struct found f = {0};
	int err = 0;

	*out = NULL;
	for (size_t d = 0; d < 7 && !err; d++) {
		bool lib = d >= 3;
		const char *dir = lib ? libs[d - 3] : bins[d];
		char *real = NULL;
		struct dirent *de;
		DIR *dd;

		if (ns_root_resolve(root, dir, &real) || !(dd = opendir(real))) {
			free(real);
			continue;
		}
		while (!err && (de = readdir(dd))) {
			char cand[PATH_MAX], *path = NULL;

			if (!runtime_name(de->d_name, lib))
				continue;
			snprintf(cand, sizeof(cand), "%s/%s", dir, de->d_name);
			if (!ns_root_resolve(root, cand, &path))
				err = keep(&f, path);
		}
		closedir(dd);
		free(real);
	}
	free(f.dev);
	free(f.ino);
	if (err) {
		python_runtimes_free(f.v, f.n);
		return err;
	}
	*out = f.v;
	return (ssize_t)f.n;
}

void python_runtimes_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
