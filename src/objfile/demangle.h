/* C++ names: demangling (libiberty's cplus_demangle, as binutils and perf
 * use) and the spelling-insensitive comparison of demangled names. */
#ifndef USC_OBJFILE_DEMANGLE_H
#define USC_OBJFILE_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

/* Demangle an Itanium C++ ABI name ("_ZN2ns5Class6methodEi").
 *   *full: with its parameters and without a template's return type
 *          ("ns::Class::method(int)", "ns::foo<int>(int)",
 *          "ns::f(int) [clone .cold]");
 *   *qual: without its parameters, keeping a clone suffix
 *          ("ns::Class::method", "ns::f [clone .cold]").
 * Both malloc'd. Returns 0, -EINVAL (not a mangled name: both NULL) or
 * -ENOMEM. */
int demangle_name(const char *mangled, char **full, char **qual);

/* a and b spell the same C++ name: white space only counts between two
 * identifier characters ("f(char const *)" is "f(char const*)"; "a<b<c> >"
 * is "a<b<c>>"). */
bool demangle_same(const char *a, const char *b);

/* Copy s into out[len] with that white space folded away; truncates. */
void demangle_fold(const char *s, char *out, size_t len);

/* Does the text name a C++ entity a demangled name could match: it has a
 * "::" or a parameter list? */
bool demangle_is_cxx_query(const char *s);

#endif
