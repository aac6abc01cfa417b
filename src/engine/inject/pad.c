/* Jump pads: where a patch's jump lands, chosen so that another tool's
 * kernel uprobe on the patched instruction never breaks the process
 * (foreign.c says why it would).
 *
 * A kernel uprobe put on the instruction a patch starts at (bpftrace or
 * perf at a function's entry, a uscope session on tracefs or bpf) writes an
 * int3 over our jump's first byte. At a hit the kernel runs the *file's*
 * instruction (L bytes) out of line and goes on at addr + L; when the
 * uprobe goes, it writes the file's first byte back over its int3. Bytes 1
 * to 4 of our jump are its rel32, which we choose (its target is ours to
 * place), so that they are the file's bytes 1-4: one exact target. Both
 * the hit (the file's code from addr + L on) and the uprobe's leaving (the
 * file's byte 0 before the file's bytes 1-4: the file's code) are then
 * safe at any instant. (Keeping only the file's bytes from addr + L on
 * would leave the target's low bytes free, a window of 256 B to 16 MiB,
 * but not the leaving safe; on Debian's python3.11 and libc it found no
 * more pads: left out.)
 * The jump lands on a pad there, in a page mapped for it (shared by the
 * pads that fit in it), which jumps on to the trampoline. Pads stay mapped
 * after detach, as trampolines do: a thread may be on its way through.
 *
 * Where the patch went after its site's instruction instead (plan.c,
 * struct inj_pre), or starts elsewhere than at a probe (a return's block),
 * no pad is needed. A patch with L < 5 that finds no pad (its target is
 * taken, in the heap's or the stack's room, or out of the process's reach)
 * stays
 * exposed to a hit in the watch's window: said at attach, with the count. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"
#include "x86/insn.h"

#define PAGE 4096ULL
#define USER_LO 0x10000ULL		/* mmap_min_addr */
#define USER_HI 0x7ffffffff000ULL	/* the top of a 4-level address space */
#define BRK_ROOM (256ULL << 20)	/* kept free above the heap's end */
#define BRK_ROOM_MIN (16ULL << 20)	/* ... when nothing else is */

/* Where pads may go in one process. */
struct space {
	const struct proc_map *maps;
	size_t nmaps;
	uint64_t brk_lo, brk_hi;	/* the heap's room to grow */
	uint64_t brk_hi_min;		/* ... the least it is left */
	uint64_t stack_lo;		/* ... and the main stack's: nothing above */
};

static bool mapped(const struct space *sp, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < sp->nmaps; i++)
		if (sp->maps[i].start < hi && sp->maps[i].end > lo)
			return true;
	return false;
}

static bool ours(const struct inj_image *img, uint64_t page)
{
	for (size_t i = 0; i < img->npad_pages; i++)
		if (img->pad_pages[i] == page)
			return true;
	return false;
}

static bool pad_taken(const struct inj_image *img, uint64_t lo, uint64_t hi)
{
	for (size_t p = 0; p < img->npatches; p++) {
		const struct inj_patch *q = &img->patches[p];

		if (q->npad && q->pad < hi && q->pad + q->npad > lo)
			return true;
	}
	return false;
}

/* A page a pad may take: ours already, or free and out of the heap's and
 * the stack's way. */
static bool page_ok(const struct inj_image *img, const struct space *sp, uint64_t page)
{
	if (ours(img, page))
		return true;
	return page >= USER_LO && page + PAGE <= USER_HI && page + PAGE <= sp->stack_lo &&
	       !(page < sp->brk_hi && page + PAGE > sp->brk_lo) && !mapped(sp, page, page + PAGE);
}

/* The pad at t for pa: a jmp rel32 to its trampoline, or where that does
 * not reach, jmp *0(%rip) and the address. Its length. */
static uint8_t pad_code(const struct inj_patch *pa, uint64_t t, uint8_t out[INJ_PAD_MAX])
{
	static const uint8_t ind[6] = {0xff, 0x25, 0, 0, 0, 0};

	if (!x86_encode_jmp(t, pa->tramp, out))
		return X86_JMP_LEN;
	memcpy(out, ind, sizeof(ind));
	memcpy(out + sizeof(ind), &pa->tramp, 8);
	return INJ_PAD_MAX;
}

