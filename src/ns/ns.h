/* Processes in other namespaces (containers), seen from the host.
 *
 * Files: a process in another mount namespace, or chrooted, sees another
 * root; the host reaches its files through /proc/PID/root, never through a
 * path of its own (the host may have another file there). A file is named
 * as the process names it (/opt/app/server) and opened as
 * ROOT/opt/app/server, ROOT being "/proc/PID/root" (or a directory given
 * with --root). Symbolic links are followed inside ROOT, as the process
 * would follow them: realpath(3) would follow /proc/PID/root's own link to
 * a path of the host's.
 *
 *   root.c   roots: which a process has, paths resolved inside one, the
 *            paths the kernel prints (/proc/PID/maps, /proc/PID/exe) turned
 *            into paths under the root
 *
 * PIDs: a process in another PID namespace has an id there too
 * (/proc/PID/status: "NSpid: HOST ... INNER"). The host's ids are the
 * session's (ptrace, perf, uprobes speak them); the inner ones are what
 * code inside the process sees (getpid, gettid, glibc's tid).
 *
 *   pids.c   a task's inner ids, and the host id of an inner one, each
 *            remembered in the session's cache */
#ifndef USC_NS_NS_H
#define USC_NS_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


/* ---- roots (root.c) ---------------------------------------------------- */

/* The root process pid sees, when it is not ours (another mount namespace,
 * or another root directory): *root is "/proc/PID/root", malloc'd; NULL
 * when pid sees our files. 0, -ESRCH (no such process), -EACCES/-EPERM
 * (not ours to look into), -ENOMEM. Not logged. */
int ns_proc_root(pid_t pid, char **root);

/* The length of path's leading "/proc/N/root" (followed by '/' or its
 * end), or 0. */
size_t ns_magic_root_len(const char *path);

/* Resolve cpath (a path as the processes under root name it; relative
 * paths start at the root too) inside root, as such a process would:
 * symbolic links followed in root (an absolute target starts again at
 * root), ".." never above root. *out = root followed by the canonical
 * path, malloc'd. root NULL: realpath(3). 0, -ENOENT (no such file inside
 * root), -ENOTDIR, -ELOOP, -ENOMEM, -errno. Not logged. */
int ns_root_resolve(const char *root, const char *cpath, char **out);

/* A path to canonicalize that may lie under a "/proc/N/root": its part
 * after the root resolved inside that root (ns_root_resolve), anything
 * else with realpath(3). 0 or -errno. */
int ns_realpath(const char *path, char **out);

/* path as the processes under root name it: path without root (or without
 * its own leading "/proc/N/root"); path itself when it lies under
 * neither. */
const char *ns_shown_path(const char *root, const char *path);

/* How the kernel prints process pid's paths to us (in /proc/PID/maps and
 * /proc/PID/exe): from our root when it reaches them, else from the root
 * of pid's mount namespace. kroot is pid's root printed the same way. */
struct ns_view {
	pid_t pid;
	char *root;		/* "/proc/PID/root", or NULL: pid sees our files */
	char *kroot;		/* pid's root as the kernel prints it to us */
};

/* pid's view. 0, or -errno as ns_proc_root. ns_view_free after. */
int ns_view_get(pid_t pid, struct ns_view *v);
void ns_view_free(struct ns_view *v);

/* kpath, a path the kernel printed for v's process, as the host opens it:
 * root followed by the path the process names it by, malloc'd in *out;
 * when ino is not 0 the file there must have that inode number (the
 * device may differ: overlayfs). 0, -ENOENT (not inside its root, or not
 * that file), -ENOMEM. v->root NULL: kpath itself. */
int ns_view_path(const struct ns_view *v, const char *kpath, uint64_t ino, char **out);

/* ---- pids (pids.c) ----------------------------------------------------- */

/* Task tid's ids in its own PID namespace: the last fields of NStgid and
 * NSpid in /proc/TID/status. 1 when it is in a namespace below ours (the
 * ids set), 0 when in ours (the ids are tid's own: *ns_pid its Tgid),
 * -ESRCH (gone), -errno. */
int ns_task_ids(pid_t tid, pid_t *ns_pid, pid_t *ns_tid);

/* tid as the task itself knows it (gettid), or tid when that cannot be
 * read. */
pid_t ns_inner_tid(pid_t tid);

#endif
