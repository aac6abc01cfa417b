/* A Go program's ELF file, as src/objfile/ opens it: whether it is Go, which Go
 * built it, and a stripped one's functions from Go's function table
 * (.gopclntab). Called by src/objfile/file.c and symtab.c while they index the
 * file (objfile_open); the results are struct objfile's is_go and go_version,
 * and its syms. */
#ifndef USC_OBJFILE_GOFILE_H
#define USC_OBJFILE_GOFILE_H

#include <libelf.h>

struct objfile;
struct objfile_symvec;

/* Is ef a Go program? Sets ef->is_go from Go's build id note, the build
 * info (.go.buildinfo) or the function table's section, and
 * ef->go_version (gofile_version). 0 or -ENOMEM. */
int gofile_detect(struct objfile *ef, Elf *elf);

/* Which Go built ef ("go1.19.8" into ef->go_version, NULL when the build
 * info does not say): from .go.buildinfo, else, ef->is_go, searched for in
 * the writable segments as Go's debug/buildinfo does. Sets ef->is_go when
 * the section is there. 0 or -ENOMEM. */
int gofile_version(struct objfile *ef, Elf *elf);

/* Go's function table, kept for objfile_go_pclntab; with sv (not NULL),
 * the functions of a Go program whose .symtab has none (stripped), from
 * it, into sv. The table is found by its section (.gopclntab,
 * .data.rel.ro.gopclntab), else (a Go program, or no section headers)
 * searched for in the non-executable segments; taken only if its functions
 * are this file's code. Names are as Go's linker writes them in .symtab
 * ('·' as '.', the ABI0 one of two functions of a name NAME.abi0); flags
 * OBJFILE_SYM_GOPCLNTAB, and OBJFILE_SYM_GO_ABI0 for assembly. Sets ef->is_go when a table is found. 0 or -ENOMEM (a table
 * that does not read is logged and skipped). */
int gofile_load_funcs(struct objfile *ef, Elf *elf, struct objfile_symvec *sv);

#endif