/* Does a pad for pa fit at t? */
static bool fits(const struct inj_image *img, const struct space *sp,
		 const struct inj_patch *pa, uint64_t t)
{
	uint8_t code[INJ_PAD_MAX];
	uint8_t n = pad_code(pa, t, code);

	if (t < USER_LO || t + n > USER_HI || pad_taken(img, t, t + n))
		return false;
	for (uint64_t pg = t & ~(PAGE - 1); pg < t + n; pg += PAGE)
		if (!page_ok(img, sp, pg))
			return false;
	return true;
}

/* The pad's pages mapped (those not ours yet), and the pad set at t. */
static int take(struct inj_image *img, struct remote *rem, struct inj_patch *pa, uint64_t t)
{
	uint8_t code[INJ_PAD_MAX], n = pad_code(pa, t, code);

	for (uint64_t pg = t & ~(PAGE - 1); pg < t + n; pg += PAGE) {
		uint64_t *np;
		long r;

		if (ours(img, pg))
			continue;
		np = realloc(img->pad_pages, (img->npad_pages + 1) * sizeof(*np));
		if (!np)
			return -ENOMEM;
		img->pad_pages = np;
		r = inj_rsys(rem, SYS_mmap, (long)pg, (long)PAGE, PROT_READ | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (inj_rsys_failed(r) || (uint64_t)r != pg) {
			if (!inj_rsys_failed(r))	/* no MAP_FIXED_NOREPLACE (4.17) */
				inj_rsys(rem, SYS_munmap, r, (long)PAGE, 0, 0, 0, 0);
			return -EEXIST;
		}
		img->pad_pages[img->npad_pages++] = pg;
	}
	pa->pad = t;
	pa->npad = n;
	memcpy(pa->pad_code, code, n);
	return 0;
}

/* The target whose rel32 is the file's bytes 1-4. */
static uint64_t pad_target(const struct inj_patch *pa)
{
	uint32_t rel;

	memcpy(&rel, pa->orig + 1, 4);
	return pa->addr + X86_JMP_LEN + (uint64_t)(int64_t)(int32_t)rel;
}

/* A pad for pa out of the heap's room sp gives it: 0, -ENOENT (none
 * found), -errno. */
static int pad_in(struct inj_image *img, struct remote *rem, const struct space *sp,
		  struct inj_patch *pa)
{
	uint64_t t = pad_target(pa);

	if (!fits(img, sp, pa, t))
		return -ENOENT;
	return take(img, rem, pa, t);
}

/* ... leaving the heap BRK_ROOM to grow, else BRK_ROOM_MIN (a target 1 GiB
 * on from a function can fall there in a PIE executable, whose heap starts
 * up to 1 GiB after it). */
static int pad_for(struct inj_image *img, struct remote *rem, const struct space *sp,
		   struct inj_patch *pa)
{
	struct space less = *sp;
	int ret = pad_in(img, rem, sp, pa);

	if (ret != -ENOENT || sp->brk_hi_min >= sp->brk_hi)
		return ret;
	less.brk_hi = sp->brk_hi_min;
	return pad_in(img, rem, &less, pa);
}

/* The heap's and the main stack's room in process pid: the heap from its
 * start (stat's start_brk) to BRK_ROOM past its end now, or at least
 * BRK_ROOM_MIN (a pad further up ends brk's growth there, which glibc's
 * malloc takes in stride: it goes on with mmap); the stack's growth below
 * it, RLIMIT_STACK (at least 128 MiB, the kernel's gap below it; 1 GiB when
 * unlimited). */
static void space_init(struct space *sp, pid_t pid)
{
	struct rlimit rl;
	uint64_t grow = 1ULL << 30;
	char path[64], buf[1024];
	FILE *f;

	sp->brk_lo = sp->brk_hi = sp->brk_hi_min = 0;
	sp->stack_lo = USER_HI;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (f) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		char *p;
		int field = 2;
		unsigned long long v;

		buf[n] = 0;
		p = strrchr(buf, ')');	/* after the comm */
		for (; p && *p; p++)
			if (*p == ' ' && ++field == 47 && sscanf(p + 1, "%llu", &v) == 1)
				sp->brk_lo = v, sp->brk_hi = v + BRK_ROOM,
				sp->brk_hi_min = v + BRK_ROOM_MIN;
		fclose(f);
	}
	if (!prlimit(pid, RLIMIT_STACK, NULL, &rl) && rl.rlim_cur != RLIM_INFINITY)
		grow = rl.rlim_cur > (128ULL << 20) ? rl.rlim_cur : 128ULL << 20;
	grow += 16ULL << 20;
	for (size_t i = 0; i < sp->nmaps; i++) {
		if (!sp->maps[i].path)
			continue;
		if (!strcmp(sp->maps[i].path, "[stack]"))
			sp->stack_lo = sp->maps[i].end > grow ? sp->maps[i].end - grow : 0;
		if (!strcmp(sp->maps[i].path, "[heap]") && sp->maps[i].end + BRK_ROOM > sp->brk_hi) {
			sp->brk_hi = sp->maps[i].end + BRK_ROOM;
			sp->brk_hi_min = sp->maps[i].end + BRK_ROOM_MIN;
		}
	}
}

