/* Go values printed as Go prints them (src/go/govalue.c): a string, a
 * slice, an interface and an any, each as its parts then the argument that
 * shows it, in text and JSON; cut, nil, empty and faulted values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "probe/event.h"
#include "output/output.h"
#include "probe/probe.h"

static struct usc_probe_spec spec;

static struct usc_fetcharg arg(const char *name, enum usc_type t, uint8_t show, uint8_t parts)
{
	struct usc_fetcharg a = {.type = t, .show = show, .go_parts = parts, .named = true};

	snprintf(a.name, sizeof(a.name), "%s", name);
	a.insn[0] = (struct fetch_insn){.op = FOP_REG};
	a.insn[1] = (struct fetch_insn){.op = FOP_ST_RAW, .size = 8};
	a.insn[2] = (struct fetch_insn){.op = FOP_END};
	a.ninsn = 3;
	return a;
}

/* a Go value's bytes part: FOP_ST_BYTES of elements of size esz */
static struct usc_fetcharg bytes(const char *name, uint8_t show, uint8_t parts, unsigned esz,
				 uint8_t elem)
{
	struct usc_fetcharg a = arg(name, USC_T_STRING, show, parts);

	a.insn[1] = (struct fetch_insn){.op = FOP_ST_BYTES, .size = (uint8_t)esz,
					.imm = esz * USC_GO_ELEMS};
	a.go_elem = elem;
	return a;
}

#define INT(x) {.kind = USC_V_INT, .u = (uint64_t)(x)}
#define STR(s, n) {.kind = USC_V_STR, .str = (s), .len = (n)}

static void expect(const struct usc_fetcharg *args, unsigned n, const struct usc_value *vals,
		   const char *text, const char *json)
{
	struct usc_site site = {.spec = &spec, .event = "ev", .label = "ev",
				.args = (struct usc_fetcharg *)args, .nargs = n};
	struct usc_event ev = {.comm = "c", .site = &site, .ip = 0x10, .nvals = n, .vals = vals};
	struct usc_output o = {0};

	assert_int_equal(output_event_args(&o, &ev), 0);
	assert_string_equal(o.buf, text);
	output_free(&o);
	o.json = true;
	assert_int_equal(output_event_args(&o, &ev), 0);
	assert_string_equal(o.buf, json);
	output_free(&o);
}

static void test_string(void **state)
{
	(void)state;
	struct usc_fetcharg a[] = {
		arg("key__len", USC_T_U64, USC_SHOW_GO_PART, 0),
		bytes("key", USC_SHOW_GO_STRING, 1, 1, 0),
		arg("n", USC_T_S64, USC_SHOW_PLAIN, 0),
	};
	a[1].go_type = "string";
	/* the bytes beyond the length (tracefs reads a fixed array) are not its */
	const struct usc_value v[] = {INT(8), STR("deploy-1xyz", 11), INT(-3)};

	expect(a, 3, v, " key=\"deploy-1\" n=-3", "{\"key\":\"deploy-1\",\"n\":-3}");
	/* cut at what was read: the rest marked outside the quotes */
	const struct usc_value cut[] = {INT(100), STR("a\"b\n", 4), INT(0)};

	expect(a, 3, cut, " key=\"a\\\"b\\n\"... n=0", "{\"key\":\"a\\\"b\\n\",\"n\":0}");
	/* empty: a NULL pointer with no bytes is "" */
	const struct usc_value empty[] = {INT(0), {.kind = USC_V_NULL}, INT(1)};

	expect(a, 3, empty, " key=\"\" n=1", "{\"key\":\"\",\"n\":1}");
	const struct usc_value fault[] = {INT(5), {.kind = USC_V_FAULT}, INT(1)};

	expect(a, 3, fault, " key=(fault) n=1", "{\"key\":null,\"n\":1}");
}

