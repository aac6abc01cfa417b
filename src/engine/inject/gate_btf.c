/* The two offsets the gate's program reads (gate.bpf.c): a task's signal
 * pointer and its signal_struct's controlling terminal, found in the
 * kernel's own BTF (/sys/kernel/btf/vmlinux) by one pass over its types.
 *
 * libbpf's CO-RE would find them too, but it parses and indexes the whole
 * BTF first (126,000 types here): 20-70 ms of CPU idle, and the gate loads
 * before uscope is ready, where a machine busy with the very processes to
 * patch gives uscope a fraction of a CPU (about 600 ms of the readiness of
 * 50 processes, issue 27). The file is mapped where the kernel allows it
 * (Linux 6.16), else read. */
#include <errno.h>
#include <fcntl.h>
#include <linux/btf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/inject/inject_int.h"

struct gbtf {
	const uint8_t *types, *strs;
	uint32_t types_len, strs_len;
	const struct btf_type **byid;	/* type id -> its record (id 0: none) */
	uint32_t n;
};

/* The bytes after a type's record, or -1 for a kind not known. */
static long type_extra(const struct btf_type *t)
{
	uint32_t vlen = BTF_INFO_VLEN(t->info);

	switch (BTF_INFO_KIND(t->info)) {
	case BTF_KIND_INT: case BTF_KIND_VAR: case BTF_KIND_DECL_TAG:
		return 4;
	case BTF_KIND_ARRAY:
		return sizeof(struct btf_array);
	case BTF_KIND_STRUCT: case BTF_KIND_UNION:
		return (long)vlen * sizeof(struct btf_member);
	case BTF_KIND_ENUM: case BTF_KIND_FUNC_PROTO:
		return (long)vlen * 8;
	case BTF_KIND_DATASEC: case BTF_KIND_ENUM64:
		return (long)vlen * 12;
	case BTF_KIND_PTR: case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST: case BTF_KIND_RESTRICT: case BTF_KIND_FUNC: case BTF_KIND_FLOAT:
	case BTF_KIND_TYPE_TAG:
		return 0;
	}
	return -1;
}

static const char *name_of(const struct gbtf *b, uint32_t off)
{
	return off < b->strs_len ? (const char *)b->strs + off : "";
}

/* Every type's record, by id. */
static int index_types(struct gbtf *b)
{
	uint32_t cap = 1 << 17, pos = 0;

	b->byid = malloc(cap * sizeof(*b->byid));
	if (!b->byid)
		return -ENOMEM;
	b->byid[0] = NULL;
	b->n = 1;
	while (pos + sizeof(struct btf_type) <= b->types_len) {
		const struct btf_type *t = (const void *)(b->types + pos);
		long extra = type_extra(t);

		if (extra < 0)
			return -ENOENT;
		if (b->n == cap) {
			const struct btf_type **p = realloc(b->byid, 2 * cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			b->byid = p;
			cap *= 2;
		}
		b->byid[b->n++] = t;
		pos += sizeof(*t) + (uint32_t)extra;
	}
	return pos == b->types_len ? 0 : -ENOENT;
}

static const struct btf_type *type_by_id(const struct gbtf *b, uint32_t id)
{
	return id && id < b->n ? b->byid[id] : NULL;
}

/* The byte offset of pointer member `member` in struct or union t, looked
 * for in its anonymous members too; or -1. */
static long member_off(const struct gbtf *b, const struct btf_type *t, const char *member,
		       int depth)
{
	const struct btf_member *m = (const void *)(t + 1);
	uint32_t vlen = BTF_INFO_VLEN(t->info);
	bool bits = BTF_INFO_KFLAG(t->info);

	for (uint32_t i = 0; i < vlen; i++) {
		uint32_t bit = bits ? BTF_MEMBER_BIT_OFFSET(m[i].offset) : m[i].offset;
		const struct btf_type *mt = type_by_id(b, m[i].type);
		int kind;

		if (!mt || bit % 8)
			continue;
		kind = BTF_INFO_KIND(mt->info);
		if (!m[i].name_off && depth < 4 && (kind == BTF_KIND_STRUCT || kind == BTF_KIND_UNION)) {
			long in = member_off(b, mt, member, depth + 1);

			if (in >= 0)
				return (long)bit / 8 + in;
			continue;
		}
		if (strcmp(name_of(b, m[i].name_off), member))
			continue;
		while (mt && (kind == BTF_KIND_TYPEDEF || kind == BTF_KIND_VOLATILE ||
			      kind == BTF_KIND_CONST || kind == BTF_KIND_RESTRICT ||
			      kind == BTF_KIND_TYPE_TAG)) {
			mt = type_by_id(b, mt->type);
			kind = mt ? (int)BTF_INFO_KIND(mt->info) : 0;
		}
		return mt && kind == BTF_KIND_PTR ? (long)bit / 8 : -1;
	}
	return -1;
}

/* The offset of pointer member `member` of struct `name`, or -1. */
static long struct_member(const struct gbtf *b, const char *name, const char *member)
{
	for (uint32_t id = 1; id < b->n; id++) {
		const struct btf_type *t = b->byid[id];

		if (BTF_INFO_KIND(t->info) == BTF_KIND_STRUCT && BTF_INFO_VLEN(t->info) &&
		    !strcmp(name_of(b, t->name_off), name))
			return member_off(b, t, member, 0);
	}
	return -1;
}

int inj_gate_btf_scan(const void *data, size_t len, uint32_t *signal_off, uint32_t *tty_off)
{
	const uint8_t *p = data;
	const struct btf_header *h = data;
	struct gbtf b = {0};
	long sig, tty;
	int ret;

	if (len < sizeof(*h) || h->magic != BTF_MAGIC || h->hdr_len > len ||
	    (uint64_t)h->hdr_len + h->type_off + h->type_len > len ||
	    (uint64_t)h->hdr_len + h->str_off + h->str_len > len)
		return -ENOENT;
	b.types = p + h->hdr_len + h->type_off;
	b.types_len = h->type_len;
	b.strs = p + h->hdr_len + h->str_off;
	b.strs_len = h->str_len;
	ret = index_types(&b);
	sig = ret ? -1 : struct_member(&b, "task_struct", "signal");
	tty = ret ? -1 : struct_member(&b, "signal_struct", "tty");
	free(b.byid);
	if (ret)
		return ret;
	if (sig < 0 || tty < 0)
		return -ENOENT;
	*signal_off = (uint32_t)sig;
	*tty_off = (uint32_t)tty;
	return 0;
}

int inj_gate_btf_offsets(uint32_t *signal_off, uint32_t *tty_off)
{
	int fd = open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *p;
	size_t got = 0;
	int ret;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size <= 0) {
		close(fd);
		return -ENOENT;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p != MAP_FAILED) {
		close(fd);
		ret = inj_gate_btf_scan(p, (size_t)st.st_size, signal_off, tty_off);
		munmap(p, (size_t)st.st_size);
		return ret;
	}
	p = malloc((size_t)st.st_size);	/* (a kernel before 6.16: no mmap) */
	while (p && got < (size_t)st.st_size) {
		ssize_t n = read(fd, p + got, (size_t)st.st_size - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	ret = !p ? -ENOMEM : inj_gate_btf_scan(p, got, signal_off, tty_off);
	free(p);
	return ret;
}
