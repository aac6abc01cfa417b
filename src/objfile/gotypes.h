/* Go's runtime type descriptors, read from a Go binary: the name of a
 * runtime._type (an interface's dynamic type), and which Go built it. */
#ifndef USC_OBJFILE_GOTYPES_H
#define USC_OBJFILE_GOTYPES_H

#include <stddef.h>
#include <stdint.h>

struct objfile;

/* The minor version of the Go that built ef (19 for "go1.19.8"), from its
 * build info; -1 when unknown. */
int gotypes_minor(const struct objfile *ef);

/* The name of the runtime._type at link-time address type_vaddr
 * ("*errors.errorString", "main.Celsius"), as Go's reflect names it: the
 * _type's str, an offset into the module's types (runtime.types, or for a
 * stripped binary the types field of runtime.firstmoduledata, found through
 * its pointer to .gopclntab). 0, or -ENOENT (no such type in the file),
 * -EINVAL (a name that does not read back). */
int gotypes_name(struct objfile *ef, uint64_t type_vaddr, char *buf, size_t len);

#endif
