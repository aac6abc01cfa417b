/* Internal to the bpf engine: its state, shared by bpf.c (the ops: load,
 * attach, records, counts) and agg.c (filters and aggregation in the
 * kernel: the map's geometry, the sites' roles, the rows read back). */
#ifndef USC_ENGINE_BPF_BPF_INT_H
#define USC_ENGINE_BPF_BPF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/bpf/bpf_shared.h"
#include "engine/engine.h"
#include <sys/types.h>

struct uscope_bpf;
struct ring_buffer;
struct bpf_link;
struct bpf_program;
struct bpfeng_stk;
struct bscript;

/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (Linux 6.6), which the
 * system's headers (Linux 6.1's) predate */
#define BPFENG_UPROBE_MULTI 48

struct bpfeng {
	struct usc_engine base;
	struct uscope_bpf *skel;
	struct ring_buffer *rb;
	bool multi;		/* multi-uprobe links (links.c) */
	int *mfds;		/* multi: one link a file, nmfds of them */
	size_t nmfds;
	bool undo_added;	/* the janitor knows the sites' uprobes */
	struct bpf_link **links;	/* otherwise: one link a site */
	struct bpf_link *fork_link, *exit_link;
	size_t taken;		/* sites can_place accepted */
	bool follow;		/* COMMAND's tree: every process, filtered */
	bool sleepable;
	struct usc_site_stats *stats;
	int *ret_idx;		/* per site: the hidden return-address arg, or -1 */
	uint64_t dropped;	/* tail calls whose return was never seen */
	/* delivery */
	usc_event_fn fn;
	void *ctx;
	int delivered, stop_asked;
	struct usc_value vals[BPFENG_MAX_ARGS];
	/* $ustack walked where the probe runs (ustack.c), or NULL */
	struct bpfeng_stk *stk;
	uint64_t collided;		/* counted stacks another had the hash of */
	/* aggregation in the kernel (agg.c) */
	bool agg;			/* some site aggregates */
	uint32_t agg_keylen;		/* the map's key bytes after the site */
	uint32_t agg_nbuckets;
	/* uscope script's program in the kernel (script.c), or NULL */
	struct bscript *script;
};

static inline struct bpfeng *bpfeng_of(struct usc_engine *e)
{
	return container_of(e, struct bpfeng, base);
}

/* links.c */
/* Has the kernel multi-uprobe links? Asked once, before the load. */
bool bpfeng_multi_supported(void);
/* prog attached to every site, for process pid and its threads (0: every
 * process); -errno, the site that failed logged. */
int bpfeng_links_attach(struct bpfeng *u, struct bpf_program *prog, pid_t pid);
/* Every link gone: safe at any point, and again. */
void bpfeng_links_detach(struct bpfeng *u);

/* agg.c */
bool bpfeng_filters(struct usc_engine *e, const struct usc_site *site);
int bpfeng_agg_place(struct usc_engine *e, const struct usc_site *site);
int bpfeng_agg_read(struct usc_engine *e, usc_agg_fn fn, void *ctx);
/* Before load: the aggregation map's sizes and the program's constants. */
int bpfeng_agg_prepare(struct bpfeng *u);
/* A site's filter and aggregation role into the map's entry. */
void bpfeng_agg_site(struct bpfeng *u, const struct usc_site *site, struct bpfeng_site *us);

/* script.c: uscope script's program run in the kernel (script.bpf.c) */
int bscript_place(struct usc_engine *e, const struct usc_site *site);
/* Do the sites run a script's program here? */
bool bscript_on(const struct bpfeng *u);
/* After the engine's own load: the script's object, sharing its maps. */
int bscript_load(struct bpfeng *u);
struct bpf_program *bscript_prog(struct bpfeng *u);
/* Its output records to u->fn, as events. */
int bscript_poll(struct bpfeng *u, int timeout_ms);
void bscript_free(struct bpfeng *u);
int bscript_rows(struct usc_engine *e, int m,
		 void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val), void *arg);
void bscript_clear(struct usc_engine *e, int m, bool zero);
void bscript_errors(struct usc_engine *e, uint64_t *errs, uint64_t *full);

/* ustack.c: $ustack walked where the probe runs */
/* Before load: whether sites walk, the maps' sizes. */
int bpfeng_stk_prepare(struct bpfeng *u);
/* After load: the tables' maps mapped. */
int bpfeng_stk_attach(struct bpfeng *u);
/* Going live on process pid (-p): its mappings. */
int bpfeng_stk_start(struct bpfeng *u, pid_t pid);
/* Before reading records: mappings that changed, published. */
void bpfeng_stk_sync(struct bpfeng *u);
/* A record's event: a walk that fell back for want of its process's
 * mappings, or of a module, has them read. */
void bpfeng_stk_event(struct bpfeng *u, const struct usc_event *ev);
/* A key of a site that counts stacks: the program's (tgid, hash) of each
 * stack made the session's id (stack_intern), one gone a fault. */
void bpfeng_stk_key(struct bpfeng *u, const struct usc_site *site, uint8_t *key, uint32_t keylen);
/* A $pystack the program counted for the first time (a record that is no
 * event): its frames named now, while the process runs. */
void bpfeng_py_names(struct bpfeng *u, const struct usc_event *ev);
void bpfeng_stk_free(struct bpfeng *u);

#endif
