/* libFuzzer target for the recording reader (src/record/reader.c), the
 * engines' decoders it calls (engine/raw.h) and the output that prints what
 * it reads (output/output.c), as `uscope trace -r FILE` runs them.
 *
 * The input is the file: written to a memfd and opened by its /proc path.
 * The reader maps it; mmap and munmap are wrapped (-Wl,--wrap, see the
 * Makefile) so that the mapping is an exact-size heap copy, and ASan sees a
 * read past the file's end. Then every accessor, and every event with every
 * field touched: the site and its arguments, the values, each string's
 * bytes (which must lie in the file), the comm; each event is printed as
 * text and as JSON. Checked as well: opening fails with one error line or
 * succeeds with none; the damage says a byte offset inside the file; a
 * callback that stops is obeyed; nothing stays mapped. Any violation
 * aborts. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "output/output.h"
#include "record/reader.h"
#include "python/frame.h"
#include "python/linetable.h"
#include "python/names.h"

#define CHECK(cond)                                                             \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "fuzz_record: invariant failed: %s (line %d)\n", \
				#cond, __LINE__);                               \
			abort();                                                \
		}                                                               \
	} while (0)

/* ---- the reader's mapping, as a heap copy ------------------------------ */

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);

static uint8_t *copy;
static size_t copy_len;

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	size_t got = 0;

	if (addr || prot != PROT_READ || flags != MAP_PRIVATE || fd < 0 || off || copy)
		return __real_mmap(addr, len, prot, flags, fd, off);
	copy = malloc(len ? len : 1);
	CHECK(copy);
	while (got < len) {
		ssize_t n = pread(fd, copy + got, len - got, (off_t)got);

		CHECK(n > 0);
		got += (size_t)n;
	}
	copy_len = len;
	return copy;
}

int __wrap_munmap(void *addr, size_t len);
int __wrap_munmap(void *addr, size_t len)
{
	if (addr && addr == copy) {
		CHECK(len == copy_len);
		free(copy);
		copy = NULL;
		return 0;
	}
	return __real_munmap(addr, len);
}

/* output.c symbolizes :symbol values through a cache; there is none here */
struct usc_cache;
void cache_symbolize(struct usc_cache *c, pid_t pid, uint64_t addr, char *buf, size_t len);
void cache_symbolize(struct usc_cache *c, pid_t pid, uint64_t addr, char *buf, size_t len)
{
	(void)c;
	(void)pid;
	snprintf(buf, len, "0x%llx", (unsigned long long)addr);
}

/* ... Python functions (never: there is no cache) */
const struct python_loc *python_names_func(struct usc_cache *c, pid_t pid, uint64_t code)
{
	(void)c, (void)pid, (void)code;
	return NULL;
}

/* ... and stacks (never: there is no cache, nor a session to unwind them) */
#include "stack/stack.h"
size_t stack_syms(struct usc_cache *c, pid_t pid, const struct usc_stack *st, uint32_t i,
		  struct stack_sym *out, size_t max)
{
	(void)c, (void)pid, (void)st, (void)i, (void)out, (void)max;
	return 0;
}

void stack_end_text(struct usc_cache *c, pid_t pid, const struct usc_stack *st, char *buf,
		    size_t len)
{
	(void)c, (void)pid, (void)st;
	snprintf(buf, len, "%s", "");
}

/* ... and a container's ids (none: a recording keeps the host's) */
#include <stdbool.h>
bool cache_ns_ids(struct usc_cache *c, pid_t pid, pid_t tid, pid_t *ns_pid, pid_t *ns_tid);
bool cache_ns_ids(struct usc_cache *c, pid_t pid, pid_t tid, pid_t *ns_pid, pid_t *ns_tid)
{
	(void)c, (void)pid, (void)tid, (void)ns_pid, (void)ns_tid;
	return false;
}

/* Every recorded map, read whole: each is what the reader checked. */
#include "objfile/modules.h"
static int touch_maps(void *ctx, pid_t pid, const struct proc_map *m, size_t n)
{
	uint64_t sum = (uint64_t)pid;

	(void)ctx;
	for (size_t i = 0; i < n; i++) {
		CHECK(m[i].end > m[i].start);
		sum += m[i].start + m[i].end + m[i].pgoff + (uint8_t)m[i].perms[0];
		if (m[i].path)
			sum += strlen(m[i].path);
	}
	__asm__ volatile("" : : "r"(sum));	/* read: ASan checks every byte */
	return 0;
}

