/* Tests of C++ names (src/objfile/demangle.c and the demangled lookups of
 * src/objfile/symbols.c) and of inlined copies (src/debuginfo/inline.c), on fixtures
 * built at run time (tests/unit/fixtures/cxx/build.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "debuginfo/inline.h"
#include "objfile/demangle.h"
#include "objfile/objfile.h"
#include "fixture.h"

static char tmpdir[256];
static char fxdir[PATH_MAX + 64];

static char *fx(const char *name)
{
	static char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s/%s", tmpdir, name);
	return buf;
}

/* ---- demangling -------------------------------------------------------- */

static void check_demangle(const char *mangled, const char *full, const char *qual)
{
	char *f, *q;

	assert_int_equal(demangle_name(mangled, &f, &q), 0);
	assert_string_equal(f, full);
	assert_string_equal(q, qual);
	free(f);
	free(q);
}

static void test_demangle(void **state)
{
	char *f, *q, buf[64];

	(void)state;
	check_demangle("_ZN2ns5Class6methodEi", "ns::Class::method(int)", "ns::Class::method");
	/* a template's return type is dropped */
	check_demangle("_ZN2ns3fooIiEET_S1_", "ns::foo<int>(int)", "ns::foo<int>");
	check_demangle("_ZNK2ns5Class3getEv", "ns::Class::get() const", "ns::Class::get");
	/* a clone is its own function */
	check_demangle("_ZN2ns3fooEi.cold", "ns::foo(int) [clone .cold]", "ns::foo [clone .cold]");
	check_demangle("_ZN2nsplERKNS_1XES2_", "ns::operator+(ns::X const&, ns::X const&)",
		       "ns::operator+");
	assert_int_equal(demangle_name("main", &f, &q), -EINVAL);
	assert_null(f);
	assert_null(q);
	assert_int_equal(demangle_name("_Znotmangled", &f, &q), -EINVAL);

	/* white space counts between identifier characters only */
	assert_true(demangle_same("f(char const *, int)", "f(char const*, int)"));
	assert_true(demangle_same("a<b<c> >::f", "a<b<c>>::f"));
	assert_true(demangle_same(" f( int ) ", "f(int)"));
	assert_false(demangle_same("f(charconst*)", "f(char const*)"));
	assert_false(demangle_same("f(int)", "f(long)"));
	demangle_fold("std::vector<int,  std::allocator<int> >", buf, sizeof(buf));
	assert_string_equal(buf, "std::vector<int,std::allocator<int>>");
	demangle_fold("unsigned   long", buf, 6);
	assert_string_equal(buf, "unsig");
}

/* ---- lookups by demangled name ---------------------------------------- */

static const struct objfile_sym *lookup_ok(struct objfile *ef, const char *name)
{
	const struct objfile_sym *s = NULL;

	assert_int_equal(objfile_func_lookup(ef, name, &s, NULL, NULL), 0);
	assert_non_null(s);
	return s;
}

static void test_lookup(void **state)
{
	struct objfile *ef;
	const struct objfile_sym *s, *t, **c = NULL;
	size_t nc = 0;

	(void)state;
	assert_int_equal(objfile_open(fx("names"), &ef), 0);
	s = lookup_ok(ef, "ns::Box::put(int)");
	assert_string_equal(s->name, "_ZN2ns3Box3putEi");
	assert_string_equal(objfile_sym_pretty(s), "ns::Box::put(int)");
	assert_string_equal(s->qualname, "ns::Box::put");
	/* the mangled name, and the signature spelled with other spaces */
	t = lookup_ok(ef, "_ZN2ns3Box3putEi");
	assert_ptr_equal(s, t);
	t = lookup_ok(ef, "ns::Box::put( char const * , long )");
	assert_string_equal(t->demangled, "ns::Box::put(char const*, long)");
	/* overloads: ambiguous without a signature, with every candidate */
	assert_int_equal(objfile_func_lookup(ef, "ns::Box::put", &s, &c, &nc), -EEXIST);
	assert_int_equal(nc, 2);
	free(c);
	lookup_ok(ef, "ns::Box::get");
	lookup_ok(ef, "ns::Box::get() const");
	lookup_ok(ef, "ns::twice<long>");
	lookup_ok(ef, "ns::twice<int>(int)");
	lookup_ok(ef, "(anonymous namespace)::hidden(int)");
	assert_int_equal(objfile_func_lookup(ef, "ns::Box::put(long)", &s, NULL, NULL), -ENOENT);
	assert_int_equal(objfile_func_lookup(ef, "ns::Box", &s, NULL, NULL), -ENOENT);
	/* a C name is unchanged */
	s = lookup_ok(ef, "main");
	assert_null(s->demangled);
	assert_string_equal(objfile_sym_pretty(s), "main");
	objfile_close(ef);
}

