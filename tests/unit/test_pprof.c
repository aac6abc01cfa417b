/* Unit tests for the pprof writer (src/pprof/): the protobuf encoding byte
 * for byte, then a profile decoded back by a small independent decoder of
 * profile.proto (here), and its gzip read back with zlib. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "pprof/pprof.h"

static void expect(const struct pb *b, const uint8_t *want, size_t n)
{
	assert_int_equal(b->err, 0);
	assert_int_equal(b->len, n);
	assert_memory_equal(b->buf, want, n);
}

static void test_encoding(void **state)
{
	struct pb b = {0}, sub = {0};
	uint8_t v[10];
	const uint64_t packed[] = {3, 270, 86942};

	(void)state;
	/* varints as the protobuf documentation gives them */
	assert_int_equal(pb_put_varint(v, 1), 1);
	assert_int_equal(v[0], 1);
	assert_int_equal(pb_put_varint(v, 300), 2);
	assert_memory_equal(v, "\xac\x02", 2);
	assert_int_equal(pb_put_varint(v, UINT64_MAX), 10);
	assert_memory_equal(v, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
	/* -1 as an int64: ten bytes, two's complement */
	pb_varint(&b, 1, (uint64_t)-1);
	expect(&b, (const uint8_t *)"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
	pb_reset(&b);
	pb_varint(&b, 1, 150);
	expect(&b, (const uint8_t *)"\x08\x96\x01", 3);
	pb_reset(&b);
	pb_bytes(&b, 2, "testing", 7);
	expect(&b, (const uint8_t *)"\x12\x07testing", 9);
	pb_reset(&b);
	pb_packed(&b, 4, packed, 3);
	expect(&b, (const uint8_t *)"\x22\x06\x03\x8e\x02\x9e\xa7\x05", 8);
	pb_reset(&b);
	pb_packed(&b, 4, packed, 0);	/* nothing */
	assert_int_equal(b.len, 0);
	pb_varint(&sub, 1, 150);
	pb_message(&b, 3, &sub);
	expect(&b, (const uint8_t *)"\x1a\x03\x08\x96\x01", 5);
	/* a field number past 15: a two-byte key */
	pb_reset(&b);
	pb_varint(&b, 16, 1);
	expect(&b, (const uint8_t *)"\x80\x01\x01", 3);
	pb_free(&b);
	pb_free(&sub);
}

/* ---- a decoder of profile.proto, for the test ------------------------------------ */

struct field {
	uint32_t num;
	unsigned wire;
	uint64_t v;		/* a varint */
	const uint8_t *p;	/* length-delimited */
	size_t len;
};

static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *p < end; shift += 7) {
		uint8_t c = *(*p)++;

		assert_true(shift < 64);
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	fail_msg("truncated varint");
	return 0;
}

/* The next field of [*p, end); false at the end. */
static bool next(const uint8_t **p, const uint8_t *end, struct field *f)
{
	uint64_t k;

	if (*p >= end)
		return false;
	k = varint(p, end);
	f->num = (uint32_t)(k >> 3);
	f->wire = k & 7;
	if (f->wire == 0) {
		f->v = varint(p, end);
	} else {
		assert_int_equal(f->wire, 2);
		f->len = varint(p, end);
		assert_true(f->len <= (size_t)(end - *p));
		f->p = *p;
		*p += f->len;
	}
	return true;
}

/* The packed varints of f into v (max); how many. */
static size_t unpack(const struct field *f, uint64_t *v, size_t max)
{
	const uint8_t *p = f->p, *end = f->p + f->len;
	size_t n = 0;

	while (p < end && n < max)
		v[n++] = varint(&p, end);
	return n;
}

/* A message's varint field num (0 when absent). */
static uint64_t get(const uint8_t *m, size_t len, uint32_t num)
{
	const uint8_t *p = m;
	struct field f;
	uint64_t v = 0;

	while (next(&p, m + len, &f))
		if (f.num == num && f.wire == 0)
			v = f.v;
	return v;
}

struct decoded {
	char *str[64];
	size_t nstr;
	struct field sample[16], mapping[8], location[16], function[16], type[4];
	size_t nsample, nmapping, nlocation, nfunction, ntype;
};

