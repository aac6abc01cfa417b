/* Go's function table (.gopclntab): names, entries and ends of functions.
 * See gopclntab.h for the layouts. Learnt from Go's debug/gosym (pclntab.go)
 * and runtime/symtab.go; every read here is bounded by the buffer. */
#include "objfile/gopclntab.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* A field of sz (4 or 8) bytes at off, if it fits in len. */
static bool rdfield(const uint8_t *d, size_t len, uint64_t off, unsigned sz, uint64_t *v)
{
	if (off > len || len - off < sz)
		return false;
	*v = sz == 1 ? d[off] : sz == 4 ? rd32(d + off) : rd64(d + off);
	return true;
}

int gopclntab_header(const void *data, size_t len, struct gopclntab_hdr *h)
{
	const uint8_t *d = data;
	unsigned nwords;
	uint64_t w[8] = {0}, room;

	memset(h, 0, sizeof(*h));
	if (len < 8) {
		log_debug("gopclntab: %zu bytes: too short for a header", len);
		return -EINVAL;
	}
	switch (rd32(d)) {
	case GOPCLNTAB_MAGIC_12: h->version = GOPCLNTAB_12; nwords = 1; break;
	case GOPCLNTAB_MAGIC_116: h->version = GOPCLNTAB_116; nwords = 7; break;
	case GOPCLNTAB_MAGIC_118: h->version = GOPCLNTAB_118; nwords = 8; break;
	case GOPCLNTAB_MAGIC_120: h->version = GOPCLNTAB_120; nwords = 8; break;
	default:
		log_debug("gopclntab: unknown magic 0x%08" PRIx32, rd32(d));
		return -EINVAL;
	}
	h->quantum = d[6];
	h->ptrsize = d[7];
	if (d[4] || d[5] || (h->quantum != 1 && h->quantum != 2 && h->quantum != 4) ||
	    (h->ptrsize != 4 && h->ptrsize != 8)) {
		log_debug("gopclntab: bad header (pad %u %u, quantum %u, pointer size %u)", d[4],
			  d[5], h->quantum, h->ptrsize);
		return -EINVAL;
	}
	for (unsigned i = 0; i < nwords; i++)
		if (!rdfield(d, len, 8 + (uint64_t)i * h->ptrsize, h->ptrsize, &w[i])) {
			log_debug("gopclntab: %zu bytes: the header is cut short", len);
			return -EINVAL;
		}
	h->nfunc = w[0];
	switch (h->version) {
	case GOPCLNTAB_12:
		/* the functab follows nfunc; names, _funcs and pc tables are
		 * relative to the table's start */
		h->functab_off = 8 + h->ptrsize;
		h->fieldsz = h->ptrsize;
		break;
	case GOPCLNTAB_116:
		/* nfunc, nfiles, funcname, cu, filetab, pctab, pcln (functab) */
		h->funcname_off = w[2];
		h->cutab_off = w[3];
		h->filetab_off = w[4];
		h->pctab_off = w[5];
		h->functab_off = h->funcdata_off = w[6];
		h->fieldsz = h->ptrsize;
		break;
	default:
		/* nfunc, nfiles, textStart, funcname, cu, filetab, pctab, pcln */
		h->text_start = w[2];
		h->text_start_off = 8 + 2 * h->ptrsize;
		h->funcname_off = w[3];
		h->cutab_off = w[4];
		h->filetab_off = w[5];
		h->pctab_off = w[6];
		h->functab_off = h->funcdata_off = w[7];
		h->fieldsz = 4;
		break;
	}
	if (h->funcname_off > len || h->pctab_off > len || h->functab_off > len ||
	    h->cutab_off > len || h->filetab_off > len) {
		log_debug("gopclntab: an offset of the header lies past its %zu bytes", len);
		return -EINVAL;
	}
	/* nfunc entries of two fields and the final entry */
	room = len - h->functab_off;
	if (room < h->fieldsz || (room - h->fieldsz) / (2 * h->fieldsz) < h->nfunc) {
		log_debug("gopclntab: %" PRIu64 " functions do not fit in %zu bytes", h->nfunc,
			  len);
		return -EINVAL;
	}
	/* Go 1.2: the file table's offset follows the functab's final entry
	 * (a table without one, or with it out of bounds, has no files) */
	if (h->version == GOPCLNTAB_12) {
		uint64_t ft = 0;

		if (rdfield(d, len, h->functab_off + (2 * h->nfunc + 1) * h->fieldsz, 4, &ft) &&
		    ft < len)
			h->filetab_off = ft;
	}
	return 0;
}

