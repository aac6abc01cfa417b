/* A recording (uscope record -o FILE): a header, then chunks, each a type
 * and a length, payload 8-byte aligned. A reader that finds a chunk it does
 * not know skips it; one cut short or with a bad length ends the reading
 * there, saying where (a crash mid-record, a short copy).
 *
 *   header                       struct rec_header (magic, version)
 *   REC_SITES                    the probes and their sites: what every
 *                                record's site index means, with its
 *                                arguments' names, types and presentation
 *   REC_MODULE, REC_MAPS         the files the traced processes map (their
 *                                segments and function symbols) and each
 *                                process's maps: addresses symbolize after
 *                                the process is gone, on another machine
 *   REC_THREAD                   a thread's process and name
 *   REC_IMAGE                    an inject image: its process, and every
 *                                site's runtime address in it
 *   REC_CLOCK                    (tsc, CLOCK_MONOTONIC ns) pairs: the inject
 *                                engine's records are stamped with the TSC
 *   REC_INJECT                   a thread's ring bytes as the inject agent
 *                                wrote them (engine/inject/inject_shared.h)
 *   REC_BPF                      the bpf program's records as it wrote them
 *                                (engine/bpf/bpf_shared.h)
 *   REC_EVENT                    events in uscope's own binary form (the
 *                                tracefs engine's, decoded as they are read)
 *   REC_ROUND                    every engine was drained: no record after it
 *                                is older than the last round's newest
 *   REC_PYCODE                   a Python code object a $pystack frame or a
 *                                py: probe's event names, when first seen:
 *                                its process and address, module, qualname,
 *                                file, first line and line table
 *   REC_STATS                    per site: hits, records lost (and of them,
 *                                those that found no room within a wait's
 *                                bound), at the end
 *   REC_END                      a clean end
 *
 * Integers are little-endian (the machine's: x86-64). Strings are u32 length
 * + bytes, padded to 8. */
#ifndef USC_RECORD_FORMAT_H
#define USC_RECORD_FORMAT_H

#include <stdint.h>

#define REC_MAGIC "USCOPE\x1aR"
/* 2: an inject chunk's rings may hold short records (struct inj_rec_short);
 * a file of version 1 holds none and reads the same way. */
#define REC_VERSION 2
#define REC_VERSION_MIN 1		/* the oldest this uscope reads */

struct rec_header {
	char magic[8];
	uint32_t version;
	uint32_t header_len;		/* sizeof(struct rec_header) */
	uint64_t realtime_ns;		/* when the recording began (CLOCK_REALTIME) */
	uint64_t mono_ns;		/* ... and CLOCK_MONOTONIC then */
	char host[64];
	char command[256];		/* how it was made: the command line, cut */
};

enum rec_chunk_type {
	REC_SITES = 1,
	REC_MODULE = 2,
	REC_MAPS = 3,
	REC_THREAD = 4,
	REC_CLOCK = 5,
	REC_INJECT = 6,
	REC_BPF = 7,
	REC_EVENT = 8,
	REC_ROUND = 9,
	REC_STATS = 10,
	REC_END = 11,
	REC_SNAPSHOT = 12,	/* the flight recorder wrote what follows (why: a string) */
	REC_IMAGE = 13,
	REC_PYCODE = 14,
};

/* REC_PYCODE: then module, qualname, filename (strings; module may be
 * null), the line table (u32 length, the bytes; 0xffffffff: none) */
struct rec_pycode {
	int32_t pid;
	int32_t firstlineno;
	int32_t firsttraceable;
	uint32_t pad;
	uint64_t addr;
};

/* REC_IMAGE: nsites runtime addresses follow */
struct rec_image {
	uint32_t image;
	int32_t pid;
	uint32_t nsites;
	uint32_t pad;
};

struct rec_chunk {
	uint32_t type;
	uint32_t len;		/* payload bytes (a multiple of 8) */
};

#define REC_CHUNK_MAX (64u << 20)	/* a longer chunk is damage */

/* REC_INJECT's payload starts so; the ring bytes follow (whole records). */
struct rec_inject {
	uint32_t image;		/* which address space (a process's image) */
	uint32_t slot;
	int32_t pid, tid;
	uint32_t nbytes;
	uint32_t pad;
};

/* REC_THREAD */
struct rec_thread {
	int32_t pid, tid;
	char comm[16];
};

/* REC_CLOCK: pairs follow */
struct rec_clock_pair {
	uint64_t tsc, ns;
};

/* REC_STATS: u64 nsites, u64 events, u64 lost (the totals), then one
 * struct rec_site_stats per site; then (files of uscope 0.1 before it end
 * there) u64 nwords, and nwords u64 per site, counts added since, in the
 * order of enum rec_stats_word. A reader takes the words it knows and
 * skips the others: files older or newer than it read. */
struct rec_site_stats {
	uint64_t events;
	int64_t lost;
	int64_t hits;
	uint64_t agg_full, agg_fault;
};

enum rec_stats_word {
	REC_STATS_LOST_WAIT = 0,	/* of lost: no room within a wait's bound
					 * (usc_site_stats.lost_wait) */
	REC_STATS_NWORDS = 1,		/* the words this version writes */
};

/* REC_EVENT: events follow, each so, then its values, then strings */
struct rec_event {
	uint32_t len;		/* bytes of the whole event, 8-aligned */
	uint32_t site;
	uint64_t time_ns;
	int32_t pid, tid, cpu;
	uint16_t nvals;
	uint16_t comm_len;
	uint64_t ip, func;
};

struct rec_value {
	uint8_t kind;		/* enum usc_value_kind */
	uint8_t pad[3];
	uint32_t len;		/* a string's bytes (they follow the values, in order) */
	uint64_t u;
};

#endif
