/* Unwind tables (stack_walk.h's rows) compiled from modules' CFI, cached by
 * build-id in memory and on disk; images (tables and a process's mappings)
 * for the walker; and the walker as the tracer runs it. See unwtab.c. */
#ifndef USC_STACK_UNWTAB_H
#define USC_STACK_UNWTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/event.h"
#include "stack/stack_walk.h"

#define STACK_BUILD_ID_MAX 64
/* the disk cache's format; bump whenever the compiler's rows change (3:
 * Go's pcsp rows where a Go program has no CFI) */
#define STACK_TABFILE_VERSION 3

/* A module's table: tab's rows and idx index rows[] and idx[] here (0). */
struct stack_utab {
	struct stack_tab tab;
	struct stack_row *rows;
	uint32_t *idx;
	uint8_t build_id[STACK_BUILD_ID_MAX];
	uint32_t build_id_len;	/* 0: none (not cached on disk) */
	/* how it was built */
	uint32_t fdes;		/* FDEs read (.eh_frame and .debug_frame) */
	uint32_t debug_rows;	/* rows from .debug_frame (where .eh_frame has none) */
	uint32_t go_rows;	/* rows from Go's pcsp tables (Go functions no CFI
				 * covers: a Go program built with -w, -s -w) */
	uint32_t by_op[STACK_OP_NR];	/* rows of each op */
	bool from_disk;		/* read from the disk cache */
};

/* The table of the module at path: its CFI, and Go's pcsp tables for the
 * Go functions its CFI does not cover (unwgo.h). 0; -ENODATA: the module
 * has neither; -ENOTSUP: CFI the table cannot hold (not x86-64, a module over 4
 * GiB, an FDE encoding it cannot read); -ENOENT, -ENOMEM, -EINVAL. */
int stack_utab_build(const char *path, struct stack_utab **out);
void stack_utab_free(struct stack_utab *u);
/* Its size as the walker holds it: rows, block index, header. */
size_t stack_utab_bytes(const struct stack_utab *u);

/* The module's GNU build-id: its length (0: none) or -errno. */
int stack_build_id(const char *path, uint8_t *id, size_t max);

/* ---- the disk cache (unwcache.c) ------------------------------------------
 * One file a table, <dir>/<build-id in hex>.v<version>.unw (the version of
 * the file's format and of the rows the compiler makes: another uscope's
 * files are left alone, not rebuilt in turn), written atomically (a
 * temporary file renamed), checked whole when read: a file that is short,
 * of another version, for another build-id, whose checksum or rows are
 * wrong is ignored (and rebuilt), never trusted. */

/* $XDG_CACHE_HOME/uscope/unwind or ~/.cache/uscope/unwind: a malloc'd path
 * (NULL: neither is set). */
char *stack_cache_dir(void);
int stack_utab_save(const struct stack_utab *u, const char *dir);
/* 0 and *out; -ENOENT: none; -EBADMSG: a file that is not a valid table. */
int stack_utab_load(const char *dir, const uint8_t *id, size_t idlen, struct stack_utab **out);
/* The bytes of a table file (what save writes). */
int stack_utab_encode(const struct stack_utab *u, void **buf, size_t *len);
/* A table from a file's bytes, the build-id it must have. 0, -EBADMSG. */
int stack_utab_decode(const void *buf, size_t len, const uint8_t *id, size_t idlen,
		      struct stack_utab **out);
/* The block index of rows (u->rows, u->tab.nrows, span): 0, -EINVAL, -ENOMEM. */
int stack_utab_index(struct stack_utab *u);

/* ---- tables by module ----------------------------------------------------- */

struct stack_tabset;

/* dir: the disk cache (NULL: none). */
struct stack_tabset *stack_tabset_new(const char *dir);
void stack_tabset_free(struct stack_tabset *s);
/* The table of the module at path, built (or read from the disk) once per
 * build-id, or per file (device, inode, size, time) for a module with no
 * build-id. 0 and *out; -ENODATA: no CFI; else as stack_utab_build (the
 * failure is remembered too). */
