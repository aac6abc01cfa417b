/* Code objects by address, cached per process, and frames symbolized from
 * them (symbolize.h). */
#include "python/symbolize.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "python/linetable.h"

struct python_sym {
	struct python_offsets off;
	struct python_mem mem;
	struct python_types types;
	struct python_code **slot;	/* open addressing by address; NULL: free */
	size_t cap, n;			/* cap: a power of two */
};

struct python_sym *python_sym_new(const struct python_offsets *off, const struct python_mem *mem,
				  const struct python_types *types)
{
	struct python_sym *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->off = *off;
	s->mem = *mem;
	if (types)
		s->types = *types;
	return s;
}

static void code_free(struct python_code *c)
{
	if (!c)
		return;
	free(c->qualname);
	free(c->filename);
	free(c->linetable);
	free(c);
}

void python_sym_free(struct python_sym *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->cap; i++)
		code_free(s->slot[i]);
	free(s->slot);
	free(s);
}

static size_t hash(uint64_t a)
{
	a ^= a >> 33;
	a *= 0xff51afd7ed558ccdull;
	a ^= a >> 33;
	return (size_t)a;
}

static struct python_code **find(struct python_sym *s, uint64_t addr)
{
	size_t i = hash(addr) & (s->cap - 1);

	while (s->slot[i] && s->slot[i]->addr != addr)
		i = (i + 1) & (s->cap - 1);
	return &s->slot[i];
}

static int grow(struct python_sym *s)
{
	size_t old = s->cap;
	struct python_code **prev = s->slot;

	s->cap = old ? 2 * old : 64;
	s->slot = calloc(s->cap, sizeof(*s->slot));
	if (!s->slot) {
		s->slot = prev;
		s->cap = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < old; i++)
		if (prev[i])
			*find(s, prev[i]->addr) = prev[i];
	free(prev);
	return 0;
}

/* The head of a code object: its fields up to the instructions. */
struct code_head {
	uint64_t type, qualname_p, filename_p, linetable_p;
	uint64_t code_p;	/* co_code (3.8 to 3.10) */
	int firstlineno, firsttraceable;
};

/* The bytes of a code object's head read: up to its instructions (3.11
 * on), or its line table (3.8 to 3.10, where the instructions are a bytes
 * object of their own). */
static unsigned head_len(const struct python_offsets *o)
{
	return (o->flags & PYOFF_FRAMEOBJ) ? o->co_linetable + 8u : o->co_code_adaptive;
}

static int read_head(struct python_sym *s, uint64_t addr, struct code_head *h)
{
	const struct python_offsets *o = &s->off;
	unsigned len = head_len(o);
	uint8_t b[256];

	if (len > sizeof(b))
		return -EINVAL;
	if (!addr || python_mem_read(&s->mem, addr, b, len))
		return -EFAULT;
	memcpy(&h->type, b + o->ob_type, 8);
	memcpy(&h->qualname_p, b + o->co_qualname, 8);
	memcpy(&h->filename_p, b + o->co_filename, 8);
	memcpy(&h->linetable_p, b + o->co_linetable, 8);
	memcpy(&h->firstlineno, b + o->co_firstlineno, 4);
	h->firsttraceable = 0;
	h->code_p = 0;
	if (o->flags & PYOFF_FRAMEOBJ)
		memcpy(&h->code_p, b + o->co_code, 8);
	else
		memcpy(&h->firsttraceable, b + o->co_firsttraceable, 4);
	if (s->types.code && h->type != s->types.code)
		return -EINVAL;
	return 0;
}

static bool same(const struct python_code *c, const struct code_head *h)
{
	return c->type == h->type && c->qualname_p == h->qualname_p &&
	       c->filename_p == h->filename_p && c->linetable_p == h->linetable_p &&
	       c->firstlineno == h->firstlineno;
}

/* 3.8 to 3.10: the line table made a location table (linetable.h), 3.8's
 * and 3.9's last line ending where the code (co_code's size) does. */
static int old_lines(struct python_sym *s, const struct code_head *h, struct python_code *c)
{
	int64_t code_bytes = 0;
	uint8_t *lt = NULL;
	size_t n = 0;
	int err;

	if (h->code_p && python_mem_read(&s->mem, h->code_p + s->off.ob_size, &code_bytes, 8))
		code_bytes = 0;
	err = python_linetable_convert((enum python_lt_format)s->off.lt_format, c->linetable,
				       c->linetable_len, c->firstlineno,
				       code_bytes > 0 ? (size_t)code_bytes : 0, &lt, &n);
	if (err)
		return err;
	free(c->linetable);
	c->linetable = lt;
	c->linetable_len = n;
	return 0;
}

static int read_code(struct python_sym *s, uint64_t addr, const struct code_head *h,
		     struct python_code **out)
{
	struct python_code *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	c->addr = addr;
	c->type = h->type;
	c->qualname_p = h->qualname_p;
	c->filename_p = h->filename_p;
	c->linetable_p = h->linetable_p;
	c->firstlineno = h->firstlineno;
	c->firsttraceable = h->firsttraceable;
	if ((err = python_read_str(&s->off, &s->mem, &s->types, h->qualname_p, &c->qualname)) ||
	    (err = python_read_str(&s->off, &s->mem, &s->types, h->filename_p, &c->filename)) ||
	    (err = python_read_bytes(&s->off, &s->mem, &s->types, h->linetable_p, &c->linetable,
				     &c->linetable_len)) ||
	    (s->off.lt_format != PYLT_LOCATIONS && (err = old_lines(s, h, c)))) {
		code_free(c);
		return err == -E2BIG ? -EINVAL : err;
	}
	*out = c;
	return 0;
}

int python_sym_code(struct python_sym *s, uint64_t addr, bool verify,
		    const struct python_code **out)
{
	struct python_code **slot = NULL, *c;
	struct code_head h;
	int err;

	*out = NULL;
	if (s->cap)
		slot = find(s, addr);
	if (slot && *slot && !verify) {
		*out = *slot;
		return 0;
	}
	if ((err = read_head(s, addr, &h)))
		return err;
	if (slot && *slot) {
		if (same(*slot, &h)) {
			*out = *slot;
			return 0;
		}
		/* freed, and another code object made at its address */
		log_debug("python: the code object at %#llx changed; reading it again",
			  (unsigned long long)addr);
	}
	if ((err = read_code(s, addr, &h, &c)))
		return err;
	if (slot && *slot) {
		code_free(*slot);
		*slot = c;
	} else {
		if ((s->n + 1) * 2 > s->cap && (err = grow(s))) {
			code_free(c);
			return err;
		}
		*find(s, addr) = c;
		s->n++;
	}
	*out = c;
	return 0;
}

int python_sym_frame(struct python_sym *s, const struct python_frame *f, bool verify,
		     struct python_frame_info *out)
{
	const struct python_code *c;
	int err;

	memset(out, 0, sizeof(*out));
	out->line = -1;
	if ((err = python_sym_code(s, f->code, verify, &c)))
		return err;
	out->qualname = c->qualname;
	out->filename = c->filename;
	out->line = python_linetable_line(c->linetable, c->linetable_len, c->firstlineno,
					  f->instr);
	/* _PyFrame_IsIncomplete: before its first traceable instruction, and
	 * not a generator's */
	out->hidden = !(f->flags & (PYFRAME_GEN | PYFRAME_WHOLE)) &&
		      (int64_t)f->instr < 2 * (int64_t)c->firsttraceable;
	return 0;
}
