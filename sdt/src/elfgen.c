/* The provider's shared object, built with libelf.
 *
 * Sections, in file order, and the segment each is in:
 *
 *   .note.gnu.build-id  R    a hash of the contents, so that tools can tell
 *                            two generated objects apart (PT_NOTE)
 *   .hash .dynsym .dynstr R  the dynamic symbols: each probe's stub function
 *                            (the probe's name) and its semaphore
 *                            (PROVIDER_NAME_semaphore, as dtrace -G names it)
 *   .stapsdt.base       R    one byte whose address every note records, as
 *                            <sys/sdt.h> does (prelink detection)
 *   .text               R X  one stub per probe: a 5-byte nop (the USDT
 *                            site) and ret, 16-byte aligned
 *   .probes             RW   the 2-byte semaphores, as sys/sdt.h puts them
 *   .dynamic            RW   PT_DYNAMIC
 *   .note.stapsdt            one note per probe, not loaded (as <sys/sdt.h>)
 *   .shstrtab
 *
 * libelf lays the sections out in the file. Each segment starts on a page
 * of its own in the file (its first section is page-aligned), so that no
 * page of the file is mapped twice: a file offset then names one place in
 * the process, which is how tracers that write a semaphore find it
 * (uscope's inject engine, from the offset uprobe_events takes), and the
 * kernel's ref_ctr looks for it in the writable mapping only. Addresses
 * equal offsets. The site is a 5-byte nop rather than sys/sdt.h's 1-byte
 * one so that a tracer that patches code (uscope's inject engine) can put
 * its jump over the site alone.
 *
 * Nothing is relocated: the stubs have no addresses in them, and the
 * dynamic loader adds the load bias to DT_* pointers and symbols itself. */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "sdt_int.h"

#define PAGE 0x1000
#define STUB_SIZE 16
#define NT_STAPSDT 3
#define BUILD_ID_LEN 20

/* the stub: nopl 0x0(%rax,%rax,1); ret; int3 filler */
static const unsigned char stub[6] = {0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3};
#define STUB_CODE_SIZE sizeof(stub)

enum {
	S_BUILDID = 1, S_HASH, S_DYNSYM, S_DYNSTR, S_BASE, S_TEXT, S_PROBES, S_DYNAMIC,
	S_NOTES, S_SHSTRTAB, NSECTIONS
};

/* A growing string table. */
struct strtab {
	char *b;
	size_t len, cap;
};

static size_t strtab_add(struct strtab *t, const char *s)
{
	size_t l = strlen(s) + 1, off = t->len;

	if (!t->b)
		return (size_t)-1;
	if (t->len + l > t->cap) {
		size_t cap = (t->len + l) * 2;
		char *nb = realloc(t->b, cap);

		if (!nb) {
			free(t->b);
			t->b = NULL;
			return (size_t)-1;
		}
		t->b = nb;
		t->cap = cap;
	}
	memcpy(t->b + t->len, s, l);
	t->len += l;
	return off;
}