static void decode(const uint8_t *b, size_t len, struct decoded *d)
{
	const uint8_t *p = b;
	struct field f;

	memset(d, 0, sizeof(*d));
	while (next(&p, b + len, &f)) {
		switch (f.num) {
		case 1: d->type[d->ntype++] = f; break;
		case 2: d->sample[d->nsample++] = f; break;
		case 3: d->mapping[d->nmapping++] = f; break;
		case 4: d->location[d->nlocation++] = f; break;
		case 5: d->function[d->nfunction++] = f; break;
		case 6: d->str[d->nstr++] = strndup((const char *)f.p, f.len); break;
		default: break;
		}
	}
}

static const char *str(const struct decoded *d, uint64_t i)
{
	assert_true(i < d->nstr);
	return d->str[i];
}

static void test_profile(void **state)
{
	static const char *const type[] = {"calls", "wall"}, *const unit[] = {"count",
									   "nanoseconds"};
	struct pprof *p = pprof_new(type, unit, 2);
	struct decoded d;
	uint64_t m, leaf_fn, inl_fn, main_fn, l1, l2, l3, v[8];
	uint8_t *raw;
	size_t len, n;

	(void)state;
	assert_non_null(p);
	m = pprof_mapping(p, 0x1000, 0x2000, 0x400, "/bin/app", "abcd");
	assert_int_equal(m, 1);
	assert_int_equal(pprof_mapping(p, 0x1000, 0x2000, 0x400, "/bin/app", "abcd"), 1);
	leaf_fn = pprof_function(p, "leaf", "a.c");
	inl_fn = pprof_function(p, "inl", "b.h");
	main_fn = pprof_function(p, "main", "a.c");
	assert_int_equal(pprof_function(p, "leaf", "a.c"), leaf_fn);
	assert_int_equal(main_fn, 3);
	l1 = pprof_location(p, m, 0x1100, (const struct pprof_line[]){{leaf_fn, 10}}, 1);
	/* inlined: one location, its lines innermost first */
	l2 = pprof_location(p, m, 0x1200,
			    (const struct pprof_line[]){{inl_fn, 5}, {main_fn, 20}}, 2);
	assert_int_equal(pprof_location(p, m, 0x1100, NULL, 0), l1);
	/* no address: a location per function */
	l3 = pprof_location(p, 0, 0, (const struct pprof_line[]){{leaf_fn, 0}}, 1);
	assert_int_not_equal(l3, l1);
	assert_int_equal(pprof_sample(p, (const uint64_t[]){l1, l2}, 2, (const int64_t[]){7, 700},
				      (const struct pprof_label[]){{"size", "big", 0},
								   {"n", NULL, -3}}, 2), 0);
	assert_int_equal(pprof_sample(p, (const uint64_t[]){l3}, 1, (const int64_t[]){1, 0}, NULL, 0),
			 0);
	assert_int_equal(pprof_encode(p, &raw, &len), 0);
	decode(raw, len, &d);

	assert_string_equal(d.str[0], "");
	assert_int_equal(d.ntype, 2);
	assert_string_equal(str(&d, get(d.type[0].p, d.type[0].len, 1)), "calls");
	assert_string_equal(str(&d, get(d.type[1].p, d.type[1].len, 2)), "nanoseconds");
	/* the mapping */
	assert_int_equal(d.nmapping, 1);
	assert_int_equal(get(d.mapping[0].p, d.mapping[0].len, 1), 1);
	assert_int_equal(get(d.mapping[0].p, d.mapping[0].len, 2), 0x1000);
	assert_int_equal(get(d.mapping[0].p, d.mapping[0].len, 3), 0x2000);
	assert_int_equal(get(d.mapping[0].p, d.mapping[0].len, 4), 0x400);
	assert_string_equal(str(&d, get(d.mapping[0].p, d.mapping[0].len, 5)), "/bin/app");
	assert_string_equal(str(&d, get(d.mapping[0].p, d.mapping[0].len, 6)), "abcd");
	for (uint32_t f = 7; f <= 10; f++)
		assert_int_equal(get(d.mapping[0].p, d.mapping[0].len, f), 1);
	/* functions: id, name, file */
	assert_int_equal(d.nfunction, 3);
	assert_int_equal(get(d.function[1].p, d.function[1].len, 1), inl_fn);
	assert_string_equal(str(&d, get(d.function[1].p, d.function[1].len, 2)), "inl");
	assert_string_equal(str(&d, get(d.function[1].p, d.function[1].len, 4)), "b.h");
	/* location 2: two lines, inl:5 then main:20 */
	assert_int_equal(d.nlocation, 3);
	{
		const uint8_t *q = d.location[1].p;
		struct field f;
		uint64_t lines[2][2];
		size_t nl = 0;

		assert_int_equal(get(q, d.location[1].len, 1), l2);
		assert_int_equal(get(q, d.location[1].len, 2), m);
		assert_int_equal(get(q, d.location[1].len, 3), 0x1200);
		while (next(&q, d.location[1].p + d.location[1].len, &f))
			if (f.num == 4) {
				assert_true(nl < 2);
				lines[nl][0] = get(f.p, f.len, 1);
				lines[nl++][1] = get(f.p, f.len, 2);
			}
		assert_int_equal(nl, 2);
		assert_int_equal(lines[0][0], inl_fn);
		assert_int_equal(lines[0][1], 5);
		assert_int_equal(lines[1][0], main_fn);
		assert_int_equal(lines[1][1], 20);
		/* location 3 has no mapping and no address */
		assert_int_equal(get(d.location[2].p, d.location[2].len, 2), 0);
		assert_int_equal(get(d.location[2].p, d.location[2].len, 3), 0);
	}
	/* sample 1: locations leaf first, values, labels */
	assert_int_equal(d.nsample, 2);
	{
		const uint8_t *q = d.sample[0].p;
		struct field f;
		size_t nlabels = 0;

		while (next(&q, d.sample[0].p + d.sample[0].len, &f)) {
			if (f.num == 1) {
				n = unpack(&f, v, 8);
				assert_int_equal(n, 2);
				assert_int_equal(v[0], l1);
				assert_int_equal(v[1], l2);
			} else if (f.num == 2) {
				n = unpack(&f, v, 8);
				assert_int_equal(n, 2);
				assert_int_equal(v[0], 7);
				assert_int_equal(v[1], 700);
			} else if (f.num == 3 && nlabels++ == 0) {
				assert_string_equal(str(&d, get(f.p, f.len, 1)), "size");
				assert_string_equal(str(&d, get(f.p, f.len, 2)), "big");
			} else if (f.num == 3) {
				assert_string_equal(str(&d, get(f.p, f.len, 1)), "n");
				assert_int_equal((int64_t)get(f.p, f.len, 3), -3);
			}
		}
		assert_int_equal(nlabels, 2);
	}
	for (size_t i = 0; i < d.nstr; i++)
		free(d.str[i]);

	/* gzipped: the same bytes once inflated */
	{
		FILE *f = tmpfile();
		uint8_t gz[4096], back[4096];
		size_t gzlen;
		z_stream z = {0};

		assert_non_null(f);
		assert_int_equal(pprof_write(p, f), 0);
		rewind(f);
		gzlen = fread(gz, 1, sizeof(gz), f);
		fclose(f);
		assert_true(gzlen > 18);
		assert_int_equal(gz[0], 0x1f);
		assert_int_equal(gz[1], 0x8b);
		assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
		z.next_in = gz;
		z.avail_in = (uInt)gzlen;
		z.next_out = back;
		z.avail_out = sizeof(back);
		assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
		assert_int_equal(z.total_out, len);
		assert_memory_equal(back, raw, len);
		inflateEnd(&z);
	}
	free(raw);
	pprof_free(p);
}

/* Many strings, functions and locations: the tables grow and still find
 * every one. */
static void test_growth(void **state)
{
	static const char *const type[] = {"calls"}, *const unit[] = {"count"};
	struct pprof *p = pprof_new(type, unit, 1);
	char name[32];

	(void)state;
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(pprof_function(p, name, "x.c"), (uint64_t)i + 1);
		assert_int_equal(pprof_location(p, 1, 0x1000 + (uint64_t)i,
						(const struct pprof_line[]){{(uint64_t)i + 1, i}}, 1),
				 (uint64_t)i + 1);
	}
	for (int i = 0; i < 5000; i += 7) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_int_equal(pprof_function(p, name, "x.c"), (uint64_t)i + 1);
		assert_int_equal(pprof_location(p, 1, 0x1000 + (uint64_t)i, NULL, 0), (uint64_t)i + 1);
	}
	pprof_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encoding),
		cmocka_unit_test(test_profile),
		cmocka_unit_test(test_growth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