/* The i-th functab entry (i <= nfunc: the last is the end) as an address. */
static bool entry_pc(const uint8_t *d, size_t len, const struct gopclntab_hdr *h, uint64_t i,
		     uint64_t *pc)
{
	uint64_t v;

	if (!rdfield(d, len, h->functab_off + 2 * i * h->fieldsz, h->fieldsz, &v))
		return false;
	if (h->version >= GOPCLNTAB_118) {
		if (v > UINT64_MAX - h->text_start)
			return false;
		v += h->text_start;
	}
	*pc = v;
	return true;
}

/* An unsigned LEB128 varint of at most 32 bits at *off (< end). */
static bool varint(const uint8_t *d, uint64_t end, uint64_t *off, uint32_t *v)
{
	uint32_t r = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*off >= end)
			return false;
		b = d[(*off)++];
		r |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

/* How many bytes of code the pc-value table at off covers: the sum of its
 * pc deltas up to its terminating zero value delta. 0 if it is malformed or
 * covers more than limit. */
static uint64_t pctab_extent(const uint8_t *d, size_t len, const struct gopclntab_hdr *h,
			     uint64_t off, uint64_t limit)
{
	uint64_t pc = 0;
	bool first = true;

	if (off >= len)
		return 0;
	for (;;) {
		uint32_t vdelta, pcdelta;

		if (!varint(d, len, &off, &vdelta))
			return 0;
		if (vdelta == 0 && !first)
			return pc;
		first = false;
		if (!varint(d, len, &off, &pcdelta))
			return 0;
		pc += (uint64_t)pcdelta * h->quantum;
		if (pc > limit)
			return 0;
	}
}

/* Function i's record (its functab entry at pc, the next one at next)
 * into *f: 0, or 1 when its record or name is out of bounds or
 * inconsistent. */