static int strtab_init(struct strtab *t)
{
	t->b = calloc(1, 64);
	t->len = 1;	/* index 0 is the empty string */
	t->cap = 64;
	return t->b ? 0 : -ENOMEM;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The bytes of one stapsdt note: the header, "stapsdt", then pc, base,
 * semaphore and the three strings, each part padded to 4 bytes. */
static size_t note_size(const char *prov, const struct sdt_gen_probe *p)
{
	size_t desc = 3 * 8 + strlen(prov) + 1 + strlen(p->name) + 1 + strlen(p->args) + 1;

	return sizeof(Elf64_Nhdr) + align_up(sizeof("stapsdt"), 4) + align_up(desc, 4);
}

static size_t note_put(unsigned char *b, const char *prov, const struct sdt_gen_probe *p,
		       uint64_t base)
{
	size_t lp = strlen(prov) + 1, ln = strlen(p->name) + 1, la = strlen(p->args) + 1;
	Elf64_Nhdr nh = {
		.n_namesz = sizeof("stapsdt"),
		.n_descsz = (Elf64_Word)(3 * 8 + lp + ln + la),
		.n_type = NT_STAPSDT,
	};
	uint64_t addrs[3] = {p->stub_vaddr, base, p->sema_vaddr};
	unsigned char *d;

	memset(b, 0, note_size(prov, p));
	memcpy(b, &nh, sizeof(nh));
	memcpy(b + sizeof(nh), "stapsdt", sizeof("stapsdt"));
	d = b + sizeof(nh) + align_up(sizeof("stapsdt"), 4);
	memcpy(d, addrs, sizeof(addrs));
	memcpy(d + 24, prov, lp);
	memcpy(d + 24 + lp, p->name, ln);
	memcpy(d + 24 + lp + ln, p->args, la);
	return note_size(prov, p);
}

/* FNV-1a, three ways seeded, for the 20 bytes of the build ID: it only has
 * to tell contents apart, not resist anyone. */
static void hash_bytes(uint64_t h[3], const void *data, size_t len)
{
	const unsigned char *b = data;

	for (size_t i = 0; i < len; i++)
		for (int k = 0; k < 3; k++)
			h[k] = (h[k] ^ b[i]) * 0x100000001b3ULL;
}

static const char *const secname[NSECTIONS] = {
	[S_BUILDID] = ".note.gnu.build-id", [S_HASH] = ".hash", [S_DYNSYM] = ".dynsym",
	[S_DYNSTR] = ".dynstr", [S_BASE] = ".stapsdt.base", [S_TEXT] = ".text",
	[S_DYNAMIC] = ".dynamic", [S_PROBES] = ".probes", [S_NOTES] = ".note.stapsdt",
	[S_SHSTRTAB] = ".shstrtab",
};
/* the segment of each allocated section: 0 R, 1 R X, 2 RW */
static const int segof[NSECTIONS] = {
	[S_BUILDID] = 0, [S_HASH] = 0, [S_DYNSYM] = 0, [S_DYNSTR] = 0, [S_BASE] = 0,
	[S_TEXT] = 1, [S_PROBES] = 2, [S_DYNAMIC] = 2, [S_NOTES] = -1, [S_SHSTRTAB] = -1,
};

#define BUILD_ID_SIZE (sizeof(Elf64_Nhdr) + 4 + BUILD_ID_LEN)

/* The object being built: libelf's handles, the sections' contents, and
 * where the layout put them. */
struct gen {
	Elf *e;
	Elf_Scn *scn[NSECTIONS];
	Elf_Data *data[NSECTIONS];
	size_t n;			/* probes */
	size_t nsyms, nbucket, ndyn;
	struct strtab dynstr, shstr;
	size_t shname[NSECTIONS], *symname, notes_len;
	unsigned char *buildid, *text, *notes, *sems;
	unsigned char base_byte;
	Elf64_Word *hash;
	Elf64_Sym *syms;
	Elf64_Dyn *dyn;
	GElf_Shdr shs[NSECTIONS];
	uint64_t bias[3], seg_off[3], seg_end[3], addr[NSECTIONS];
};

static Elf_Scn *new_section(struct gen *g, int idx, size_t name_off, Elf64_Word type,
			    Elf64_Xword flags, void *buf, size_t size, Elf_Type dtype, size_t align,
			    size_t entsize)
{
	Elf_Scn *scn = elf_newscn(g->e);
	Elf_Data *d;
	GElf_Shdr sh;

	if (!scn || !(d = elf_newdata(scn)) || !gelf_getshdr(scn, &sh))
		return NULL;
	d->d_buf = buf;
	d->d_size = size;
	d->d_type = dtype;
	d->d_align = align;
	d->d_off = 0;
	d->d_version = EV_CURRENT;
	sh.sh_name = (Elf64_Word)name_off;
	sh.sh_type = type;
	sh.sh_flags = flags;
	sh.sh_addralign = align;
	sh.sh_entsize = entsize;
	if (!gelf_update_shdr(scn, &sh))
		return NULL;
	g->scn[idx] = scn;
	g->data[idx] = d;
	return scn;
}

static int lib_fail(const char *what)
{
	return sdt_set_error(-EIO, "libelf: %s: %s", what, elf_errmsg(-1));
}

/* The string tables and the contents' buffers, the stubs written. 0 or
 * -ENOMEM. */
static int gen_alloc(struct gen *g, const char *provider, const struct sdt_gen_probe *probes)
{
	size_t n = g->n;

	if (strtab_init(&g->dynstr) || strtab_init(&g->shstr))
		return -ENOMEM;
	for (int i = 1; i < NSECTIONS; i++)
		if ((g->shname[i] = strtab_add(&g->shstr, secname[i])) == (size_t)-1)
			return -ENOMEM;
	g->symname = calloc(g->nsyms, sizeof(*g->symname));
	g->buildid = calloc(1, BUILD_ID_SIZE);
	g->hash = calloc(2 + g->nbucket + g->nsyms, sizeof(*g->hash));
	g->syms = calloc(g->nsyms, sizeof(*g->syms));
	g->text = malloc(STUB_SIZE * n);
	g->dyn = calloc(g->ndyn, sizeof(*g->dyn));
	g->sems = calloc(n, 2);
	for (size_t i = 0; i < n; i++)
		g->notes_len += note_size(provider, &probes[i]);
	g->notes = calloc(1, g->notes_len);
	if (!g->symname || !g->buildid || !g->hash || !g->syms || !g->text || !g->dyn ||
	    !g->sems || !g->notes)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		g->symname[1 + 2 * i] = strtab_add(&g->dynstr, probes[i].name);
		g->symname[2 + 2 * i] = strtab_add(&g->dynstr, probes[i].sema_sym);
		if (g->symname[1 + 2 * i] == (size_t)-1 || g->symname[2 + 2 * i] == (size_t)-1)
			return -ENOMEM;
		memset(g->text + STUB_SIZE * i, 0xcc, STUB_SIZE);
		memcpy(g->text + STUB_SIZE * i, stub, STUB_CODE_SIZE);
	}
	return 0;
}

