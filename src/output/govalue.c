/* Go values (a string, a slice, an interface) formatted from their parts,
 * as Go shows them (see govalue.h). */
#include "output/govalue.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "objfile/gotypes.h"
#include "cache/cache.h"

static int64_t sext(uint64_t v, unsigned size)
{
	unsigned shift = 64 - size * 8;

	return size >= 8 ? (int64_t)v : (int64_t)(v << shift) >> shift;
}

/* One element of a slice, of type t (size bytes at p). */
static int put_elem(struct usc_output *o, const struct usc_fetcharg *a, const unsigned char *p,
		    unsigned size)
{
	enum usc_type t = (enum usc_type)(a->go_elem - 1);
	uint64_t u = 0;
	char buf[40];

	memcpy(&u, p, size);
	if (a->go_elem_bool)
		snprintf(buf, sizeof(buf), "%s", u ? "true" : "false");
	else if (fetch_type_is_hex(t))
		snprintf(buf, sizeof(buf), o->json ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, u);
	else if (fetch_type_is_signed(t))
		snprintf(buf, sizeof(buf), "%" PRId64, sext(u, size));
	else
		snprintf(buf, sizeof(buf), "%" PRIu64, u);
	return output_raw(o, buf);
}

/* The element size of a slice's bytes part: its FOP_ST_BYTES's size. */
static unsigned elem_size(const struct usc_fetcharg *a)
{
	for (unsigned k = 0; k < a->ninsn && k < USC_FETCH_MAX; k++)
		if (a->insn[k].op == FOP_ST_BYTES)
			return a->insn[k].size ? a->insn[k].size : 1;
	return 0;
}

static int put_string(struct usc_output *o, const struct usc_value *len,
		      const struct usc_value *v)
{
	int64_t n = (int64_t)len->u;
	size_t have;
	int ret;

	if (len->kind != USC_V_INT || n < 0)
		return output_raw(o, o->json ? "null" : "(fault)");
	if (n == 0)
		return output_raw(o, "\"\"");
	if (v->kind != USC_V_STR)
		return output_raw(o, o->json ? "null" : "(fault)");
	have = v->len < (uint64_t)n ? v->len : (size_t)n;
	ret = o->json ? output_json_string(o, v->str, have) : output_c_string(o, v->str, have);
	if (!ret && !o->json && have < (uint64_t)n)
		ret = output_raw(o, "...");	/* cut: outside the quotes */
	return ret;
}

static int put_slice(struct usc_output *o, const struct usc_fetcharg *a,
		     const struct usc_value *cap, const struct usc_value *len,
		     const struct usc_value *v)
{
	int64_t n = (int64_t)len->u;
	unsigned esz = elem_size(a), shown = 0;
	char buf[96];
	int ret = 0;

	if (len->kind != USC_V_INT || cap->kind != USC_V_INT || n < 0)
		return output_raw(o, o->json ? "null" : "(fault)");
	if (a->go_elem && esz && v->kind == USC_V_STR)
		shown = (unsigned)(v->len / esz);
	if ((uint64_t)n < shown)
		shown = (unsigned)n;
	if (o->json) {
		if (!a->go_elem || (n && v->kind != USC_V_STR))
			return output_raw(o, "null");
		ret = output_raw(o, "[");
		for (unsigned k = 0; k < shown && !ret; k++) {
			ret = k ? output_raw(o, ",") : 0;
			ret = ret ? ret : put_elem(o, a, (const unsigned char *)v->str + k * esz, esz);
		}
		return ret ? ret : output_raw(o, "]");
	}
	snprintf(buf, sizeof(buf), "%s{len=%" PRId64 " cap=%" PRId64, a->go_type ? a->go_type : "[]",
		 n, (int64_t)cap->u);
	ret = output_raw(o, buf);
	if (!ret && a->go_elem && n) {
		ret = output_raw(o, ":");
		if (!ret && v->kind != USC_V_STR)
			ret = output_raw(o, v->kind == USC_V_NULL ? " (null)" : " (fault)");
		for (unsigned k = 0; k < shown && !ret; k++) {
			ret = output_raw(o, k ? ", " : " ");
			ret = ret ? ret : put_elem(o, a, (const unsigned char *)v->str + k * esz, esz);
		}
		if (!ret && v->kind == USC_V_STR && (uint64_t)n > shown)
			ret = output_raw(o, shown ? ", ..." : " ...");
	}
	return ret ? ret : output_raw(o, "}");
}

/* The dynamic type at runtime address t, named from the probed file. */
static void type_name(struct usc_output *o, const struct usc_event *ev, uint64_t t, char *buf,
		      size_t len)
{
	const struct usc_site *s = ev->site;
	struct objfile *ef;
	uint64_t bias = s->is_return ? ev->func - s->func_vaddr : ev->ip - s->vaddr;

	snprintf(buf, len, "(type 0x%" PRIx64 ")", t);
	if (o->cache && s->path && !cache_elf(o->cache, s->path, &ef))
		gotypes_name(ef, t - bias, buf, len);
}

static int put_iface(struct usc_output *o, const struct usc_event *ev,
		     const struct usc_fetcharg *a, const struct usc_value *tab,
		     const struct usc_value *type, const struct usc_value *data)
{
	char name[256], buf[400];

	if (tab->kind != USC_V_INT || data->kind != USC_V_INT)
		return output_raw(o, o->json ? "null" : "(fault)");
	if (!tab->u)
		return output_raw(o, o->json ? "null" : "nil");
	if (type->kind != USC_V_INT)
		snprintf(name, sizeof(name), "%s", "(fault)");
	else
		type_name(o, ev, type->u, name, sizeof(name));
	(void)a;
	if (!o->json) {
		snprintf(buf, sizeof(buf), "%s(0x%" PRIx64 ")", name, data->u);
		return output_raw(o, buf);
	}
	int ret = output_raw(o, "{\"type\":");

	ret = ret ? ret : output_json_string(o, name, strlen(name));
	snprintf(buf, sizeof(buf), ",\"data\":\"0x%" PRIx64 "\"}", data->u);
	return ret ? ret : output_raw(o, buf);
}

int govalue_append(struct usc_output *o, const struct usc_event *ev, unsigned i)
{
	const struct usc_fetcharg *a = &ev->site->args[i];
	const struct usc_value *v = &ev->vals[i];

	if (a->optimized_out)
		return output_raw(o, o->json ? "null" : "<optimized out>");
	switch (a->show) {
	case USC_SHOW_GO_STRING:
		if (i < 1)
			break;
		return put_string(o, &v[-1], v);
	case USC_SHOW_GO_SLICE:
		if (i < 2)
			break;
		return put_slice(o, a, &v[-2], &v[-1], v);
	case USC_SHOW_GO_IFACE:
		if (i < 2)
			break;
		return put_iface(o, ev, a, &v[-2], &v[-1], v);
	case USC_SHOW_GO_EFACE:
		if (i < 1)
			break;
		return put_iface(o, ev, a, &v[-1], &v[-1], v);
	default:
		break;
	}
	return output_raw(o, o->json ? "null" : "(fault)");
}
