/* Small helpers on DIEs that every pass uses (the DWARF front end's
 * "dwarf-aux"): a DIE's name and type, a type stripped of its typedefs and
 * qualifiers, what kind of type it is; and the names an error message
 * lists as the ones that were visible. */
#include <dwarf.h>
#include <stdio.h>
#include <string.h>

#include "debuginfo/debuginfo_int.h"

const char *debuginfo_die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;

	if (!dwarf_attr_integrate(die, DW_AT_name, &a))
		return NULL;
	return dwarf_formstring(&a);
}

bool debuginfo_die_type(Dwarf_Die *die, Dwarf_Die *type)
{
	Dwarf_Attribute a;

	return dwarf_attr_integrate(die, DW_AT_type, &a) && dwarf_formref_die(&a, type);
}

bool debuginfo_strip_type(Dwarf_Die *t)
{
	for (int i = 0; i < 64; i++) {
		switch (dwarf_tag(t)) {
		case DW_TAG_typedef:
		case DW_TAG_const_type:
		case DW_TAG_volatile_type:
		case DW_TAG_restrict_type:
		case DW_TAG_atomic_type:
			if (!debuginfo_die_type(t, t))
				return false;
			break;
		default:
			return true;
		}
	}
	return false;
}

bool debuginfo_is_char(Dwarf_Die *t)
{
	Dwarf_Attribute a;
	Dwarf_Word enc;

	if (dwarf_tag(t) != DW_TAG_base_type || dwarf_bytesize(t) != 1)
		return false;
	if (!dwarf_attr(t, DW_AT_encoding, &a) || dwarf_formudata(&a, &enc))
		return false;
	return enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char;
}

bool debuginfo_is_aggregate(int tag)
{
	return tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
	       tag == DW_TAG_class_type;
}

void debuginfo_names_add(struct debuginfo_names *nm, const char *name)
{
	size_t l = strlen(nm->buf);

	if (nm->n >= 8)
		return;
	for (const char *p = nm->buf; (p = strstr(p, name)); p++)
		if ((p == nm->buf || p[-1] == ' ') && (p[strlen(name)] == ',' || !p[strlen(name)]))
			return;		/* shadowed or repeated */
	snprintf(nm->buf + l, sizeof(nm->buf) - l, "%s%s", l ? ", " : "", name);
	nm->n++;
}