/* The ELF header, and room for the program headers. 0 or -EIO. */
static int gen_headers(struct gen *g, int fd)
{
	GElf_Ehdr eh;

	g->e = elf_begin(fd, ELF_C_WRITE, NULL);
	if (!g->e)
		return lib_fail("elf_begin");
	if (!gelf_newehdr(g->e, ELFCLASS64) || !gelf_getehdr(g->e, &eh))
		return lib_fail("the ELF header");
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_shstrndx = S_SHSTRTAB;
	if (!gelf_update_ehdr(g->e, &eh))
		return lib_fail("the ELF header");
	/* LOAD x3, DYNAMIC, NOTE, GNU_STACK: created before the layout so that
	 * libelf leaves room for them after the ELF header */
	if (!gelf_newphdr(g->e, 6))
		return lib_fail("the program headers");
	return 0;
}

/* Every section, over the buffers; then their links: the symbol tables and
 * the dynamic section name their strings, the hash table its symbols. 0 or
 * -EIO. */
static int gen_sections(struct gen *g)
{
	struct { int sec, link, info; } links[] = {
		{S_HASH, S_DYNSYM, 0}, {S_DYNSYM, S_DYNSTR, 1}, {S_DYNAMIC, S_DYNSTR, 0},
	};
	const size_t *shname = g->shname, n = g->n;

	if (!new_section(g, S_BUILDID, shname[S_BUILDID], SHT_NOTE, SHF_ALLOC,
			 g->buildid, BUILD_ID_SIZE, ELF_T_NHDR, 4, 0) ||
	    !new_section(g, S_HASH, shname[S_HASH], SHT_HASH, SHF_ALLOC, g->hash,
			 (2 + g->nbucket + g->nsyms) * sizeof(*g->hash), ELF_T_WORD, 8,
			 sizeof(Elf64_Word)) ||
	    !new_section(g, S_DYNSYM, shname[S_DYNSYM], SHT_DYNSYM, SHF_ALLOC,
			 g->syms, g->nsyms * sizeof(*g->syms), ELF_T_SYM, 8, sizeof(Elf64_Sym)) ||
	    !new_section(g, S_DYNSTR, shname[S_DYNSTR], SHT_STRTAB, SHF_ALLOC,
			 g->dynstr.b, g->dynstr.len, ELF_T_BYTE, 1, 0) ||
	    !new_section(g, S_BASE, shname[S_BASE], SHT_PROGBITS, SHF_ALLOC,
			 &g->base_byte, 1, ELF_T_BYTE, 1, 0) ||
	    !new_section(g, S_TEXT, shname[S_TEXT], SHT_PROGBITS,
			 SHF_ALLOC | SHF_EXECINSTR, g->text, STUB_SIZE * n, ELF_T_BYTE, PAGE, 0) ||
	    !new_section(g, S_PROBES, shname[S_PROBES], SHT_PROGBITS,
			 SHF_ALLOC | SHF_WRITE, g->sems, 2 * n, ELF_T_BYTE, PAGE, 0) ||
	    !new_section(g, S_DYNAMIC, shname[S_DYNAMIC], SHT_DYNAMIC,
			 SHF_ALLOC | SHF_WRITE, g->dyn, g->ndyn * sizeof(*g->dyn), ELF_T_DYN, 8,
			 sizeof(Elf64_Dyn)) ||
	    !new_section(g, S_NOTES, shname[S_NOTES], SHT_NOTE, 0, g->notes,
			 g->notes_len, ELF_T_NHDR, 4, 0) ||
	    !new_section(g, S_SHSTRTAB, shname[S_SHSTRTAB], SHT_STRTAB, 0,
			 g->shstr.b, g->shstr.len, ELF_T_BYTE, 1, 0))
		return lib_fail("a section");
	for (size_t k = 0; k < sizeof(links) / sizeof(links[0]); k++) {
		GElf_Shdr sh;

		if (!gelf_getshdr(g->scn[links[k].sec], &sh))
			return lib_fail("a section header");
		sh.sh_link = (Elf64_Word)elf_ndxscn(g->scn[links[k].link]);
		sh.sh_info = (Elf64_Word)links[k].info;	/* .dynsym: the first global */
		if (!gelf_update_shdr(g->scn[links[k].sec], &sh))
			return lib_fail("a section header");
	}
	return 0;
}

