/* Reading a recording back (reader.c): its probes and sites, its counts,
 * and its events in time order, decoded by each engine's own decoder. A
 * file cut short is read up to the damage. */
#ifndef USC_RECORD_READER_H
#define USC_RECORD_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/event.h"
#include "record/format.h"

struct rec_file;

/* Open path and read its metadata. 0 or -errno (reported: not a
 * recording, another version). */
int rec_file_open(const char *path, struct rec_file **out);
void rec_file_free(struct rec_file *f);

/* The recorded probes (owned by f). */
struct usc_probe_spec *rec_file_specs(struct rec_file *f, size_t *n);
/* The recorded sites, for a session to own (freed as resolve's are; their
 * enum tables stay f's). */
struct usc_site *rec_file_take_sites(struct rec_file *f, size_t *n);
/* Where and why the file ends early, or NULL. */
const char *rec_file_damage(const struct rec_file *f);
/* Why the flight recorder wrote the file, or NULL (not a snapshot). */
const char *rec_file_snapshot(const struct rec_file *f);
const struct rec_header *rec_file_header(const struct rec_file *f);
/* The counts at the end (per site, nsites of them), or NULL (cut short). */
const struct rec_site_stats *rec_file_stats(const struct rec_file *f, uint64_t *events,
					    uint64_t *lost);
/* ... per site, of the records lost, those that found no room within a
 * wait's bound (usc_site_stats.lost_wait), or NULL (a file older than that
 * count, or cut short). */
const uint64_t *rec_file_lost_wait(const struct rec_file *f);

/* Every REC_MAPS chunk, in file order: the maps of process pid as then
 * (fn's m and its paths are freed after fn). A chunk that does not read
 * is skipped. 0, -ENOMEM, or fn's non-zero. */
struct proc_map;
int rec_file_maps(struct rec_file *f,
		  int (*fn)(void *ctx, pid_t pid, const struct proc_map *m, size_t n), void *ctx);

/* Every REC_PYCODE chunk, in file order: a Python code object of process
 * pid (python/names.h; ci's strings are freed after fn). A chunk that does
 * not read is skipped. 0, or fn's non-zero. */
struct python_code_info;
int rec_file_pycodes(struct rec_file *f,
		     int (*fn)(void *ctx, pid_t pid, const struct python_code_info *ci), void *ctx);

/* Every event, in time order, to fn (non-zero from fn stops). Records that
 * do not read as their engine writes them are skipped and counted in
 * *bad. 0 or -ENOMEM. */
int rec_file_events(struct rec_file *f, usc_event_fn fn, void *ctx, uint64_t *bad);

#endif
