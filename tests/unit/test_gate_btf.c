/* Unit tests for src/engine/inject/gate_btf.c: the two offsets the inject
 * engine's gate reads (task_struct's signal, signal_struct's tty) found by
 * its own pass over a BTF image: in this kernel's BTF, against what libbpf
 * finds there; in a BTF built here, where the member sits in an anonymous
 * union's anonymous struct, or is not a pointer, or is missing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/btf.h>

#include "engine/inject/inject_int.h"

/* The byte offset of member `m` of struct `s` as libbpf reads it, direct
 * members only (as they are in this kernel). */
static long libbpf_off(struct btf *b, const char *s, const char *m)
{
	int id = btf__find_by_name_kind(b, s, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(b, id) : NULL;

	for (int i = 0; t && i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(b, btf_members(t)[i].name_off), m))
			return btf_member_bit_offset(t, i) / 8;
	return -1;
}

static void test_this_kernel(void **state)
{
	uint32_t sig = 0, tty = 0;
	struct btf *b;

	(void)state;
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		skip();
	b = btf__load_vmlinux_btf();
	assert_non_null(b);
	assert_int_equal(inj_gate_btf_offsets(&sig, &tty), 0);
	assert_int_equal(sig, libbpf_off(b, "task_struct", "signal"));
	assert_int_equal(tty, libbpf_off(b, "signal_struct", "tty"));
	btf__free(b);
}

/* struct signal_struct { long a, b; void *tty; };
 * struct task_struct { int pad; union { long u; struct { long x; struct
 * signal_struct *signal; }; }; } (tty_ptr false: tty is a long) */
static struct btf *made(bool tty_ptr, bool with_signal)
{
	struct btf *b = btf__new_empty();
	int lng, vd, vp, ss, ssp, anon_s, anon_u, integer;

	assert_non_null(b);
	integer = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	lng = btf__add_int(b, "long", 8, BTF_INT_SIGNED);
	vd = btf__add_fwd(b, "tty_struct", BTF_FWD_STRUCT);
	vp = btf__add_ptr(b, vd);
	ss = btf__add_struct(b, "signal_struct", 24);
	btf__add_field(b, "a", lng, 0, 0);
	btf__add_field(b, "b", lng, 64, 0);
	btf__add_field(b, "tty", tty_ptr ? vp : lng, 128, 0);
	ssp = btf__add_ptr(b, ss);
	anon_s = btf__add_struct(b, NULL, 16);
	btf__add_field(b, "x", lng, 0, 0);
	btf__add_field(b, with_signal ? "signal" : "other", ssp, 64, 0);
	anon_u = btf__add_union(b, NULL, 16);
	btf__add_field(b, "u", lng, 0, 0);
	btf__add_field(b, NULL, anon_s, 0, 0);
	btf__add_struct(b, "task_struct", 24);
	btf__add_field(b, "pad", integer, 0, 0);
	assert_int_equal(btf__add_field(b, NULL, anon_u, 64, 0), 0);
	return b;
}

static int scan(struct btf *b, uint32_t *sig, uint32_t *tty)
{
	uint32_t len;
	const void *raw = btf__raw_data(b, &len);

	assert_non_null(raw);
	return inj_gate_btf_scan(raw, len, sig, tty);
}

static void test_anonymous_members(void **state)
{
	struct btf *b = made(true, true);
	uint32_t sig = 0, tty = 0;

	(void)state;
	assert_int_equal(scan(b, &sig, &tty), 0);
	assert_int_equal(sig, 8 + 8);	/* the union at 8, signal 8 into it */
	assert_int_equal(tty, 16);
	btf__free(b);
}

static void test_not_a_pointer_or_missing(void **state)
{
	struct btf *b = made(false, true);
	uint32_t sig = 0, tty = 0;
	char junk[64] = {0};

	(void)state;
	assert_int_equal(scan(b, &sig, &tty), -ENOENT);
	btf__free(b);
	b = made(true, false);
	assert_int_equal(scan(b, &sig, &tty), -ENOENT);
	btf__free(b);
	assert_int_equal(inj_gate_btf_scan(junk, sizeof(junk), &sig, &tty), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_this_kernel),
		cmocka_unit_test(test_anonymous_members),
		cmocka_unit_test(test_not_a_pointer_or_missing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