/* Segments: R from the start of the file (the headers with it), then R X,
 * then RW; each starts on a page after the previous one's end, at the same
 * offset within the page as in the file (as ld does: with the page-aligned
 * sections above, the address is the offset). */
static void gen_segments(struct gen *g)
{
	for (int s = 0; s < 3; s++) {
		g->seg_off[s] = UINT64_MAX;
		g->seg_end[s] = 0;
	}
	g->seg_off[0] = 0;
	for (int i = 1; i < NSECTIONS; i++) {
		int s = segof[i];

		if (s < 0)
			continue;
		if (g->shs[i].sh_offset < g->seg_off[s])
			g->seg_off[s] = g->shs[i].sh_offset;
		if (g->shs[i].sh_offset + g->shs[i].sh_size > g->seg_end[s])
			g->seg_end[s] = g->shs[i].sh_offset + g->shs[i].sh_size;
	}
	g->bias[0] = 0;
	for (int s = 1; s < 3; s++) {
		uint64_t prev_end = g->seg_end[s - 1] + g->bias[s - 1];
		uint64_t va = align_up(prev_end, PAGE) + g->seg_off[s] % PAGE;

		g->bias[s] = va - g->seg_off[s];
	}
}

/* libelf's layout: the file offsets of every section, then the segments
 * and the address of every allocated section. 0 or -EIO. */
