/* The files a session reads, opened once: ELF files, their debug info, and
 * the memory maps of the processes it traces. One cache belongs to one
 * session (or to one `uscope list`); nothing here is global. Sites, argument
 * presentations (enum tables) and engines keep pointers into it, so it
 * lives as long as its session. */
#ifndef USC_CACHE_CACHE_H
#define USC_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct objfile;
struct debuginfo;
struct proc_map;

struct usc_cache;

struct usc_cache *cache_new(void);
void cache_free(struct usc_cache *c);

/* The ELF file at path, opened once (a failure is remembered and given
 * again). 0 or -errno (-ENOEXEC: not an x86-64 ELF file). */
int cache_elf(struct usc_cache *c, const char *path, struct objfile **out);

/* Its debug info (debuginfo_open), once. 0, -ENODATA (none), -errno. A
 * file under a root (the cache's, or a "/proc/N/root") has its separate
 * debug files looked for under that root only. */
int cache_dwarf(struct usc_cache *c, const char *path, struct debuginfo **out);

/* The root the session's MODULE paths resolve under (resolve/: the
 * target's, a --root), or NULL: the host's. Kept (a copy). 0 or -ENOMEM. */
int cache_set_root(struct usc_cache *c, const char *root);

/* The maps of process pid as last read; refresh reads them again (an
 * address no mapping held: a library loaded since). NULL when the process
 * has gone and nothing was read before. */
const struct proc_map *cache_maps(struct usc_cache *c, pid_t pid, bool refresh, size_t *n);

/* Process pid's maps as given (a recording's REC_MAPS); given again, the
 * new ones are added and win where they overlap the old. 0 or -ENOMEM. */
int cache_set_maps(struct usc_cache *c, pid_t pid, const struct proc_map *maps, size_t n);
/* As the maps change (perf's mmap records: stack/mapwatch.c): a mapping
 * of process pid (its path as pid names it: under pid's root, when that is
 * not ours, ns/ns.h), replacing what it overlaps; an exec (none); a fork (the
 * parent's). 0 or -ENOMEM. */
int cache_add_map(struct usc_cache *c, pid_t pid, const struct proc_map *m);
void cache_clear_maps(struct usc_cache *c, pid_t pid);
int cache_copy_maps(struct usc_cache *c, pid_t from, pid_t to);
/* A number that changes whenever process pid's maps do (0: none known). */
uint64_t cache_maps_gen(struct usc_cache *c, pid_t pid);
/* fn(ctx) brings the maps up to date (the mmap records read so far)
 * before cache_maps reads /proc again. */
void cache_maps_hook(struct usc_cache *c, void (*fn)(void *ctx), void *ctx);
/* From now on, maps are only those set: /proc is never read (a recording's
 * pids may be other processes on this machine). */
void cache_freeze(struct usc_cache *c);
bool cache_frozen(const struct usc_cache *c);

/* State a module above keeps per cache, freed with it by free_fn: the slot
 * (NULL until the module sets it). The cache knows nothing of what is in it. */
enum cache_ext_id {
	CACHE_EXT_STACK,	/* stack/: $ustack's unwinding state and frames */
	CACHE_EXT_NS,		/* ns/: the inner ids of the tasks seen */
	CACHE_EXT_PYTHON,	/* python/: code objects and frames by name */
	CACHE_EXT_NR
};
void **cache_ext(struct usc_cache *c, enum cache_ext_id id, void (*free_fn)(void *));

/* A runtime address of process pid as "SYMBOL+0xOFF" (or "MODULE+0xOFF"
 * without a symbol, or "0x..." outside every file mapping). */
void cache_symbolize(struct usc_cache *c, pid_t pid, uint64_t addr, char *buf, size_t len);

/* ---- tasks in PID namespaces below ours (nsids.c) ---------------------- */

/* The inner ids of task tid of process pid, asked once per task and kept
 * in the cache (not asked for a recording's: cache_frozen). true when the
 * task is in a PID namespace below ours, with *ns_pid and *ns_tid set. */
bool cache_ns_ids(struct usc_cache *c, pid_t pid, pid_t tid, pid_t *ns_pid, pid_t *ns_tid);

/* Ids the code inside process host_pid recorded (*pid, *tid: its inner
 * ones) made the host's, when host_pid is in a PID namespace below ours
 * and *pid is its inner id: *pid = host_pid, *tid the thread's host tid
 * (its tasks looked through again when one is not known yet), or 0 when no
 * task of the process has that inner id now (gone). Otherwise unchanged. */
void cache_ns_host_ids(struct usc_cache *c, pid_t host_pid, int32_t *pid, int32_t *tid);

#endif
