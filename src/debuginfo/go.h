/* Go's DWARF, for the DWARF front end (src/debuginfo/): what it does with Go's
 * values in several words and Go's results. The lowering state (struct debuginfo_lower,
 * struct debuginfo_lval) is the front end's (src/debuginfo/debuginfo_int.h). */
#ifndef USC_DEBUGINFO_GO_H
#define USC_DEBUGINFO_GO_H

#include <stdbool.h>
#include <stdint.h>

#include <elfutils/libdw.h>

struct debuginfo_lower;
struct debuginfo_lval;
struct usc_fetcharg;

enum go_comp { GO_NONE, GO_STRING, GO_SLICE, GO_IFACE, GO_EFACE };

/* Which of Go's values in several words the stripped type t is: Go's
 * compiler describes a string, a slice and an interface as structs of their
 * words ("string", "[]int", runtime.iface, runtime.eface), marked with
 * DW_AT_go_kind. */
enum go_comp go_dwarf_comp(Dwarf_Die *t);

/* The Go value lv (a string, slice or interface: kind) as its parts and the
 * argument that shows it (probe.h, USC_SHOW_GO_STRING...) into out[*n..max),
 * named NAME and NAME__PART; in a group (a struct's member) group_len and
 * group_first as expand gives them. 0 or -errno (c->err says why). */
int go_dwarf_value(struct debuginfo_lower *c, const struct debuginfo_lval *lv, enum go_comp kind,
		   const char *name, uint8_t group_len, bool group_first, struct usc_fetcharg *out,
		   unsigned max, unsigned *n);

/* Go lists a function's results among its formal parameters, marked
 * DW_AT_variable_parameter ("~r0", or their names): not set at the entry. */
bool go_dwarf_is_result(Dwarf_Die *die);

#endif
