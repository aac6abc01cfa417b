/* pprof profiles: the gzipped profile.proto that go tool pprof, Pyroscope
 * and Parca read, built from stacks (sink/pprof.c gives them).
 *
 *   proto.c     a protocol buffers encoder of the little profile.proto
 *               needs: varints, length-delimited fields, packed repeated
 *               integers, nested messages (pb_*)
 *   profile.c   the profile: its string table (index 0 is ""), sample
 *               types, samples, and the mappings, locations and functions
 *               they point to, each once; written gzipped (zlib)
 *
 * Why a hand encoder and not protobuf-c: profile.proto is six small
 * messages whose fields are integers, strings and sub-messages, and only
 * written: the encoder is a hundred lines, where protobuf-c would add a
 * library, a code generator at build time and generated sources for it. */
#ifndef USC_PPROF_PPROF_H
#define USC_PPROF_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- proto.c ---------------------------------------------------------------- */

struct pb {
	uint8_t *buf;
	size_t len, cap;
	int err;		/* -ENOMEM once a write failed: the rest is dropped */
};

/* Field numbers and wire types as profile.proto and the protobuf encoding
 * say: a varint field (int64 and uint64 the same, two's complement), a
 * length-delimited one (bytes, a string, a sub-message), and a packed
 * repeated varint one. Zero values are written too when asked. */
void pb_varint(struct pb *b, uint32_t field, uint64_t v);
void pb_bytes(struct pb *b, uint32_t field, const void *data, size_t len);
void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n);
/* A sub-message: sub's bytes, length-delimited. */
void pb_message(struct pb *b, uint32_t field, const struct pb *sub);
void pb_reset(struct pb *b);
void pb_free(struct pb *b);
/* The raw varint, for tests: bytes written into out (10 at most). */
size_t pb_put_varint(uint8_t *out, uint64_t v);

/* ---- profile.c ------------------------------------------------------------- */

struct pprof;

/* A profile with n sample types, type[i] in unit[i] ("calls", "count";
 * "wall", "nanoseconds"); the last is the one pprof shows by default. */
struct pprof *pprof_new(const char *const *type, const char *const *unit, size_t n);
void pprof_free(struct pprof *p);

/* The id (from 1) of a mapping, a function, a location: the same one for
 * the same arguments. 0: out of memory. build_id may be NULL. */
uint64_t pprof_mapping(struct pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
		       const char *file, const char *build_id);
uint64_t pprof_function(struct pprof *p, const char *name, const char *file);

struct pprof_line {
	uint64_t function;	/* its id */
	int64_t line;		/* 0: unknown */
};
/* A location: its lines innermost first (the functions inlined at addr,
 * then the one they are inlined into); mapping 0: none. */
uint64_t pprof_location(struct pprof *p, uint64_t mapping, uint64_t addr,
			const struct pprof_line *lines, size_t n);

struct pprof_label {
	const char *key;
	const char *str;	/* NULL: a number */
	int64_t num;
};
/* A sample: its locations leaf first, one value per sample type, labels.
 * 0 or -ENOMEM. */
int pprof_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		 const struct pprof_label *labels, size_t nlabels);
/* When the profile was taken and how long it covers (ns). */
void pprof_times(struct pprof *p, int64_t time_ns, int64_t duration_ns);
/* The profile.proto bytes, gzipped, into fp. 0, -ENOMEM, or -EIO (write
 * error: errno kept). */
int pprof_write(struct pprof *p, FILE *fp);
/* The same, not compressed (tests). 0 or -ENOMEM; *out is malloc'ed. */
int pprof_encode(struct pprof *p, uint8_t **out, size_t *len);

#endif