static int gen_layout(struct gen *g)
{
	if (elf_update(g->e, ELF_C_NULL) < 0)
		return lib_fail("the layout");
	for (int i = 1; i < NSECTIONS; i++)
		if (!gelf_getshdr(g->scn[i], &g->shs[i]))
			return lib_fail("a section header");
	gen_segments(g);
	for (int i = 1; i < NSECTIONS; i++) {
		if (segof[i] < 0)
			continue;
		g->addr[i] = g->shs[i].sh_offset + g->bias[segof[i]];
		g->shs[i].sh_addr = g->addr[i];
		if (!gelf_update_shdr(g->scn[i], &g->shs[i]))
			return lib_fail("a section header");
	}
	return 0;
}

/* The contents that hold addresses: the symbols, their hash table, the
 * dynamic section, the notes. */
static void gen_contents(struct gen *g, const char *provider, struct sdt_gen_probe *probes)
{
	const uint64_t *addr = g->addr;
	const size_t nsyms = g->nsyms, nbucket = g->nbucket;
	Elf64_Word *hash = g->hash;

	for (size_t i = 0; i < g->n; i++) {
		probes[i].stub_vaddr = addr[S_TEXT] + STUB_SIZE * i;
		probes[i].sema_vaddr = addr[S_PROBES] + 2 * i;
		g->syms[1 + 2 * i] = (Elf64_Sym){
			.st_name = (Elf64_Word)g->symname[1 + 2 * i],
			.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
			.st_other = STV_DEFAULT,
			.st_shndx = S_TEXT,
			.st_value = probes[i].stub_vaddr,
			.st_size = STUB_CODE_SIZE,
		};
		g->syms[2 + 2 * i] = (Elf64_Sym){
			.st_name = (Elf64_Word)g->symname[2 + 2 * i],
			.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT),
			.st_other = STV_DEFAULT,
			.st_shndx = S_PROBES,
			.st_value = probes[i].sema_vaddr,
			.st_size = 2,
		};
	}
	/* SysV hash: bucket[h % nbucket] -> a symbol, chain[sym] -> the next */
	hash[0] = (Elf64_Word)nbucket;
	hash[1] = (Elf64_Word)nsyms;
	for (size_t k = 1; k < nsyms; k++) {
		Elf64_Word *bucket = &hash[2 + elf_hash(g->dynstr.b + g->syms[k].st_name) % nbucket];

		hash[2 + nbucket + k] = *bucket;
		*bucket = (Elf64_Word)k;
	}
	Elf64_Dyn dv[] = {
		{.d_tag = DT_HASH, .d_un.d_ptr = addr[S_HASH]},
		{.d_tag = DT_STRTAB, .d_un.d_ptr = addr[S_DYNSTR]},
		{.d_tag = DT_SYMTAB, .d_un.d_ptr = addr[S_DYNSYM]},
		{.d_tag = DT_STRSZ, .d_un.d_val = g->dynstr.len},
		{.d_tag = DT_SYMENT, .d_un.d_val = sizeof(Elf64_Sym)},
		{.d_tag = DT_NULL},
	};
	memcpy(g->dyn, dv, sizeof(dv));
	for (size_t i = 0, off = 0; i < g->n; i++)
		off += note_put(g->notes + off, provider, &probes[i], addr[S_BASE]);
}

/* The build ID: everything the object is made of. */
static void gen_build_id(struct gen *g)
{
	uint64_t h[3] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9ce484222325cbf2ULL};
	Elf64_Nhdr bnh = {.n_namesz = 4, .n_descsz = BUILD_ID_LEN, .n_type = NT_GNU_BUILD_ID};

	for (int i = S_HASH; i < NSECTIONS; i++)
		hash_bytes(h, g->data[i]->d_buf, g->data[i]->d_size);
	memcpy(g->buildid, &bnh, sizeof(bnh));
	memcpy(g->buildid + sizeof(bnh), "GNU", 4);
	memcpy(g->buildid + sizeof(bnh) + 4, h, BUILD_ID_LEN);
}

