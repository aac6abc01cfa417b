/* Before a kernel uprobe is placed, the code must be the file's.
 *
 * The kernel writes its breakpoint over the first byte of the instruction
 * at the site in every process it places it in, and when it is hit runs
 * the file's instruction aside, then goes on after it. Where the process's
 * code is not the file's there (another tool's patch, or the jump of a
 * uscope -e inject session that died before undoing it), that is a jump
 * into the middle of something else: the process crashes. So for every
 * site on an engine that places kernel uprobes (engine.h, kernel_uprobes),
 * the plan compares the instruction the breakpoint replaces, in each
 * process it lands in, with the file's, and refuses with the reason when
 * they differ. A breakpoint already there with the rest of the instruction
 * intact is the kernel's own (another session's uprobe, which ours would
 * share) or a debugger's: no harm; so is an inject session's jump whose
 * other bytes are the file's (its pad, src/engine/inject/pad.c).
 *
 * Which processes: with -p, the target alone when the engine's uprobes
 * are placed in that process only (pid_only_uprobes); otherwise every
 * process that maps the file now (the kernel places an uprobe in each). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/modules.h"
#include "session/session.h"
#include "session/session_int.h"
#include "x86/insn.h"

#define CODE_MAX 15	/* the longest x86-64 instruction */
#define X86_JMP_LEN_CK 5	/* an inject patch's jmp rel32 */

/* A site to check: the file's instruction there. */
struct ck_site {
	const struct usc_site *site;
	size_t file;		/* index in the files */
	uint8_t code[CODE_MAX];
	int len;
	bool pid_only;		/* in the target process only */
};

struct ck_file {
	const char *path;
	dev_t dev;
	ino_t ino;
};

struct ck {
	struct usc_session *s;
	struct ck_site *v;
	size_t n;
	struct ck_file *files;
	size_t nfiles;
	bool all;		/* some site is placed in every process that maps its file */
};

