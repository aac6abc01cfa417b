/* A pprof profile being built, then written: see pprof.h. The messages of
 * profile.proto and their fields:
 *
 *   Profile   1 sample_type (ValueType)  2 sample  3 mapping  4 location
 *             5 function  6 string_table  9 time_nanos  10 duration_nanos
 *   ValueType 1 type  2 unit (string indexes)
 *   Sample    1 location_id (packed, leaf first)  2 value (packed)  3 label
 *   Label     1 key  2 str  3 num
 *   Mapping   1 id  2 memory_start  3 memory_limit  4 file_offset
 *             5 filename  6 build_id  7..10 has_functions, has_filenames,
 *             has_line_numbers, has_inline_frames
 *   Location  1 id  2 mapping_id  3 address  4 line
 *   Line      1 function_id  2 line
 *   Function  1 id  2 name  3 system_name  4 filename
 *
 * Samples are encoded as they come (fields may come in any order); the
 * tables they point to are written at the end. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/grow.h"
#include "pprof/pprof.h"

/* An open-addressing table from a key of two words to an id (from 1): a
 * slot whose id is 0 is free. */
struct idmap_slot {
	uint64_t a, b, id;
};

struct idmap {
	struct idmap_slot *slots;
	size_t cap, n;
};

static uint64_t hash2(uint64_t a, uint64_t b)
{
	uint64_t h = (a * 0x9e3779b97f4a7c15ULL) ^ (b + 0x632be59bd9b4e019ULL);

	h ^= h >> 31;
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 29);
}

static int idmap_grow(struct idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	struct idmap_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->slots[i].id)
			continue;
		for (j = hash2(m->slots[i].a, m->slots[i].b) & (cap - 1); slots[j].id;
		     j = (j + 1) & (cap - 1))
			;
		slots[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

/* The slot of (a, b): its id, or 0 and *slot where it would go. */
static uint64_t idmap_find(struct idmap *m, uint64_t a, uint64_t b, size_t *slot)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap && idmap_grow(m))
		return UINT64_MAX;
	for (j = hash2(a, b) & (m->cap - 1); m->slots[j].id; j = (j + 1) & (m->cap - 1))
		if (m->slots[j].a == a && m->slots[j].b == b)
			return m->slots[j].id;
	*slot = j;
	return 0;
}

static void idmap_put(struct idmap *m, size_t slot, uint64_t a, uint64_t b, uint64_t id)
{
	m->slots[slot] = (struct idmap_slot){a, b, id};
	m->n++;
}

static void idmap_free(struct idmap *m)
{
	free(m->slots);
}

struct mapping {
	uint64_t start, limit, offset, file, build;	/* file, build: string indexes */
};

struct location {
	uint64_t mapping, addr;
	struct pprof_line *lines;
	size_t n;
};

struct pprof {
	char **str;
	size_t nstr, capstr;
	uint64_t *str_slot;	/* open addressing: index + 1 */
	size_t nslots;
	size_t ntypes;
	uint64_t type[8], unit[8];
	struct mapping *maps;
	size_t nmaps;
	uint64_t (*funcs)[2];	/* name, file */
	size_t nfuncs;
	struct idmap func_ids, loc_ids;
	struct location *locs;
	size_t nlocs;
	struct pb samples;	/* Profile.sample fields, as they came */
	int64_t time_ns, duration_ns;
	int err;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static int str_grow(struct pprof *p)
{
	size_t ns = p->nslots ? p->nslots * 2 : 1024;
	uint64_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < p->nstr; i++) {
		size_t j = str_hash(p->str[i]) & (ns - 1);

		while (slots[j])
			j = (j + 1) & (ns - 1);
		slots[j] = i + 1;
	}
	free(p->str_slot);
	p->str_slot = slots;
	p->nslots = ns;
	return 0;
}

/* The index of s in the string table (added when new); 0 is "". */
static uint64_t str_index(struct pprof *p, const char *s)
{
	size_t j;

	if (!s || !*s || p->err)
		return 0;
	if ((p->nstr + 1) * 2 > p->nslots && str_grow(p))
		goto oom;
	for (j = str_hash(s) & (p->nslots - 1); p->str_slot[j]; j = (j + 1) & (p->nslots - 1))
		if (!strcmp(p->str[p->str_slot[j] - 1], s))
			return p->str_slot[j] - 1;
	if (core_reserve(p->str, p->capstr, p->nstr + 1, 64))
		goto oom;
	p->str[p->nstr] = strdup(s);
	if (!p->str[p->nstr])
		goto oom;
	p->str_slot[j] = ++p->nstr;
	return p->nstr - 1;
oom:
	p->err = -ENOMEM;
	return 0;
}