int stack_tabset_get(struct stack_tabset *s, const char *path, const struct stack_utab **out);

/* ---- images: what the walker sees ----------------------------------------- */

struct stack_image {
	struct stack_tab *tabs;
	uint32_t ntabs;
	struct stack_row *rows;
	uint32_t nrows;
	uint32_t *idx;
	uint32_t nidx;
	struct stack_map *maps;
	uint32_t nmaps;
	const struct stack_utab **added;	/* the table of each tabs[] entry */
};

/* The image of process pid's executable file mappings (as stack/unwind.c
 * reports them to libdw: files only, no memfd, nothing deleted), each with
 * its module's table from s. 0 or -errno. */
int stack_image_proc(struct stack_image *img, struct stack_tabset *s, pid_t pid);

/* The link-time addresses of mappings' file offsets, remembered. */
struct stack_vmemo {
	struct stack_vmemo_ent {
		uint64_t dev, ino, pgoff, vaddr;
		char *path;	/* a recording's mapping (no inode): by path */
		int err;
	} *v;
	size_t n, cap;
};
void stack_vmemo_free(struct stack_vmemo *memo);

/* The mappings m (n of them: /proc/PID/maps, or as the cache holds them)
 * of process pid (0: none to read: a recording's) into maps->maps, their
 * modules' tables into tabs (the same image, or one that holds the tables
 * of many processes), and the tables of JIT code of a known shape in its
 * anonymous executable memory (unwjit.h); memo: NULL, or where the
 * mappings' link-time addresses are remembered. 0 or -ENOMEM. */
struct proc_map;
int stack_image_add_maps(struct stack_image *tabs, struct stack_tabset *s,
			 struct stack_vmemo *memo, pid_t pid, const struct proc_map *m, size_t n,
			 struct stack_image *maps);
/* A module's table in the image (once): its index in tabs[], or -ENOMEM. */
int stack_image_tab(struct stack_image *img, const struct stack_utab *u);
/* A mapping, kept sorted; 0, -EINVAL (overlaps), -ENOMEM. */
int stack_image_map(struct stack_image *img, uint64_t start, uint64_t end, uint64_t bias,
		    uint32_t tab);
void stack_image_free(struct stack_image *img);

/* ---- walking in the tracer ------------------------------------------------ */

/* Read 8 bytes at addr: 0, or non-zero when it cannot. */
typedef int (*stack_read_fn)(void *ctx, uint64_t addr, uint64_t *val);

/* Walk the stack of the registers (pc, sp, bp) with img, reading memory
 * through read: up to max frames into pcs[], *w says where it ended. */
void stack_walk_image(const struct stack_image *img, uint64_t pc, uint64_t sp, uint64_t bp,
		      uint32_t max, stack_read_fn read, void *ctx, uint64_t *pcs,
		      struct stack_walk *w);

/* The walk as struct usc_stack (room for w->n frames): exact and sigframe
 * bits, the end; UNREAD is END_COPY when the memory read was a copy of
 * the stack. A FALLBACK walk has none: -EAGAIN. */
int stack_walk_usc(const struct stack_walk *w, const uint64_t *pcs, bool from_copy,
		   struct usc_stack *out);

/* "rsp", "expr", ...: an op's name; a fallback's why. */
const char *stack_op_name(unsigned op);
const char *stack_why_name(unsigned why);
/* "expr", "nomodule", ...: enum stack_fallback's names. */
const char *stack_fallback_name(unsigned fb);

/* A walk as an engine stored it (struct fetch_walk_hdr and its return
 * addresses, len bytes, any alignment) as struct usc_stack (room for max
 * frames). 0, or -EINVAL: not a walk an engine writes. */
int stack_walked(const void *v, size_t len, struct usc_stack *out, uint32_t max);

#endif
