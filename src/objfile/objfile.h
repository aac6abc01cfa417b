/* ELF files: symbols, segments, file offsets (libelf).
 *
 * File offsets come from the PT_LOAD program header that holds an address:
 *   file_off = vaddr - p_vaddr + p_offset
 * so they are right with section headers stripped, for PIE and non-PIE
 * executables and shared libraries alike. */
#ifndef USC_OBJFILE_OBJFILE_H
#define USC_OBJFILE_OBJFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct objfile_seg {
	uint64_t vaddr, memsz, offset, filesz;
	uint32_t flags;		/* PF_X | PF_W | PF_R */
};

enum objfile_sym_flags {
	OBJFILE_SYM_IFUNC = 1 << 0,	/* STT_GNU_IFUNC: the symbol is the resolver */
	OBJFILE_SYM_WEAK = 1 << 1,
	OBJFILE_SYM_LOCAL = 1 << 2,
	OBJFILE_SYM_DYNSYM = 1 << 3,	/* seen in .dynsym */
	OBJFILE_SYM_SYMTAB = 1 << 4,	/* seen in .symtab */
	OBJFILE_SYM_DEFAULT_VER = 1 << 5,	/* name@@VER (the default version) */
	OBJFILE_SYM_HIDDEN_VER = 1 << 6,	/* name@VER, not the default */
	OBJFILE_SYM_GOPCLNTAB = 1 << 7,	/* from Go's .gopclntab (the file's .symtab has
					   no functions): size = the code Go's linker
					   laid out for it */
	OBJFILE_SYM_GO_ABI0 = 1 << 8,	/* a Go function in assembly: Go's stack ABI0
					   (.gopclntab's funcFlag_ASM, or .symtab's
					   NAME.abi0), not the register ABIInternal */
};

/* A defined function symbol (STT_FUNC or STT_GNU_IFUNC, st_shndx != UNDEF).
 * One entry per distinct (name, version, address): a name present in both
 * .dynsym and .symtab at the same address is one entry with both flags. */
struct objfile_sym {
	const char *name;	/* without the version */
	const char *version;	/* NULL when unversioned */
	uint64_t vaddr;		/* link-time virtual address (st_value) */
	uint64_t size;
	unsigned flags;		/* enum objfile_sym_flags */
	/* C++ (an Itanium-mangled name), else both NULL: */
	const char *demangled;	/* "ns::Class::method(int)", "ns::f(int) [clone .cold]" */
	const char *qualname;	/* "ns::Class::method", "ns::f [clone .cold]" */
};

/* The name to show a person: demangled, with parameters, for C++. */
static inline const char *objfile_sym_pretty(const struct objfile_sym *s)
{
	return s->demangled ? s->demangled : s->name;
}

struct objfile {
	char *path;
	bool is_dyn;		/* ET_DYN (PIE or shared library) */
	bool is_exec_type;	/* ET_EXEC */
	char *soname;		/* DT_SONAME or NULL */
	char **needed;		/* DT_NEEDED, nneeded entries */
	size_t nneeded;
	char *runpath;		/* DT_RUNPATH or NULL */
	char *rpath;		/* DT_RPATH or NULL */
	char *interp;		/* PT_INTERP or NULL */
	struct objfile_seg *segs;	/* PT_LOAD only, in file order */
	size_t nsegs;
	struct objfile_sym *syms;	/* functions, sorted by name then address */
	size_t nsyms;
	/* A Go program: it has Go's build id note, its build info
	 * (.go.buildinfo) or its function table (.gopclntab). */
	bool is_go;
	char *go_version;	/* "go1.19.8" when the build info says, else NULL */
	/* private */
	void *priv;
};

/* Open and index an ELF file. Returns 0 or -errno (-ENOENT, -EACCES,
 * -ENOEXEC for a file that is not a 64-bit x86-64 ELF). The functions come
 * from .symtab and .dynsym (or DT_SYMTAB without section headers); when
 * .symtab has none and the file is a Go program (a stripped Go binary),
 * from Go's own function table, .gopclntab, with Go's names
 * ("main.(*T).method", "net/http.(*Server).Serve"). */
int objfile_open(const char *path, struct objfile **out);
/* The same without its functions (no symbol table read): the headers, the
 * segments, the dynamic section (needed, soname, rpath, runpath). Reading a
 * library's dependencies needs no more (node's 180,000 symbols: 1 s). */
int objfile_open_headers(const char *path, struct objfile **out);
void objfile_close(struct objfile *ef);

/* vaddr -> file offset through PT_LOAD. -ENOENT if no segment holds it
 * in its file-backed part. */
int objfile_vaddr_to_offset(const struct objfile *ef, uint64_t vaddr, uint64_t *off);
int objfile_offset_to_vaddr(const struct objfile *ef, uint64_t off, uint64_t *vaddr);
/* true if vaddr is inside an executable PT_LOAD segment */
bool objfile_vaddr_is_exec(const struct objfile *ef, uint64_t vaddr);

/* Read len bytes of the file image at vaddr (code bytes). 0 or -errno. */
int objfile_read(const struct objfile *ef, uint64_t vaddr, void *buf, size_t len);