static int read_func(const uint8_t *d, size_t len, const struct gopclntab_hdr *h, uint64_t i,
		     uint64_t pc, uint64_t next, struct gopclntab_func *f)
{
	/* _func: entry (uintptr; uint32 entryoff from 1.18), then int32/uint32
	 * fields: nameoff, args, frame|deferreturn, pcsp, pcfile, pcln,
	 * npcdata, cuOffset (1.16+), ... */
	unsigned sz0 = h->version >= GOPCLNTAB_118 ? 4 : h->ptrsize;
	uint64_t foff, fo, entry, nameoff, pcsp, pcfile = 0, pcln = 0, cu = 0, name, ext;
	uint64_t npcdata = 0, inl = 0;

	memset(f, 0, sizeof(*f));
	if (!rdfield(d, len, h->functab_off + (2 * i + 1) * h->fieldsz, h->fieldsz, &foff))
		return 1;
	if (foff > len - h->funcdata_off)
		return 1;
	fo = h->funcdata_off + foff;
	if (!rdfield(d, len, fo, sz0, &entry) || !rdfield(d, len, fo + sz0, 4, &nameoff) ||
	    !rdfield(d, len, fo + sz0 + 12, 4, &pcsp))
		return 1;
	if (h->version >= GOPCLNTAB_118)
		entry += h->text_start;
	if (entry != pc || (nameoff & 0x80000000u))
		return 1;
	name = h->funcname_off + nameoff;
	if (name >= len || !d[name] || !memchr(d + name, 0, len - name))
		return 1;
	/* the code's end: where the pcsp table ends, if it fits */
	ext = pcsp && h->pctab_off + pcsp >= h->pctab_off ?
	      pctab_extent(d, len, h, h->pctab_off + pcsp, next - pc) : 0;
	/* the _func's funcID and flag bytes: after cuOffset (1.18, 1.19),
	 * after startLine (1.20+); funcFlag_ASM is 1 << 2 */
	if (h->version >= GOPCLNTAB_118) {
		uint64_t flag = 0, id = 0;
		uint64_t at = fo + (h->version >= GOPCLNTAB_120 ? 40 : 36);

		f->asm_abi0 = rdfield(d, len, at + 1, 1, &flag) && (flag & 4);
		f->funcid = rdfield(d, len, at, 1, &id) ? (uint8_t)id : 0;
	}
	/* the source position tables and the compilation unit (none: 0) */
	if (!rdfield(d, len, fo + sz0 + 16, 4, &pcfile) ||
	    !rdfield(d, len, fo + sz0 + 20, 4, &pcln))
		pcfile = pcln = 0;
	if (h->version >= GOPCLNTAB_116 && !rdfield(d, len, fo + sz0 + 28, 4, &cu))
		pcfile = 0;
	/* pcdata[] follows the fixed fields (1.16+: 40 bytes after the entry
	 * of 1.16, 1.17; 40 in all of 1.18, 1.19; 44 from 1.20, which adds
	 * startLine); its table 2 (PCDATA_InlTreeIndex) says where code was
	 * inlined */
	if (h->version >= GOPCLNTAB_116 && rdfield(d, len, fo + sz0 + 24, 4, &npcdata) &&
	    npcdata > 2 &&
	    !rdfield(d, len, fo + (h->version >= GOPCLNTAB_120 ? 44 : h->version >= GOPCLNTAB_118 ?
				   40 : sz0 + 36) + 8, 4, &inl))
		inl = 0;
	f->inltree = (uint32_t)inl;
	f->name = (const char *)d + name;
	f->entry = pc;
	f->end = ext ? pc + ext : next;
	f->pcsp = ext ? (uint32_t)pcsp : 0;
	f->pcfile = (uint32_t)pcfile;
	f->pcln = (uint32_t)pcln;
	f->cu = (uint32_t)cu;
	return 0;
}

ssize_t gopclntab_funcs(const void *data, size_t len, const struct gopclntab_hdr *h,
			struct gopclntab_func **out)
{
	const uint8_t *d = data;
	struct gopclntab_func *v;
	size_t n = 0, skipped = 0;
	uint64_t pc, next;

	*out = NULL;
	if (!h->nfunc)
		return 0;
	if (!entry_pc(d, len, h, 0, &pc))
		return -EINVAL;
	/* gopclntab_header checked that nfunc entries fit in len */
	v = calloc((size_t)h->nfunc, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint64_t i = 0; i < h->nfunc; i++, pc = next) {
		if (!entry_pc(d, len, h, i + 1, &next)) {
			free(v);
			return -EINVAL;
		}
		if (next < pc) {
			log_debug("gopclntab: function %" PRIu64 " at 0x%" PRIx64
				  " is after the next one, at 0x%" PRIx64, i, pc, next);
			free(v);
			return -EINVAL;
		}
		if (read_func(d, len, h, i, pc, next, &v[n])) {
			skipped++;
			continue;
		}
		n++;
	}
	if (skipped)
		log_debug("gopclntab: %zu of %" PRIu64 " functions left out (their records or names "
			  "are out of bounds)", skipped, h->nfunc);
	if (!n) {
		free(v);
		return 0;
	}
	*out = v;
	return (ssize_t)n;
}

int gopclntab_func_at(const void *data, size_t len, const struct gopclntab_hdr *h, uint64_t pc,
		      struct gopclntab_func *f)
{
	const uint8_t *d = data;
	uint64_t lo = 0, hi = h->nfunc, at, next;