/* The patches exposed in this process: said once a site, in one line. */
static void say_exposed(struct inj *j, const struct inj_image *img, pid_t pid,
			const bool *exposed)
{
	char names[256];
	size_t n = 0, len = 0;

	names[0] = 0;
	for (size_t p = 0; p < img->npatches; p++) {
		size_t s = img->patches[p].sites[0];

		if (!exposed[p] || j->exposed[s])
			continue;
		j->exposed[s] = true;
		j->nexposed++;
		if (len < sizeof(names) - 1)
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
						n ? ", " : "", j->base.sites[s]->label);
		n++;
	}
	if (n) {
		log_warn("%zu site%s (%s) stay%s exposed in process %d to a uprobe another tool "
			 "(bpftrace, perf) puts on %s later: a hit in the 0.2 s before uscope takes "
			 "its patch out would break the process (doc/engines.md, \"Beside other "
			 "tracers\")", n, n == 1 ? "" : "s", names, n == 1 ? "s" : "", (int)pid,
			 n == 1 ? "it" : "them");
		log_info("(their first instruction is shorter than the jump and changes what the "
			 "probe reads, and no memory could be mapped where the jump could land "
			 "safely)");
	}
}

int inj_pads(struct inj *j, struct inj_image *img, struct remote *rem)
{
	struct proc_map *maps = NULL;
	struct space sp;
	bool *exposed;
	ssize_t nmaps;
	size_t want = 0;
	int ret = 0;

	for (size_t p = 0; p < img->npatches; p++) {
		const struct inj_patch *pa = &img->patches[p];

		want += !pa->pre.len && !pa->plan.spring && pa->nsites && !pa->probe_off[0];
	}
	if (!want)
		return 0;
	if (!j->exposed && !(j->exposed = calloc(j->base.nsites + 1, sizeof(*j->exposed))))
		return -ENOMEM;
	nmaps = procmaps_read(rem->pid, &maps);
	if (nmaps < 0)
		return (int)nmaps;
	exposed = calloc(img->npatches + 1, sizeof(*exposed));
	if (!exposed) {
		procmaps_free(maps, (size_t)nmaps);
		return -ENOMEM;
	}
	sp.maps = maps;
	sp.nmaps = (size_t)nmaps;
	space_init(&sp, rem->pid);
	for (size_t p = 0; p < img->npatches && ret != -ENOMEM; p++) {
		struct inj_patch *pa = &img->patches[p];
		struct x86_effects e;
		int len;

		if (pa->pre.len || pa->plan.spring || !pa->nsites || pa->probe_off[0])
			continue;
		if (x86_insn_effects(pa->orig, pa->plan.len, &e))
			continue;
		len = e.len;
		ret = pad_for(img, rem, &sp, pa);
		/* (a hit on a jmp or a ret goes to its target) */
		if (ret && ret != -ENOMEM)
			exposed[p] = len < X86_JMP_LEN && !e.leaves;
		if (!ret)
			log_debug("inject: %s: its jump in process %d lands on a pad at 0x%llx (its "
				  "first instruction %d bytes; its bytes after it are the file's)",
				  j->base.sites[pa->sites[0]]->label, (int)rem->pid,
				  (unsigned long long)pa->pad, len);
	}
	procmaps_free(maps, (size_t)nmaps);
	if (ret != -ENOMEM) {
		say_exposed(j, img, rem->pid, exposed);
		ret = 0;
	}
	free(exposed);
	return ret;
}