/* govalue.c names Go types from the probed file, through the cache: none */
struct objfile;
int cache_elf(struct usc_cache *c, const char *path, struct objfile **out);
int cache_elf(struct usc_cache *c, const char *path, struct objfile **out)
{
	(void)c;
	(void)path;
	(void)out;
	return -ENOENT;
}
int gotypes_name(struct objfile *ef, uint64_t type_vaddr, char *buf, size_t len);
int gotypes_name(struct objfile *ef, uint64_t type_vaddr, char *buf, size_t len)
{
	(void)ef;
	(void)type_vaddr;
	(void)buf;
	(void)len;
	return -ENOENT;
}

/* ---- log ---------------------------------------------------------------- */

static int nerrors, nother;
static char last_error[1024];

static void on_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	CHECK(msg && !strchr(msg, '\n'));
	if (level == USC_LOG_ERROR) {
		nerrors++;
		snprintf(last_error, sizeof(last_error), "%s", msg);
	} else {
		nother++;
	}
}

/* ---- touching ----------------------------------------------------------- */

static volatile uint64_t sink;

static void touch(const void *p, size_t n)
{
	const volatile uint8_t *b = p;
	uint64_t x = 0;

	for (size_t i = 0; i < n; i++)
		x += b[i];
	sink += x;
}

/* A string in a fixed array: NUL-terminated inside it. */
#define TOUCH_ARRAY_STR(a)                                                      \
	do {                                                                    \
		CHECK(memchr((a), 0, sizeof(a)) != NULL);                       \
		touch((a), strlen(a));                                          \
	} while (0)

static void touch_str(const char *s)
{
	if (s)
		touch(s, strlen(s) + 1);
}

static void touch_spec(const struct usc_probe_spec *sp)
{
	TOUCH_ARRAY_STR(sp->text);
	TOUCH_ARRAY_STR(sp->event);
	TOUCH_ARRAY_STR(sp->module);
	TOUCH_ARRAY_STR(sp->symbol);
	TOUCH_ARRAY_STR(sp->provider);
	CHECK(sp->loc_kind <= USC_LOC_PYTHON);
	sink += sp->is_return + sp->has_offset + sp->is_glob + sp->nargs + sp->filter.n;
}

static void touch_arg(const struct usc_fetcharg *a)
{
	TOUCH_ARRAY_STR(a->name);
	CHECK((unsigned)a->type < USC_T_NR);
	CHECK(a->show <= USC_SHOW_ARRAY || a->show == USC_SHOW_PYFUNC || a->show == USC_SHOW_PYVAL);
	CHECK(a->show != USC_SHOW_ENUM || a->enums);
	/* output skips "GROUP__" in a member's name */
	CHECK(!a->group_len || (size_t)a->group_len + 2 <= strlen(a->name));
	CHECK(a->ninsn <= USC_FETCH_MAX);
	for (unsigned i = 0; i < a->ninsn; i++)
		sink += a->insn[i].op;
	if (a->enums) {
		sink += a->enums->n + a->enums->flags;
		for (unsigned k = 0; k < a->enums->n; k++) {
			CHECK(a->enums->v[k].name);
			sink += a->enums->v[k].value;
			touch_str(a->enums->v[k].name);
		}
	}
	sink += a->named + a->unavailable + a->optimized_out + a->hidden + a->group_first +
		a->type_given;
}

static void touch_site(const struct usc_site *s, const struct usc_probe_spec *specs,
		       size_t nspecs)
{
	CHECK(s->spec && s->probe < nspecs && s->spec == &specs[s->probe]);
	touch_spec(s->spec);
	TOUCH_ARRAY_STR(s->event);
	TOUCH_ARRAY_STR(s->label);
	CHECK(s->path);
	touch_str(s->path);
	touch_str(s->symbol);
	CHECK(s->nargs <= USC_MAX_ARGS);
	CHECK(!s->nargs || s->args);
	for (unsigned a = 0; a < s->nargs; a++)
		touch_arg(&s->args[a]);
	sink += s->vaddr + s->func_vaddr + s->offset + (uint64_t)s->group + s->ret_site +
		s->tail_call + s->is_return + s->hidden + s->cont + s->inlined +
		s->ref_ctr_offset + s->filter.n + s->filter_in_place + s->agg_in_place +
		(uint64_t)s->agg_func;
}