	/* the last entry at or before pc (entries rise: a table whose do not
	 * gives some function or none, never a read out of bounds) */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2, e;

		if (!entry_pc(d, len, h, mid, &e))
			return -ENOENT;
		if (e <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || !entry_pc(d, len, h, lo - 1, &at) || !entry_pc(d, len, h, lo, &next) ||
	    next < at || pc >= next)
		return -ENOENT;
	if (read_func(d, len, h, lo - 1, at, next, f) || pc >= f->end)
		return -ENOENT;
	return 0;
}

void gopclntab_pcv_start(uint32_t tab, uint64_t entry, uint64_t end, struct gopclntab_pcv *it)
{
	it->tab = tab;
	it->off = 0;
	it->pc = entry;
	it->end = end;
	it->val = -1;
	it->first = true;
}

int gopclntab_pcv_next(const void *data, size_t len, const struct gopclntab_hdr *h,
		       struct gopclntab_pcv *it, uint64_t *lo, uint64_t *hi, int32_t *val)
{
	const uint8_t *d = data;
	uint64_t base = h->pctab_off + it->tab, off;
	uint32_t uv, pcdelta;

	if (!it->tab || base < h->pctab_off || base >= len)
		return -EINVAL;
	if (!it->off)
		it->off = base;
	off = it->off;
	if (!varint(d, len, &off, &uv))
		return -EINVAL;
	if (uv == 0 && !it->first)
		return 0;
	if (!varint(d, len, &off, &pcdelta))
		return -EINVAL;
	it->first = false;
	it->off = off;
	/* zig-zag: the low bit says negative */
	it->val = (int32_t)((uint32_t)it->val + ((uv & 1) ? ~(uv >> 1) : uv >> 1));
	/* past the function's end, or past the top of the address space (a
	 * table near it would wrap round) */
	if (it->pc > it->end || (uint64_t)pcdelta * h->quantum > it->end - it->pc)
		return -EINVAL;
	*lo = it->pc;
	*hi = it->pc + (uint64_t)pcdelta * h->quantum;
	it->pc = *hi;
	*val = it->val;
	return 1;
}

int gopclntab_pcvalue(const void *data, size_t len, const struct gopclntab_hdr *h, uint32_t tab,
		      uint64_t entry, uint64_t end, uint64_t pc, int32_t *val)
{
	struct gopclntab_pcv it;
	uint64_t lo, hi;
	int32_t v;
	int r;

	gopclntab_pcv_start(tab, entry, end, &it);
	while ((r = gopclntab_pcv_next(data, len, h, &it, &lo, &hi, &v)) > 0)
		if (pc >= lo && pc < hi) {
			*val = v;
			return 0;
		}
	return r < 0 ? r : -ENOENT;
}

const char *gopclntab_file(const void *data, size_t len, const struct gopclntab_hdr *h,
			   const struct gopclntab_func *f, int32_t fileno)
{
	const uint8_t *d = data;
	uint64_t at, name;

	if (fileno < 0 || !h->filetab_off)
		return NULL;
	if (h->version == GOPCLNTAB_12) {
		uint64_t nfiles;

		/* filetab[0] is the count, filetab[i] the name's offset */
		if (!rdfield(d, len, h->filetab_off, 4, &nfiles) || !fileno ||
		    (uint64_t)fileno >= nfiles ||
		    !rdfield(d, len, h->filetab_off + 4 * (uint64_t)fileno, 4, &name))
			return NULL;
	} else {
		/* the unit's table gives the offset in filetab (~0: none) */
		if (!h->cutab_off ||
		    !rdfield(d, len, h->cutab_off + 4 * ((uint64_t)f->cu + (uint64_t)fileno), 4,
			     &at) || at == 0xffffffffu)
			return NULL;
		name = h->filetab_off + at;
	}
	if (name >= len || !d[name] || !memchr(d + name, 0, len - name))
		return NULL;
	return (const char *)d + name;
}