/* The program headers: the three LOAD segments, DYNAMIC, NOTE (the build
 * ID), GNU_STACK. 0 or -EIO. */
static int gen_program_headers(struct gen *g)
{
	const GElf_Shdr *shs = g->shs;
	const uint64_t *addr = g->addr;
	GElf_Phdr ph[6] = {
		{.p_type = PT_LOAD, .p_flags = PF_R},
		{.p_type = PT_LOAD, .p_flags = PF_R | PF_X},
		{.p_type = PT_LOAD, .p_flags = PF_R | PF_W},
		{.p_type = PT_DYNAMIC, .p_flags = PF_R | PF_W, .p_offset = shs[S_DYNAMIC].sh_offset,
		 .p_vaddr = addr[S_DYNAMIC], .p_paddr = addr[S_DYNAMIC],
		 .p_filesz = shs[S_DYNAMIC].sh_size, .p_memsz = shs[S_DYNAMIC].sh_size, .p_align = 8},
		{.p_type = PT_NOTE, .p_flags = PF_R, .p_offset = shs[S_BUILDID].sh_offset,
		 .p_vaddr = addr[S_BUILDID], .p_paddr = addr[S_BUILDID],
		 .p_filesz = shs[S_BUILDID].sh_size, .p_memsz = shs[S_BUILDID].sh_size, .p_align = 4},
		{.p_type = PT_GNU_STACK, .p_flags = PF_R | PF_W, .p_align = 16},
	};

	for (int s = 0; s < 3; s++) {
		ph[s].p_offset = g->seg_off[s];
		ph[s].p_vaddr = ph[s].p_paddr = g->seg_off[s] + g->bias[s];
		ph[s].p_filesz = ph[s].p_memsz = g->seg_end[s] - g->seg_off[s];
		ph[s].p_align = PAGE;
	}
	for (int k = 0; k < 6; k++)
		if (!gelf_update_phdr(g->e, k, &ph[k]))
			return lib_fail("a program header");
	return 0;
}

/* Every section's data written out. 0 or -EIO. */
static int gen_write(struct gen *g)
{
	for (int i = 1; i < NSECTIONS; i++)
		elf_flagdata(g->data[i], ELF_C_SET, ELF_F_DIRTY);
	if (elf_update(g->e, ELF_C_WRITE) < 0)
		return lib_fail("writing the object");
	return 0;
}

static void gen_free(struct gen *g)
{
	if (g->e)
		elf_end(g->e);
	free(g->dynstr.b);
	free(g->shstr.b);
	free(g->symname);
	free(g->buildid);
	free(g->hash);
	free(g->syms);
	free(g->text);
	free(g->dyn);
	free(g->sems);
	free(g->notes);
}

int sdt_gen_object(int fd, const char *provider, struct sdt_gen_probe *probes, size_t n)
{
	struct gen g = {.n = n, .nsyms = 1 + 2 * n, .nbucket = 1 + 2 * n, .ndyn = 6};
	int ret;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return lib_fail("elf_version");
	ret = gen_alloc(&g, provider, probes);
	if (!ret)
		ret = gen_headers(&g, fd);
	if (!ret)
		ret = gen_sections(&g);
	if (!ret)
		ret = gen_layout(&g);
	if (!ret) {
		gen_contents(&g, provider, probes);
		gen_build_id(&g);
		ret = gen_program_headers(&g);
	}
	if (!ret)
		ret = gen_write(&g);
	if (ret == -ENOMEM)
		sdt_set_error(ret, "out of memory building the object");
	gen_free(&g);
	return ret;
}