static void test_match_and_suggest(void **state)
{
	struct objfile *ef;
	const struct objfile_sym **m = NULL;
	const char *sugg[4];
	size_t n;

	(void)state;
	assert_int_equal(objfile_open(fx("names"), &ef), 0);
	assert_int_equal(objfile_func_match(ef, "ns::Box::put*", &m), 2);
	free(m);
	assert_int_equal(objfile_func_match(ef, "ns::twice<*", &m), 2);
	free(m);
	assert_int_equal(objfile_func_match(ef, "ns::*(int)", &m), 2);	/* put(int), twice<int> */
	free(m);
	assert_int_equal(objfile_func_match(ef, "*put(char const *, *)", &m), 1);
	free(m);
	assert_int_equal(objfile_func_match(ef, "_ZN2ns3Box3put*", &m), 2);	/* mangled */
	free(m);
	assert_true(objfile_sym_match_cxx(objfile_func_at(ef, 0) ? objfile_func_at(ef, 0) : &ef->syms[0],
				      "zzz") == false);

	/* the overloads first, by their signatures */
	n = objfile_func_suggest(ef, "ns::Box::pat", sugg, 4);
	assert_true(n >= 2);
	for (size_t i = 0; i < 2; i++)
		assert_true(!strcmp(sugg[i], "ns::Box::put(int)") ||
			    !strcmp(sugg[i], "ns::Box::put(char const*, long)"));
	assert_string_not_equal(sugg[0], sugg[1]);
	n = objfile_func_suggest(ef, "ns::twice<lng>", sugg, 1);
	assert_int_equal(n, 1);
	assert_string_equal(sugg[0], "ns::twice<long>(long)");
	objfile_close(ef);
}

/* ---- inlined copies ---------------------------------------------------- */

static void test_inline_sites(void **state)
{
	struct objfile *ef;
	struct debuginfo *dm;
	struct debuginfo_inline_site *is = NULL;
	const struct objfile_sym *scale, *a, *b;
	ssize_t n;

	(void)state;
	assert_int_equal(objfile_open(fx("inl"), &ef), 0);
	assert_int_equal(debuginfo_open(fx("inl"), NULL, &dm), 0);
	scale = lookup_ok(ef, "scale");
	a = lookup_ok(ef, "step_a");
	b = lookup_ok(ef, "step_b");

	/* scale: inlined into step_a and step_b, in address order */
	n = debuginfo_inline_sites(dm, scale->vaddr, "scale", &is);
	assert_int_equal(n, 2);
	assert_ptr_equal(objfile_func_at(ef, is[0].pc), a->vaddr < b->vaddr ? a : b);
	assert_ptr_equal(objfile_func_at(ef, is[1].pc), a->vaddr < b->vaddr ? b : a);
	assert_true(is[0].pc < is[1].pc);
	assert_non_null(is[0].call_file);
	assert_non_null(strstr(is[0].call_file, "inl.c"));
	assert_true(is[0].call_line > 0);
	free(is);

	/* tick: no out-of-line copy, found by name */
	assert_int_equal(objfile_func_lookup(ef, "tick", &a, NULL, NULL), -ENOENT);
	n = debuginfo_inline_sites(dm, 0, "tick", &is);
	assert_int_equal(n, 2);
	free(is);

	/* a function never inlined has none; a name nobody has, none */
	n = debuginfo_inline_sites(dm, lookup_ok(ef, "step_a")->vaddr, "step_a", &is);
	assert_int_equal(n, 0);
	free(is);
	n = debuginfo_inline_sites(dm, 0, "no_such_function", &is);
	assert_int_equal(n, 0);
	free(is);
	/* an address that is no function's entry */
	assert_int_equal(debuginfo_inline_sites(dm, scale->vaddr + 1, "scale", &is), -ENOENT);
	debuginfo_close(dm);
	objfile_close(ef);
}

/* ---- setup ------------------------------------------------------------ */

static int group_setup(void **state)
{
	(void)state;
	return fixture_build("cxx", fxdir, sizeof(fxdir), tmpdir, sizeof(tmpdir)) ? -1 : 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return fixture_remove(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_match_and_suggest),
		cmocka_unit_test(test_inline_sites),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
