/* Recordings (format.h): the writer the recorder sink owns and the engines
 * write their records to, unformatted, and the reader a recorded file is
 * read back with, as a source of events like an engine. */
#ifndef USC_RECORD_RECORD_H
#define USC_RECORD_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "record/format.h"

struct usc_cache;

/* ---- writing ------------------------------------------------------------ */

struct rec_writer;

/* Create path and write its header. 0 or -errno (reported). */
int rec_writer_open(const char *path, const char *command, struct rec_writer **out);
/* Write what is buffered, the END chunk, and close. 0 or -errno (reported;
 * the file is kept: it reads up to what was written). */
int rec_writer_close(struct rec_writer *w);
/* Write what is buffered now (the flight recorder's SIGUSR1: the file has
 * it when uscope returns to its loop). 0 or -errno. */
int rec_writer_flush(struct rec_writer *w);
/* Free without an END (a failed run: the file reads as cut short). */
void rec_writer_free(struct rec_writer *w);

/* The session's probes and sites (REC_SITES), and the engine of each site
 * (place[i].engine indexes engine_names; -1: skipped). */
int rec_write_sites(struct rec_writer *w, const struct usc_probe_spec *specs, size_t nspecs,
		    const struct usc_site *sites, size_t nsites, const struct usc_placement *place,
		    const char *const *engine_names);
/* Process pid's maps, and every file it maps executable that is not yet in
 * the recording: segments and function symbols. */
/* Process pid's maps again, as the cache has them now (they changed: a
 * library loaded): a reader adds them to those it had. */
int rec_write_maps(struct rec_writer *w, struct usc_cache *c, pid_t pid);
int rec_write_process(struct rec_writer *w, struct usc_cache *c, pid_t pid);
int rec_write_thread(struct rec_writer *w, pid_t pid, pid_t tid, const char *comm);
int rec_write_clock(struct rec_writer *w, const struct rec_clock_pair *p, size_t n);
/* An inject image: its process, and each site's runtime address there. */
int rec_write_image(struct rec_writer *w, uint32_t image, pid_t pid, const uint64_t *ips,
		    size_t n);
/* A thread's ring bytes, a then b (the ring's end, then its start). */
int rec_write_inject(struct rec_writer *w, const struct rec_inject *h, const void *a,
		     size_t alen, const void *b, size_t blen);
/* A Python code object of process pid (python/names.h's info). */
struct python_code_info;
int rec_write_pycode(struct rec_writer *w, pid_t pid, const struct python_code_info *ci);
/* One bpf record as the program wrote it. */
int rec_write_bpf(struct rec_writer *w, const void *rec, size_t len);
/* One event in uscope's own form. */
int rec_write_event(struct rec_writer *w, const struct usc_event *ev, uint32_t site);
int rec_write_round(struct rec_writer *w);
int rec_write_stats(struct rec_writer *w, const struct usc_stats *st, size_t nsites);
int rec_write_snapshot(struct rec_writer *w, const char *why);
/* Bytes written so far. */
uint64_t rec_written(const struct rec_writer *w);
/* Has the process pid been described (rec_write_process)? */
bool rec_knows_process(const struct rec_writer *w, pid_t pid);
/* The same for a thread's name. */
bool rec_knows_thread(const struct rec_writer *w, pid_t tid);

#endif
