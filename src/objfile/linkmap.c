/* A running process's loaded objects in its dynamic linker's order: the
 * link_map list that r_debug heads (the interface debuggers use).
 *
 * Why the link_map and not /proc/PID/maps: the maps are sorted by address,
 * and where ld.so's mmaps land says nothing certain about the order it
 * loaded the objects in; the link_map list is that order itself - the
 * executable, the LD_PRELOAD objects, then DT_NEEDED breadth-first, then
 * what dlopen added - which is the global lookup scope's order for the
 * objects loaded at startup. r_debug is found through the executable's
 * DT_DEBUG (which ld.so fills), else through ld.so's own _r_debug. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/proc.h"
#include "objfile/modules.h"
#include "objfile/objfile.h"

#define LINKMAP_MAX 4096	/* objects, at most (a loop in a damaged list) */

static int mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len, (off_t)addr);

	return n == (ssize_t)len ? 0 : -EFAULT;
}

/* AT_PHDR, AT_PHNUM and AT_BASE (ld.so's load address; 0: none). */
static int read_auxv(pid_t pid, uint64_t *phdr, uint64_t *phnum, uint64_t *base)
{
	static const uint64_t types[3] = {AT_PHDR, AT_PHNUM, AT_BASE};
	uint64_t v[3];
	int ret = proc_auxv_read(pid, types, v, 3);

	if (ret < 0)
		return ret;
	*phdr = v[0];
	*phnum = v[1];
	*base = v[2];
	return *phdr && *phnum ? 0 : -ENOENT;
}

/* r_debug's address from the executable's DT_DEBUG: 0 while ld.so has not
 * filled it, -ENOENT when the executable has none (or no PT_DYNAMIC: a
 * static program). */
static int dt_debug(int fd, uint64_t phdr, uint64_t phnum, uint64_t *rd)
{
	Elf64_Phdr ph[64];
	uint64_t bias = 0, dyn = 0;
	bool have_bias = false;

	if (phnum > 64 || mem_read(fd, phdr, ph, phnum * sizeof(ph[0])))
		return -EFAULT;
	for (uint64_t i = 0; i < phnum; i++)
		if (ph[i].p_type == PT_PHDR) {
			bias = phdr - ph[i].p_vaddr;
			have_bias = true;
		}
	for (uint64_t i = 0; i < phnum && !have_bias; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			bias = phdr - (ph[i].p_vaddr + sizeof(Elf64_Ehdr));
			have_bias = true;
		}
	for (uint64_t i = 0; i < phnum; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = ph[i].p_vaddr + bias;
	if (!dyn || !have_bias)
		return -ENOENT;
	for (unsigned i = 0; i < 1024; i++) {
		Elf64_Dyn d;

		if (mem_read(fd, dyn + i * sizeof(d), &d, sizeof(d)))
			return -EFAULT;
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_DEBUG) {
			*rd = d.d_un.d_ptr;
			return 0;
		}
	}
	return -ENOENT;
}

/* r_debug's address from ld.so's _r_debug (ld.so mapped at base). */
static int ldso_r_debug(const struct proc_map *maps, size_t n, uint64_t base, uint64_t *rd)
{
	struct objfile *ef;
	uint64_t v;
	int ret = -ENOENT;

	for (size_t i = 0; i < n; i++) {
		if (maps[i].start != base || !maps[i].path || maps[i].pgoff)
			continue;
		if (objfile_open(maps[i].path, &ef))
			return -ENOENT;
		if (!objfile_symbol_vaddr(ef, "_r_debug", &v)) {
			*rd = base + v;	/* ld.so's first PT_LOAD is at 0 */
			ret = 0;
		}
		objfile_close(ef);
		break;
	}
	return ret;
}

static ssize_t map_at(const struct proc_map *maps, size_t n, uint64_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (addr >= maps[i].start && addr < maps[i].end)
			return (ssize_t)i;
	return -1;
}

/* One object: the mapping that holds its dynamic section (l_ld). A vDSO
 * has no file: skipped. */
static int add_object(pid_t pid, const struct proc_map *maps, size_t n, uint64_t l_ld,
		      struct linkmap_obj *v, size_t *nv)
{
	ssize_t i = map_at(maps, n, l_ld);
	char *name = NULL;
	int ret;

	if (i < 0 || !maps[i].path || maps[i].path[0] == '[')
		return 0;
	for (size_t k = 0; k < *nv; k++)
		if (v[k].dev == maps[i].dev && v[k].inode == maps[i].inode)
			return 0;
	ret = procmaps_module(pid, maps, n, (size_t)i, &v[*nv].path, &name);
	if (ret)
		return ret;
	free(name);
	v[*nv].dev = maps[i].dev;
	v[*nv].inode = maps[i].inode;
	(*nv)++;
	return 0;
}

static ssize_t walk(pid_t pid, int fd, uint64_t rd, const struct proc_map *maps, size_t n,
		    struct linkmap_obj **out)
{
	struct {
		int32_t version;
		uint64_t map, brk;
		int32_t state;
	} r;
	uint64_t raw[4], lm;
	struct linkmap_obj *v;
	size_t nv = 0;
	int ret = 0;

	if (mem_read(fd, rd, raw, sizeof(raw)))
		return -EFAULT;
	r.version = (int32_t)raw[0];
	r.map = raw[1];
	r.state = (int32_t)raw[3];
	if (!r.version || !r.map || r.state != RT_CONSISTENT)
		return -EAGAIN;	/* ld.so is adding or removing objects */
	v = calloc(LINKMAP_MAX, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (lm = r.map; lm && nv < LINKMAP_MAX && !ret;) {
		uint64_t l[5];	/* l_addr, l_name, l_ld, l_next, l_prev */

		ret = mem_read(fd, lm, l, sizeof(l));
		if (!ret)
			ret = add_object(pid, maps, n, l[2], v, &nv);
		lm = l[3];
	}
	if (ret) {
		linkmap_free(v, nv);
		return ret;
	}
	*out = v;
	return (ssize_t)nv;
}

ssize_t linkmap_read(pid_t pid, struct linkmap_obj **out)
{
	uint64_t phdr = 0, phnum = 0, base = 0, rd = 0;
	struct proc_map *maps = NULL;
	ssize_t n, ret;
	char path[64];
	int fd;

	*out = NULL;
	ret = read_auxv(pid, &phdr, &phnum, &base);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = procmaps_read(pid, &maps);
	if (n < 0) {
		close(fd);
		return n;
	}
	ret = dt_debug(fd, phdr, phnum, &rd);
	if (ret == -ENOENT && base)
		ret = ldso_r_debug(maps, (size_t)n, base, &rd);
	if (!ret && !rd)
		ret = -EAGAIN;	/* ld.so has not said where yet */
	if (!ret)
		ret = walk(pid, fd, rd, maps, (size_t)n, out);
	procmaps_free(maps, (size_t)n);
	close(fd);
	return ret;
}

void linkmap_free(struct linkmap_obj *v, size_t n)
{
	for (size_t i = 0; i < n && v; i++)
		free(v[i].path);
	free(v);
}
