/* Finding modules (executables and shared libraries) by short name or path,
 * and the mappings of a running process. */
#ifndef USC_OBJFILE_MODULES_H
#define USC_OBJFILE_MODULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_map {
	uint64_t start, end, pgoff;
	char perms[5];		/* "r-xp" */
	uint64_t dev;		/* makedev(major, minor), as stat's st_dev */
	uint64_t inode;
	char *path;		/* NULL for anonymous mappings */
};

/* Read /proc/PID/maps. Returns the count or -errno (-ESRCH if the
 * process has gone). Free with procmaps_free. */
ssize_t procmaps_read(pid_t pid, struct proc_map **out);
void procmaps_free(struct proc_map *maps, size_t n);

/* Mapping i of process pid as a module: *path, a path through which its
 * file can be opened and probed, and *name (may be NULL), the short name a
 * probe's MODULE matches (its basename). A file that has no path any more -
 * a memfd ("/memfd:NAME (deleted)", whose name is NAME: run-time USDT
 * providers) or a deleted file - is reached through
 * /proc/PID/map_files/START-END of its first mapping (which the kernel
 * follows to the inode for open(2), uprobe_events and BPF uprobes alike;
 * it takes CAP_SYS_ADMIN), or else through a /proc/PID/fd/N that has it
 * open. 0 or -ENOMEM. */
int procmaps_module(pid_t pid, const struct proc_map *maps, size_t n, size_t i, char **path,
		    char **name);

/* A MODULE given as a path: its real path, or for a /proc magic link
 * (/proc/PID/map_files/..., /proc/PID/fd/N) that leads to a file with no
 * path, the link itself. 0, or -errno (not logged). */
int module_path_resolve(const char *path, char **out);

/* Does a short module name ("libc", "libc.so.6", "libsqlite3", "app")
 * designate the file at path? Matches the basename exactly, or the basename
 * starting with NAME".so" or NAME"-" (libpython3.11 -> libpython3.11.so.1.0),
 * or NAME".so" prefixes. "libc" matches libc.so.6 but not libcap.so.2. */
bool module_name_matches(const char *name, const char *path);

/* "did you mean" for a MODULE that names none of the files at paths (n of
 * them): up to three short names closest to name ("libc" for "libcc"),
 * ", "-joined into buf. Returns how many (modsuggest.c). */
size_t module_suggest(char *const *paths, size_t n, const char *name, char *buf, size_t len);
/* ... among process pid's executable mappings, or exe and its libraries. */
size_t module_suggest_in_pid(pid_t pid, const char *name, char *buf, size_t len);
size_t module_suggest_for_exe(const char *exe, const char *name, char *buf, size_t len);

/* Resolve MODULE for each kind of target. A MODULE containing '/' is a path
 * and is returned as is (made absolute) when it exists. On success, *out is a
 * malloc'd absolute path. -ENOENT when nothing matches; -EEXIST when several
 * different files match (the candidates are logged). */
int module_find_in_pid(pid_t pid, const char *name, char **out);
int module_find_for_exe(const char *exe, const char *name, char **out);
int module_find_system(const char *name, char **out);

/* The libraries an executable links, transitively, found as ld.so would:
 * DT_RPATH (when no DT_RUNPATH), LD_LIBRARY_PATH, DT_RUNPATH, ld.so.cache,
 * default directories. Returns the count or -errno; *out is a malloc'd
 * array of malloc'd absolute paths (the executable itself first). */
ssize_t module_deps(const char *exe, char ***out);
void module_list_free(char **list, size_t n);

/* PATH lookup, as execvp would do it. 0 with a malloc'd path, or -ENOENT. */
int module_which(const char *cmd, char **out);

/* path a script ("#!"): the program the kernel ends up running for it, its
 * interpreter's, through env and scripts of scripts (shebang.c). 0 with a
 * malloc'd path; -ENOEXEC when path is not a script or env runs something
 * uscope cannot name; -ENOENT when the interpreter is not found; -ELOOP. */
int module_script_program(const char *path, char **out);

/* ---- the objects a process loaded, in its dynamic linker's order ----------
 * (linkmap.c) */

struct linkmap_obj {
	char *path;		/* as procmaps_module gives it: openable by us */
	uint64_t dev, inode;	/* its mapping's */
};

/* The objects of process pid's link_map list (r_debug's), in order: the
 * executable, its LD_PRELOAD objects, DT_NEEDED breadth-first, then those
 * dlopen added; no vDSO. Returns the count (*out malloc'd, free with
 * linkmap_free), -EAGAIN while ld.so has not finished (or is changing the
 * list: try again), -ENOENT (a static program: no dynamic linker), or
 * another -errno (the process gone, memory not readable). Not logged. */
ssize_t linkmap_read(pid_t pid, struct linkmap_obj **out);
void linkmap_free(struct linkmap_obj *v, size_t n);

/* ---- processes under another root (procroot.c, ns/ns.h) ------------------ */

/* Process pid's mappings (procmaps_read's) as the host opens their files,
 * when pid sees another root: each path under "/proc/PID/root" (the path
 * the kernel prints is its mount namespace's, or ours), or when the file
 * is not there (outside its root, another inode at that path) its
 * /proc/PID/map_files link. Left as they are when pid sees our files.
 * 0 or -ENOMEM. */
int procmaps_rooted(pid_t pid, struct proc_map *maps, size_t n);

/* readlink(2) of /proc/PID/exe into buf (len bytes, NUL-terminated), as
 * the host opens it (procmaps_rooted's form). The length, or -1 with
 * errno set. */
ssize_t procexe_read(pid_t pid, char *buf, size_t len);

/* A MODULE under root (a directory, or a "/proc/N/root"): a path resolved
 * inside root (ns_root_resolve); a short name found in root's default
 * library directories. As module_find_system: 0 with a malloc'd path
 * under root, -ENOENT, -EEXIST (several, logged). */
int module_find_in_root(const char *root, const char *name, char **out);

/* The runtime address of a file offset in a process: find the mapping of the
 * same file (by path and inode, or by device and inode: a memfd's path is a
 * /proc link) that covers off. 0 or -ENOENT. */
int procmaps_file_offset_to_addr(const struct proc_map *maps, size_t n,
				 const char *path, uint64_t off, uint64_t *addr);

/* Is the module at path mapped whole, as ld.so leaves it, for addr (found
 * for vaddr through procmaps_file_offset_to_addr) to be trusted? ld.so maps
 * a module's whole span from its first segment's file page, then maps each
 * later segment over it at its own place; in between, a file offset of a
 * later segment falls in that first mapping, where the segment will not be
 * when its file offset and vaddr differ (a data segment, often by a page).
 * true when addr sits where the mapping of the first segment (vaddr0, file
 * page off0, from its PT_LOAD) puts vaddr. A process caught starting is
 * looked at again later. */
bool procmaps_placed_whole(const struct proc_map *maps, size_t n, const char *path,
			   uint64_t vaddr0, uint64_t off0, uint64_t vaddr, uint64_t addr);

#endif