struct pprof *pprof_new(const char *const *type, const char *const *unit, size_t n)
{
	struct pprof *p = calloc(1, sizeof(*p));

	if (!p || n > 8)
		goto fail;
	p->capstr = 64;
	p->str = calloc(p->capstr, sizeof(*p->str));
	if (!p->str || str_grow(p) || !(p->str[0] = strdup("")))
		goto fail;
	p->nstr = 1;
	p->str_slot[str_hash("") & (p->nslots - 1)] = 1;
	p->ntypes = n;
	for (size_t i = 0; i < n; i++) {
		p->type[i] = str_index(p, type[i]);
		p->unit[i] = str_index(p, unit[i]);
	}
	if (p->err)
		goto fail;
	return p;
fail:
	pprof_free(p);
	return NULL;
}

void pprof_free(struct pprof *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->str && i < p->nstr; i++)
		free(p->str[i]);
	free(p->str);
	free(p->str_slot);
	free(p->maps);
	free(p->funcs);
	for (size_t i = 0; i < p->nlocs; i++)
		free(p->locs[i].lines);
	free(p->locs);
	idmap_free(&p->func_ids);
	idmap_free(&p->loc_ids);
	pb_free(&p->samples);
	free(p);
}

uint64_t pprof_mapping(struct pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
		       const char *file, const char *build_id)
{
	struct mapping m = {start, limit, offset, str_index(p, file), str_index(p, build_id)};
	struct mapping *v;

	if (p->err)
		return 0;
	for (size_t i = 0; i < p->nmaps; i++)
		if (!memcmp(&p->maps[i], &m, sizeof(m)))
			return i + 1;
	v = realloc(p->maps, (p->nmaps + 1) * sizeof(*v));
	if (!v) {
		p->err = -ENOMEM;
		return 0;
	}
	p->maps = v;
	p->maps[p->nmaps++] = m;
	return p->nmaps;
}

uint64_t pprof_function(struct pprof *p, const char *name, const char *file)
{
	uint64_t n = str_index(p, name), f = str_index(p, file), id;
	size_t slot = 0;

	if (p->err)
		return 0;
	id = idmap_find(&p->func_ids, n, f, &slot);
	if (id == UINT64_MAX) {
		p->err = -ENOMEM;
		return 0;
	}
	if (id)
		return id;
	if (!(p->nfuncs & (p->nfuncs + 1))) {	/* 0, 1, 3, 7...: double */
		uint64_t (*v)[2] = realloc(p->funcs, (p->nfuncs * 2 + 2) * sizeof(*v));

		if (!v) {
			p->err = -ENOMEM;
			return 0;
		}
		p->funcs = v;
	}
	p->funcs[p->nfuncs][0] = n;
	p->funcs[p->nfuncs][1] = f;
	idmap_put(&p->func_ids, slot, n, f, ++p->nfuncs);
	return p->nfuncs;
}

uint64_t pprof_location(struct pprof *p, uint64_t mapping, uint64_t addr,
			const struct pprof_line *lines, size_t n)
{
	/* an address is its location; without one, its function is */
	uint64_t ka = addr ? mapping : UINT64_MAX, kb = addr ? addr : n ? lines[0].function : 0;
	size_t slot = 0;
	uint64_t id;
	struct location *l;

	if (p->err)
		return 0;
	id = idmap_find(&p->loc_ids, ka, kb, &slot);
	if (id == UINT64_MAX) {
		p->err = -ENOMEM;
		return 0;
	}
	if (id)
		return id;
	if (!(p->nlocs & (p->nlocs + 1))) {
		struct location *v = realloc(p->locs, (p->nlocs * 2 + 2) * sizeof(*v));

		if (!v) {
			p->err = -ENOMEM;
			return 0;
		}
		p->locs = v;
	}
	l = &p->locs[p->nlocs];
	*l = (struct location){.mapping = mapping, .addr = addr, .n = n};
	if (n) {
		l->lines = malloc(n * sizeof(*lines));
		if (!l->lines) {
			p->err = -ENOMEM;
			return 0;
		}
		memcpy(l->lines, lines, n * sizeof(*lines));
	}
	idmap_put(&p->loc_ids, slot, ka, kb, ++p->nlocs);
	return p->nlocs;
}

int pprof_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		 const struct pprof_label *labels, size_t nlabels)
{
	struct pb s = {0}, lb = {0};
	uint64_t v[8];

	for (size_t i = 0; i < p->ntypes; i++)
		v[i] = (uint64_t)values[i];
	pb_packed(&s, 1, locs, nlocs);
	pb_packed(&s, 2, v, p->ntypes);
	for (size_t i = 0; i < nlabels; i++) {
		pb_reset(&lb);
		pb_varint(&lb, 1, str_index(p, labels[i].key));
		if (labels[i].str)
			pb_varint(&lb, 2, str_index(p, labels[i].str));
		else
			pb_varint(&lb, 3, (uint64_t)labels[i].num);
		pb_message(&s, 3, &lb);
	}
	pb_message(&p->samples, 2, &s);
	pb_free(&s);
	pb_free(&lb);
	if (p->samples.err)
		p->err = p->samples.err;
	return p->err;
}

