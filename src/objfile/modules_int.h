/* Private to the module finders: what modules.c (the host's files) and
 * procroot.c (files under another root) share. */
#ifndef USC_OBJFILE_MODULES_INT_H
#define USC_OBJFILE_MODULES_INT_H

#include <stdbool.h>
#include <stddef.h>

/* Where ld.so looks last (the default library directories). */
extern const char *const module_default_dirs[];
extern const size_t module_ndefault_dirs;

/* An x86-64 ELF file (executable or shared object)? */
bool module_is_x86_64_elf(const char *path);

/* A mapped file that has no path any more: a memfd, or a deleted file. */
bool module_pathless(const char *p);

#endif