/* ---- events ------------------------------------------------------------- */

struct run {
	const struct usc_site *sites;
	size_t nsites;
	const struct usc_probe_spec *specs;
	size_t nspecs;
	uint64_t n;		/* delivered */
	uint64_t stop_at;	/* stop after this many (0: never) */
	struct usc_output text, json;
};

static int on_event(const struct usc_event *ev, void *ctx)
{
	struct run *r = ctx;
	const struct usc_site *s = ev->site;

	CHECK(s && s >= r->sites && s < r->sites + r->nsites);
	touch_site(s, r->specs, r->nspecs);
	CHECK(ev->comm);
	touch_str(ev->comm);
	sink += ev->time_ns + (uint64_t)ev->pid + (uint64_t)ev->tid + (uint64_t)ev->cpu + ev->ip +
		ev->func;
	CHECK(ev->nvals <= s->nargs);
	CHECK(!ev->nvals || ev->vals);
	for (unsigned i = 0; i < ev->nvals; i++) {
		const struct usc_value *v = &ev->vals[i];

		/* a stack as copied or walked (made frames by a session; there
		 * is none here), Python frames as walked (named by one) */
		CHECK(v->kind <= USC_V_PYSTACK && v->kind != USC_V_STACK);
		if (v->kind == USC_V_PYSTACK)
			CHECK(python_stack_ok(v->str, v->len));
		sink += v->u + v->len;
		if (v->kind == USC_V_USTACK) {
			struct fetch_stack_hdr h;

			CHECK(v->len >= sizeof(h));
			memcpy(&h, v->str, sizeof(h));
			CHECK(h.len == v->len - sizeof(h));
		}
		if (v->kind == USC_V_WALK) {
			/* its header and its return addresses, signal frames among them */
			struct fetch_walk_hdr h;

			CHECK(v->len >= sizeof(h));
			memcpy(&h, v->str, sizeof(h));
			CHECK(v->len == sizeof(h) + 8 * (size_t)h.n && h.n <= USC_STACK_FRAMES_MAX);
			CHECK(h.nsig <= FETCH_WALK_SIGS);
			for (unsigned k = 0; k < h.nsig; k++)
				CHECK(h.sig[k] < h.n);
		}
		if (usc_value_has_bytes(v)) {
			/* a string's (a stack's) bytes are the file's */
			CHECK(v->str);
			CHECK(copy && (const uint8_t *)v->str >= copy &&
			      v->len <= copy_len - (size_t)((const uint8_t *)v->str - copy));
			touch(v->str, v->len);
		}
	}
	output_reset(&r->text);
	output_reset(&r->json);
	CHECK(output_event(&r->text, ev) == 0);
	CHECK(output_event(&r->json, ev) == 0);
	CHECK(r->text.len && r->text.buf[r->text.len - 1] == '\n');
	CHECK(r->json.len && r->json.buf[r->json.len - 1] == '\n');
	touch(r->text.buf, r->text.len);
	touch(r->json.buf, r->json.len);
	r->n++;
	return r->stop_at && r->n >= r->stop_at;
}

/* A recorded Python code object: its names, and its line table decodes
 * within its bytes. */
static int touch_pycode(void *ctx, pid_t pid, const struct python_code_info *ci)
{
	uint64_t sum = (uint64_t)pid + ci->addr + (uint64_t)ci->firstlineno +
		       (uint64_t)ci->firsttraceable;

	(void)ctx;
	CHECK(ci->qualname && ci->filename);
	sum += strlen(ci->qualname) + strlen(ci->filename) + (ci->module ? strlen(ci->module) : 0);
	if (ci->linetable) {
		touch(ci->linetable, ci->linetable_len);
		for (int a = -2; a < 64; a += 2)
			sum += (uint64_t)python_linetable_line(ci->linetable, ci->linetable_len,
							       ci->firstlineno, a);
	}
	__asm__ volatile("" : : "r"(sum));
	return 0;
}