void pprof_times(struct pprof *p, int64_t time_ns, int64_t duration_ns)
{
	p->time_ns = time_ns;
	p->duration_ns = duration_ns;
}

static void encode_tables(struct pprof *p, struct pb *out)
{
	struct pb m = {0}, l = {0};

	for (size_t i = 0; i < p->ntypes; i++) {
		pb_reset(&m);
		pb_varint(&m, 1, p->type[i]);
		pb_varint(&m, 2, p->unit[i]);
		pb_message(out, 1, &m);
	}
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct mapping *mp = &p->maps[i];

		pb_reset(&m);
		pb_varint(&m, 1, i + 1);
		pb_varint(&m, 2, mp->start);
		pb_varint(&m, 3, mp->limit);
		pb_varint(&m, 4, mp->offset);
		pb_varint(&m, 5, mp->file);
		pb_varint(&m, 6, mp->build);
		/* symbolized already: pprof must not look for the files */
		for (uint32_t f = 7; f <= 10; f++)
			pb_varint(&m, f, 1);
		pb_message(out, 3, &m);
	}
	for (size_t i = 0; i < p->nlocs; i++) {
		const struct location *lc = &p->locs[i];

		pb_reset(&m);
		pb_varint(&m, 1, i + 1);
		if (lc->mapping)
			pb_varint(&m, 2, lc->mapping);
		if (lc->addr)
			pb_varint(&m, 3, lc->addr);
		for (size_t k = 0; k < lc->n; k++) {
			pb_reset(&l);
			pb_varint(&l, 1, lc->lines[k].function);
			if (lc->lines[k].line)
				pb_varint(&l, 2, (uint64_t)lc->lines[k].line);
			pb_message(&m, 4, &l);
		}
		pb_message(out, 4, &m);
	}
	for (size_t i = 0; i < p->nfuncs; i++) {
		pb_reset(&m);
		pb_varint(&m, 1, i + 1);
		pb_varint(&m, 2, p->funcs[i][0]);
		pb_varint(&m, 3, p->funcs[i][0]);
		pb_varint(&m, 4, p->funcs[i][1]);
		pb_message(out, 5, &m);
	}
	for (size_t i = 0; i < p->nstr; i++)
		pb_bytes(out, 6, p->str[i], strlen(p->str[i]));
	if (p->time_ns)
		pb_varint(out, 9, (uint64_t)p->time_ns);
	if (p->duration_ns)
		pb_varint(out, 10, (uint64_t)p->duration_ns);
	pb_free(&m);
	pb_free(&l);
}

int pprof_encode(struct pprof *p, uint8_t **out, size_t *len)
{
	struct pb b = {0};

	*out = NULL;
	*len = 0;
	if (p->err)
		return p->err;
	encode_tables(p, &b);
	if (!b.err && p->samples.len && (b.len + p->samples.len > b.cap)) {
		uint8_t *n = realloc(b.buf, b.len + p->samples.len);

		if (!n)
			b.err = -ENOMEM;
		else {
			b.buf = n;
			b.cap = b.len + p->samples.len;
		}
	}
	if (b.err) {
		pb_free(&b);
		return -ENOMEM;
	}
	if (p->samples.len)
		memcpy(b.buf + b.len, p->samples.buf, p->samples.len);
	*out = b.buf;
	*len = b.len + p->samples.len;
	return 0;
}

int pprof_write(struct pprof *p, FILE *fp)
{
	z_stream z = {0};
	uint8_t *raw, out[16384];
	size_t len;
	int ret = pprof_encode(p, &raw, &len), zr;

	if (ret)
		return ret;
	/* windowBits 15 + 16: a gzip stream, as pprof's readers expect */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(raw);
		return -ENOMEM;
	}
	z.next_in = raw;
	z.avail_in = (uInt)len;
	do {
		z.next_out = out;
		z.avail_out = sizeof(out);
		zr = deflate(&z, Z_FINISH);
		if (zr == Z_STREAM_ERROR) {
			ret = -ENOMEM;
			break;
		}
		if (fwrite(out, 1, sizeof(out) - z.avail_out, fp) != sizeof(out) - z.avail_out) {
			ret = -EIO;
			break;
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	free(raw);
	if (!ret && fflush(fp))
		ret = -EIO;
	return ret;
}