static int add_file(struct ck *c, const char *path, size_t *idx)
{
	struct stat st;
	struct ck_file *v;

	for (size_t i = 0; i < c->nfiles; i++)
		if (!strcmp(c->files[i].path, path)) {
			*idx = i;
			return 0;
		}
	if (stat(path, &st))
		return -errno;
	for (size_t i = 0; i < c->nfiles; i++)
		if (c->files[i].dev == st.st_dev && c->files[i].ino == st.st_ino) {
			*idx = i;
			return 0;
		}
	v = realloc(c->files, (c->nfiles + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->files = v;
	v[c->nfiles] = (struct ck_file){path, st.st_dev, st.st_ino};
	*idx = c->nfiles++;
	return 0;
}

/* The file's instruction at the site. 0, or -errno (not a site to check:
 * the engine reports what it cannot place). */
static int file_code(const struct usc_site *site, uint8_t *code, int *len)
{
	int fd = open(site->path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, code, CODE_MAX, (off_t)site->offset);
	close(fd);
	if (n <= 0)
		return -EIO;
	*len = x86_insn_length(code, (size_t)n);
	return *len > 0 ? 0 : -ENOEXEC;
}

static int collect(struct ck *c)
{
	struct usc_session *s = c->s;

	for (size_t i = 0; i < s->nsites; i++) {
		const struct usc_site *site = &s->sites[i];
		int e = s->place[i].engine;
		struct ck_site k = {.site = site};
		struct ck_site *v;
		int ret;

		if (e < 0 || !s->engines[e].ops->kernel_uprobes)
			continue;
		/* following -p's children, a bpf link is every process's */
		k.pid_only = s->target.kind == USC_TARGET_PID && !s->ectx.children &&
			     s->engines[e].ops->pid_only_uprobes;
		if (file_code(site, k.code, &k.len))
			continue;
		ret = add_file(c, site->path, &k.file);
		if (ret == -ENOMEM)
			return ret;
		if (ret)
			continue;
		v = realloc(c->v, (c->n + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->v[c->n++] = k;
		c->all |= !k.pid_only;
	}
	return 0;
}

static void comm_of(pid_t pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(comm, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(comm, (int)len, f))
		comm[strcspn(comm, "\n")] = 0;
	fclose(f);
}

static int refuse(const struct ck_site *k, pid_t pid, uint64_t addr, const uint8_t *got)
{
	const struct usc_site *site = k->site;
	const char *fn = site->symbol ? site->symbol : site->label;
	char comm[32], hex[3 * CODE_MAX + 1] = "", want[3 * CODE_MAX + 1] = "";

	comm_of(pid, comm, sizeof(comm));
	for (int i = 0; i < k->len; i++) {
		snprintf(hex + 3 * i, sizeof(hex) - 3 * (size_t)i, "%02x ", got[i]);
		snprintf(want + 3 * i, sizeof(want) - 3 * (size_t)i, "%02x ", k->code[i]);
	}
	hex[3 * k->len - 1] = want[3 * k->len - 1] = 0;
	log_error("%s: the code of process %d (%s) at 0x%" PRIx64 " (%s) differs from %s "
		  "(%s, not %s): patched by another tool, or by a uscope -e inject session that "
		  "died before undoing it? `uscope count -e inject -d 1 -p %d %s` finishes a dead "
		  "session's undo, or restart the process; a kernel uprobe over it would crash it",
		  site->label, (int)pid, comm, addr, fn, site->path, hex, want, (int)pid, fn);
	return -EBUSY;
}

/* Process pid's code at every site in it. 0, -EBUSY (refused, said), or
 * -ENOMEM; a process that has gone or cannot be read is skipped. */
static int check_process(struct ck *c, pid_t pid, bool target)
{
	struct proc_map *maps = NULL;
	ssize_t nmaps;
	char path[64];
	int fd = -1, ret = 0;

	usc_log_quiet(true);	/* a process gone, or not ours to read: skipped */
	nmaps = procmaps_read(pid, &maps);
	usc_log_quiet(false);

	if (nmaps <= 0)
		return nmaps == -ENOMEM ? -ENOMEM : 0;
	for (ssize_t m = 0; m < nmaps && !ret; m++) {
		const struct proc_map *mp = &maps[m];

		if (!mp->inode || mp->perms[2] != 'x')
			continue;
		for (size_t i = 0; i < c->n && !ret; i++) {
			const struct ck_site *k = &c->v[i];
			const struct ck_file *f = &c->files[k->file];
			uint8_t got[CODE_MAX];
			uint64_t addr;

			if ((k->pid_only && !target) || mp->dev != (uint64_t)f->dev ||
			    mp->inode != (uint64_t)f->ino || k->site->offset < mp->pgoff ||
			    k->site->offset - mp->pgoff >= mp->end - mp->start)
				continue;
			addr = mp->start + (k->site->offset - mp->pgoff);
			if (fd < 0) {
				snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
				fd = open(path, O_RDONLY | O_CLOEXEC);
				if (fd < 0)
					break;	/* gone, or not ours to read */
			}
			if (pread(fd, got, (size_t)k->len, (off_t)addr) != k->len)
				continue;
			if (!memcmp(got, k->code, (size_t)k->len))
				continue;
			/* a breakpoint: a kernel uprobe already there, or a debugger's */
			if (got[0] == 0xcc && !memcmp(got + 1, k->code + 1, (size_t)k->len - 1))
				continue;
			/* a jump whose other bytes are the file's (an inject patch's,
			 * src/engine/inject/pad.c): the breakpoint goes over its first
			 * byte, a hit runs the file's instruction and goes on in the
			 * file's bytes, and the kernel's putting the file's byte back
			 * leaves the file's code */
			if (got[0] == 0xe9 && k->len >= X86_JMP_LEN_CK &&
			    !memcmp(got + 1, k->code + 1, (size_t)k->len - 1))
				continue;
			if (got[0] == 0xe9 && k->len < X86_JMP_LEN_CK &&
			    pread(fd, got, X86_JMP_LEN_CK, (off_t)addr) == X86_JMP_LEN_CK &&
			    !memcmp(got + 1, k->code + 1, X86_JMP_LEN_CK - 1))
				continue;
			ret = refuse(k, pid, addr, got);
		}
	}
	if (fd >= 0)
		close(fd);
	procmaps_free(maps, (size_t)nmaps);
	return ret;
}

static int check_all(struct ck *c)
{
	pid_t self = getpid();
	DIR *d = opendir("/proc");
	struct dirent *de;
	int ret = 0;

	if (!d)
		return 0;
	while (!ret && (de = readdir(d))) {
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid == self)
			continue;
		ret = check_process(c, pid, c->s->target.kind == USC_TARGET_PID &&
					   pid == c->s->target.pid);
	}
	closedir(d);
	return ret;
}

int session_check_code(struct usc_session *s)
{
	struct ck c = {.s = s};
	int ret = collect(&c);

	if (!ret && c.n) {
		if (c.all)
			ret = check_all(&c);
		else if (s->target.kind == USC_TARGET_PID)
			ret = check_process(&c, s->target.pid, true);
	}
	if (ret == -ENOMEM)
		log_error("out of memory");
	free(c.v);
	free(c.files);
	return ret;
}