/* Look up a function by exact name, optionally versioned as "name@VER" or
 * "name@@VER". A name no symbol has is looked up among the demangled C++
 * names: "ns::Class::method" (every overload is a candidate) or, with a
 * parameter list, "ns::Class::method(int)" (white space between tokens does
 * not matter). Rules, as the dynamic linker and perf probe apply them:
 *  - aliases (same address) are one candidate;
 *  - a strong definition beats a weak one;
 *  - an unversioned lookup of a versioned name picks the default (@@) version;
 *  - two or more remaining candidates at different addresses: -EEXIST, and
 *    *cands and *ncands list them (caller frees the array, not the symbols).
 * Returns 0 with *out set, -ENOENT, or -EEXIST. */
int objfile_func_lookup(const struct objfile *ef, const char *name,
		    const struct objfile_sym **out,
		    const struct objfile_sym ***cands, size_t *ncands);

/* All functions whose name matches the fnmatch(3) glob, one per address
 * (aliases collapse to the first name in sort order), sorted by name. A C++
 * function also matches by its demangled name: without its parameters
 * ("ns::Class::method*" gives every overload), or with them when the glob
 * has a '(' ("ns::f(int*").
 * Returns the count (>= 0) or -errno; *out is malloc'd. */
ssize_t objfile_func_match(const struct objfile *ef, const char *glob,
		       const struct objfile_sym ***out);

/* Does the C++ function s match the glob by its demangled name (without
 * its parameters, or with them if the glob has a '('; spacing folded)? */
bool objfile_sym_match_cxx(const struct objfile_sym *s, const char *glob);

/* The function containing vaddr (vaddr in [sym, sym+size)), or NULL. */
const struct objfile_sym *objfile_func_at(const struct objfile *ef, uint64_t vaddr);

/* Up to max function names closest to name (edit distance), for
 * "did you mean"; a C++ function is compared by its demangled name and
 * suggested as "ns::Class::method(int)". Returns the count; names point
 * into ef. */
size_t objfile_func_suggest(const struct objfile *ef, const char *name,
			const char **out, size_t max);

/* The address of a defined symbol of any kind (object, function, notype,
 * ...; not TLS, section or file symbols) by exact name, from .symtab and
 * .dynsym: a global definition beats a weak one, which beats a local one;
 * among equals the first found wins. Without section headers, only the
 * functions found through DT_SYMTAB. Returns 0 with *vaddr (st_value), or
 * -ENOENT. */
int objfile_symbol_vaddr(const struct objfile *ef, const char *name, uint64_t *vaddr);

/* The raw bytes and sh_addr of the first section named name (through the
 * section headers, read from the mapped file). *data points into the file's
 * mapping and stays valid until objfile_close; an SHT_NOBITS or empty section
 * gives *data = NULL and *len = 0. Any of data, len, addr may be NULL.
 * Returns 0, -ENOENT (no such section, or no section headers), or -EIO when
 * the section runs past the end of the file. */
int objfile_section_data(const struct objfile *ef, const char *name, const void **data,
		     size_t *len, uint64_t *addr);

/* The allocated executable section (SHF_ALLOC | SHF_EXECINSTR) whose
 * [sh_addr, sh_addr + sh_size] holds vaddr (its end included): its bounds in
 * [*start, *end). 0, or -ENOENT (none, or no section headers). */
int objfile_exec_section_at(const struct objfile *ef, uint64_t vaddr, uint64_t *start,
			uint64_t *end);

/* Is vaddr in a PLT section (.plt, .plt.got, .plt.sec, .iplt)? A jump there is
 * a call of another function, never a part of the jumping one (the PLT's
 * FDE starts with the CFA of a function's middle). */
bool objfile_in_plt(const struct objfile *ef, uint64_t vaddr);

/* The call frame description (an FDE of .eh_frame, read with libdw) whose
 * range holds pc: [start, end), and whether it starts mid-function: its CFA
 * at start is not a function entry's (%rsp + 8), as for a part the compiler
 * split off a function (NAME.cold) that only a jump from it reaches. Every
 * function has one, named or not: it bounds the functions of a stripped
 * file. 0, or -ENOENT (no FDE there, or no .eh_frame). */
struct objfile_fde {
	uint64_t start, end;
	bool mid;
};
int objfile_fde_at(const struct objfile *ef, uint64_t pc, struct objfile_fde *out);

/* A Go program's function table (.gopclntab, found however the file was
 * linked or stripped): its bytes (in the file's mapping, valid until
 * objfile_close) and its header, text start corrected (gopclntab.h reads
 * it). NULL: the file has none. */
struct gopclntab_hdr;
const void *objfile_go_pclntab(const struct objfile *ef, size_t *len, struct gopclntab_hdr *h);

/* The Go source position of vaddr, from the function table's pcfile and
 * pcln (what Go's own tracebacks print): 0 with *file (in the file's
 * mapping) and *line, or -ENOENT (none; or vaddr is in code inlined into
 * its function, whose position pcln gives as the inlined function's: the
 * table of inlined calls lies outside .gopclntab). */
int objfile_go_line(const struct objfile *ef, uint64_t vaddr, const char **file,
		    unsigned *line);

/* The GNU build id of the file at path in hex, into hex (len bytes, NUL
 * ended); its length, 0 when it has none or cannot be read (buildid.c). */
size_t objfile_build_id(const char *path, char *hex, size_t len);

#endif