/* ---- the target --------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64];
	struct rec_file *f = NULL;
	struct run r = {0};
	const struct rec_header *h;
	const struct rec_site_stats *st;
	const char *damage, *snap;
	struct usc_probe_spec *specs;
	struct usc_site *sites;
	uint64_t events, lost, bad = 0, all;
	size_t nspecs, nsites;
	int ret;

	if (fd < 0) {
		fd = memfd_create("fuzz_record", MFD_CLOEXEC);
		CHECK(fd >= 0);
	}
	CHECK(ftruncate(fd, 0) == 0);
	for (size_t at = 0; at < size;) {
		ssize_t n = pwrite(fd, data + at, size - at, (off_t)at);

		CHECK(n > 0);
		at += (size_t)n;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	nerrors = nother = 0;
	usc_set_log(on_log, NULL);
	ret = rec_file_open(path, &f);
	if (ret) {
		usc_set_log(NULL, NULL);
		CHECK(ret == -EINVAL || ret == -ENOMEM);
		CHECK(!f && !copy);
		CHECK(ret == -ENOMEM || nerrors == 1);
		CHECK(ret == -ENOMEM || strstr(last_error, path));
		return 0;
	}
	CHECK(f && nerrors == 0);
	CHECK(size >= sizeof(struct rec_header) && copy && copy_len == size);

	CHECK(rec_file_maps(f, touch_maps, NULL) == 0);
	CHECK(rec_file_pycodes(f, touch_pycode, NULL) == 0);
	h = rec_file_header(f);
	CHECK(h && !memcmp(h->magic, REC_MAGIC, 8) && h->version >= REC_VERSION_MIN &&
	      h->version <= REC_VERSION);
	TOUCH_ARRAY_STR(h->host);
	TOUCH_ARRAY_STR(h->command);
	damage = rec_file_damage(f);
	if (damage) {
		unsigned long long at;
		int end = 0;

		/* "at byte N: why", N inside the file, after its header */
		CHECK(sscanf(damage, "at byte %llu: %n", &at, &end) == 1 && end > 0);
		CHECK(at >= sizeof(struct rec_header) && at <= size);
		CHECK(damage[end]);
		touch_str(damage);
	}
	snap = rec_file_snapshot(f);
	touch_str(snap);
	specs = rec_file_specs(f, &nspecs);
	CHECK(specs);
	for (size_t i = 0; i < nspecs; i++)
		touch_spec(&specs[i]);
	sites = rec_file_take_sites(f, &nsites);
	CHECK(sites && nsites);		/* a file with no site does not open */
	for (size_t i = 0; i < nsites; i++)
		touch_site(&sites[i], specs, nspecs);
	st = rec_file_stats(f, &events, &lost);
	sink += events + lost;
	if (st)
		touch(st, nsites * sizeof(*st));
	if (rec_file_lost_wait(f))
		touch(rec_file_lost_wait(f), nsites * sizeof(uint64_t));
	CHECK(st || !rec_file_lost_wait(f));

	r = (struct run){sites, nsites, specs, nspecs, 0, 0, {.json = false}, {.json = true}};
	CHECK(rec_file_events(f, on_event, &r, &bad) == 0);
	all = r.n;
	sink += bad;
	if (all > 1) {
		/* again, stopping half way: the same events up to there */
		uint64_t bad2 = 0;

		r.n = 0;
		r.stop_at = all / 2;
		CHECK(rec_file_events(f, on_event, &r, &bad2) == 0);
		CHECK(r.n == all / 2);
		CHECK(bad2 <= bad);
	}
	output_free(&r.text);
	output_free(&r.json);
	usc_set_log(NULL, NULL);
	CHECK(nerrors == 0);

	rec_file_free(f);
	CHECK(!copy);
	/* the sites were taken: freed as the session frees them */
	for (size_t i = 0; i < nsites; i++) {
		free(sites[i].path);
		free(sites[i].symbol);
		free(sites[i].args);
	}
	free(sites);
	return 0;
}