static void test_slice(void **state)
{
	(void)state;
	struct usc_fetcharg a[] = {
		arg("xs__cap", USC_T_U64, USC_SHOW_GO_PART, 0),
		arg("xs__len", USC_T_U64, USC_SHOW_GO_PART, 0),
		bytes("xs", USC_SHOW_GO_SLICE, 2, 8, 1 + USC_T_S64),
	};
	int64_t e[4] = {1, -4, 9, 16};

	a[2].go_type = "[]int";
	const struct usc_value v3[] = {INT(4), INT(3), STR((const char *)e, 24)};

	expect(a, 3, v3, " xs=[]int{len=3 cap=4: 1, -4, 9}", "{\"xs\":[1,-4,9]}");
	/* longer than what is fetched */
	const struct usc_value v9[] = {INT(9), INT(9), STR((const char *)e, 32)};

	expect(a, 3, v9, " xs=[]int{len=9 cap=9: 1, -4, 9, 16, ...}", "{\"xs\":[1,-4,9,16]}");
	const struct usc_value nil[] = {INT(0), INT(0), {.kind = USC_V_NULL}};

	expect(a, 3, nil, " xs=[]int{len=0 cap=0}", "{\"xs\":[]}");

	/* bools, and elements uscope does not fetch (strings) */
	struct usc_fetcharg b[] = {
		arg("bs__cap", USC_T_U64, USC_SHOW_GO_PART, 0),
		arg("bs__len", USC_T_U64, USC_SHOW_GO_PART, 0),
		bytes("bs", USC_SHOW_GO_SLICE, 2, 1, 1 + USC_T_U8),
		arg("ss__cap", USC_T_U64, USC_SHOW_GO_PART, 0),
		arg("ss__len", USC_T_U64, USC_SHOW_GO_PART, 0),
		arg("ss", USC_T_X64, USC_SHOW_GO_SLICE, 2),
	};
	b[2].go_type = "[]bool";
	b[2].go_elem_bool = true;
	b[5].go_type = "[]string";
	const struct usc_value vb[] = {INT(2), INT(2), STR("\1\0", 2), INT(3), INT(2), INT(0x1000)};

	expect(b, 6, vb, " bs=[]bool{len=2 cap=2: true, false} ss=[]string{len=2 cap=3}",
	       "{\"bs\":[true,false],\"ss\":null}");
}

static void test_interfaces(void **state)
{
	(void)state;
	struct usc_fetcharg a[] = {
		arg("err__tab", USC_T_X64, USC_SHOW_GO_PART, 0),
		arg("err__type", USC_T_X64, USC_SHOW_GO_PART, 0),
		arg("err", USC_T_X64, USC_SHOW_GO_IFACE, 2),
		arg("v__type", USC_T_X64, USC_SHOW_GO_PART, 0),
		arg("v", USC_T_X64, USC_SHOW_GO_EFACE, 1),
	};
	a[2].go_type = "error";
	a[4].go_type = "interface {}";
	/* no cache to name the type from the binary: its address */
	const struct usc_value v[] = {INT(0x4ba848), INT(0x4a2f00), INT(0xc000012345),
				      INT(0x49e0a0), INT(0xc000012350)};

	expect(a, 5, v, " err=(type 0x4a2f00)(0xc000012345) v=(type 0x49e0a0)(0xc000012350)",
	       "{\"err\":{\"type\":\"(type 0x4a2f00)\",\"data\":\"0xc000012345\"},"
	       "\"v\":{\"type\":\"(type 0x49e0a0)\",\"data\":\"0xc000012350\"}}");
	/* nil: no itab, no type */
	const struct usc_value nil[] = {INT(0), {.kind = USC_V_FAULT}, INT(0), INT(0), INT(0)};

	expect(a, 5, nil, " err=nil v=nil", "{\"err\":null,\"v\":null}");
}

/* a Go value as a struct's member: the group opens on its first part */
static void test_member_of_a_struct(void **state)
{
	(void)state;
	struct usc_fetcharg a[] = {
		arg("p__name__len", USC_T_U64, USC_SHOW_GO_PART, 0),
		bytes("p__name", USC_SHOW_GO_STRING, 1, 1, 0),
		arg("p__syncs", USC_T_S64, USC_SHOW_PLAIN, 0),
	};
	for (int i = 0; i < 3; i++)
		a[i].group_len = 1;
	a[0].group_first = true;
	const struct usc_value v[] = {INT(3), STR("ctl", 3), INT(2)};

	expect(a, 3, v, " p={name=\"ctl\" syncs=2}", "{\"p\":{\"name\":\"ctl\",\"syncs\":2}}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_slice),
		cmocka_unit_test(test_interfaces),
		cmocka_unit_test(test_member_of_a_struct),
	};

	return cmocka_run_group_tests_name("govalue", tests, NULL, NULL);
}
