/* Unwind tables kept: in memory by build-id (or file) for a session, and on
 * disk by build-id across sessions (unwtab.h). A file on disk is a header
 * (struct tabfile) and the rows; the block index is rebuilt when read. A
 * file is trusted only whole: its size, version, build-id, checksum, and
 * rows (sorted, ops known) are checked, and anything else is rebuilt. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/grow.h"
#include "stack/unwtab.h"

#define TABFILE_MAGIC "USCUNWT"
#define TABFILE_VERSION STACK_TABFILE_VERSION
#define TABFILE_MAX (256u << 20)

struct tabfile {
	char magic[8];
	uint32_t version;
	uint32_t hdr_size;
	uint64_t checksum;	/* of the file, this field 0 */
	uint64_t base;
	uint32_t span;
	uint32_t nrows;
	uint8_t shift;
	uint8_t pad[3];
	uint32_t build_id_len;
	uint8_t build_id[STACK_BUILD_ID_MAX];
	uint32_t fdes;
	uint32_t debug_rows;
	uint32_t go_rows;
	uint32_t pad2;
};

static uint64_t checksum(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ n;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h ^ (h >> 32);
}

int stack_utab_encode(const struct stack_utab *u, void **buf, size_t *len)
{
	size_t rows = (size_t)u->tab.nrows * sizeof(*u->rows);
	struct tabfile h = {
		.magic = TABFILE_MAGIC,
		.version = TABFILE_VERSION,
		.hdr_size = sizeof(h),
		.base = u->tab.base,
		.span = u->tab.span,
		.nrows = u->tab.nrows,
		.shift = u->tab.shift,
		.build_id_len = u->build_id_len,
		.fdes = u->fdes,
		.debug_rows = u->debug_rows,
		.go_rows = u->go_rows,
	};
	uint8_t *b;

	if (u->build_id_len > STACK_BUILD_ID_MAX)
		return -EINVAL;
	memcpy(h.build_id, u->build_id, u->build_id_len);
	b = malloc(sizeof(h) + rows);
	if (!b)
		return -ENOMEM;
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), u->rows, rows);
	h.checksum = checksum(b, sizeof(h) + rows);
	memcpy(b, &h, sizeof(h));
	*buf = b;
	*len = sizeof(h) + rows;
	return 0;
}

/* Rows a walker can trust: row 0 at 0, pcs rising within the span, ops
 * and rbp rules it knows. */
static bool rows_valid(const struct stack_row *r, uint32_t n, uint32_t span)
{
	if (!n || r[0].pc != 0)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		if ((r[i].op & STACK_OP_MASK) >= STACK_OP_NR || (r[i].op & 0x80) ||
		    ((r[i].op & STACK_RBP_MASK) >> STACK_RBP_SHIFT) > STACK_RBP_LOST ||
		    r[i].pc >= span)
			return false;
		if (i && r[i].pc <= r[i - 1].pc)
			return false;
	}
	return true;
}

int stack_utab_decode(const void *buf, size_t len, const uint8_t *id, size_t idlen,
		      struct stack_utab **out)
{
	const uint8_t *b = buf;
	struct tabfile h;
	struct stack_utab *u;
	uint64_t sum;

	*out = NULL;
	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, b, sizeof(h));
	if (memcmp(h.magic, TABFILE_MAGIC, sizeof(h.magic)) || h.version != TABFILE_VERSION ||
	    h.hdr_size != sizeof(h) || h.build_id_len != idlen || idlen > STACK_BUILD_ID_MAX ||
	    memcmp(h.build_id, id, idlen) || !h.nrows || !h.span ||
	    h.shift > STACK_SHIFT_MAX ||
	    (len - sizeof(h)) / sizeof(struct stack_row) != h.nrows ||
	    (len - sizeof(h)) % sizeof(struct stack_row))
		return -EBADMSG;
	sum = h.checksum;
	h.checksum = 0;
	{
		/* the checksum over the file as written: its field 0 */
		uint8_t *copy = malloc(len);

		if (!copy)
			return -ENOMEM;
		memcpy(copy, b, len);
		memcpy(copy, &h, sizeof(h));
		h.checksum = checksum(copy, len);
		free(copy);
	}
	if (h.checksum != sum)
		return -EBADMSG;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->rows = malloc((size_t)h.nrows * sizeof(*u->rows));
	if (!u->rows) {
		free(u);
		return -ENOMEM;
	}
	memcpy(u->rows, b + sizeof(h), (size_t)h.nrows * sizeof(*u->rows));
	if (!rows_valid(u->rows, h.nrows, h.span)) {
		stack_utab_free(u);
		return -EBADMSG;
	}
	u->tab.base = h.base;
	u->tab.span = h.span;
	u->tab.nrows = h.nrows;
	u->tab.shift = h.shift;
	memcpy(u->build_id, h.build_id, idlen);
	u->build_id_len = (uint32_t)idlen;
	u->fdes = h.fdes;
	u->debug_rows = h.debug_rows;
	u->go_rows = h.go_rows;
	u->from_disk = true;
	for (uint32_t i = 0; i < h.nrows; i++)
		u->by_op[u->rows[i].op & STACK_OP_MASK]++;
	switch (stack_utab_index(u)) {
	case 0:
		break;
	case -ENOMEM:
		stack_utab_free(u);
		return -ENOMEM;
	default:
		stack_utab_free(u);
		return -EBADMSG;
	}
	*out = u;
	return 0;
}

char *stack_cache_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *p = NULL;

	if (x && x[0] == '/')
		return asprintf(&p, "%s/uscope/unwind", x) < 0 ? NULL : p;
	if (home && home[0] == '/')
		return asprintf(&p, "%s/.cache/uscope/unwind", home) < 0 ? NULL : p;
	return NULL;
}

static int mkdirs(const char *dir)
{
	char *p = strdup(dir);
	int err = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s && !err; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		/* its user's alone, as the cache in it (mkstemp: 0600) */
		if (mkdir(p, 0700) && errno != EEXIST)
			err = -errno;
		*s = '/';
	}
	if (!err && mkdir(p, 0700) && errno != EEXIST)
		err = -errno;
	free(p);
	return err;
}

static char *file_name(const char *dir, const uint8_t *id, size_t idlen)
{
	size_t n = strlen(dir);
	char *p = malloc(n + 2 * idlen + 32), *q;

	if (!p)
		return NULL;
	q = p + sprintf(p, "%s/", dir);
	for (size_t i = 0; i < idlen; i++)
		q += sprintf(q, "%02x", id[i]);
	sprintf(q, ".v%u.unw", (unsigned)TABFILE_VERSION);
	return p;
}

int stack_utab_save(const struct stack_utab *u, const char *dir)
{
	char *path, *tmp = NULL;
	void *buf = NULL;
	size_t len = 0;
	int fd, err;

	if (!u->build_id_len)
		return -EINVAL;
	err = mkdirs(dir);
	if (err)
		return err;
	path = file_name(dir, u->build_id, u->build_id_len);
	if (!path || asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		free(path);
		return -ENOMEM;
	}
	err = stack_utab_encode(u, &buf, &len);
	fd = err ? -1 : mkstemp(tmp);
	if (!err && fd < 0)
		err = -errno;
	if (fd >= 0) {
		const uint8_t *p = buf;
		size_t done = 0;

		while (done < len) {
			ssize_t w = write(fd, p + done, len - done);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				err = w < 0 ? -errno : -EIO;
				break;
			}
			done += (size_t)w;
		}
		if (close(fd) && !err)
			err = -errno;
		/* readers see the old file or the whole new one */
		if (!err && rename(tmp, path))
			err = -errno;
		if (err)
			unlink(tmp);
	}
	if (err)
		log_debug("stack: cannot save the unwind table %s: %s", path, strerror(-err));
	free(buf);
	free(tmp);
	free(path);
	return err;
}

int stack_utab_load(const char *dir, const uint8_t *id, size_t idlen, struct stack_utab **out)
{
	char *path = file_name(dir, id, idlen);
	struct stat st;
	uint8_t *buf = NULL;
	size_t done = 0;
	int fd, err = 0;

	*out = NULL;
	if (!path)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(path);
		return -ENOENT;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > TABFILE_MAX)
		err = -EBADMSG;
	else if (!(buf = malloc((size_t)st.st_size)))
		err = -ENOMEM;
	while (!err && done < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + done, (size_t)st.st_size - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = -EBADMSG;
		else
			done += (size_t)r;
	}
	close(fd);
	if (!err)
		err = stack_utab_decode(buf, done, id, idlen, out);
	if (err == -EBADMSG)
		log_debug("stack: %s is no valid unwind table: rebuilt", path);
	free(buf);
	free(path);
	return err;
}

/* ---- tables by module ----------------------------------------------------- */

struct tabent {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint8_t id[STACK_BUILD_ID_MAX];
	uint32_t idlen;
	struct stack_utab *u;	/* NULL: err */
	bool owner;		/* frees u (other entries of the same build-id
				 * share it) */
	int err;
};

struct stack_tabset {
	char *dir;
	struct tabent *v;
	size_t n, cap;
};

struct stack_tabset *stack_tabset_new(const char *dir)
{
	struct stack_tabset *s = calloc(1, sizeof(*s));

	if (s && dir && !(s->dir = strdup(dir))) {
		free(s);
		return NULL;
	}
	return s;
}

void stack_tabset_free(struct stack_tabset *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].owner)
			stack_utab_free(s->v[i].u);
	free(s->v);
	free(s->dir);
	free(s);
}

static struct tabent *tabset_add(struct stack_tabset *s)
{
	if (core_reserve(s->v, s->cap, s->n + 1, 16))
		return NULL;
	memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
	return &s->v[s->n++];
}

int stack_tabset_get(struct stack_tabset *s, const char *path, const struct stack_utab **out)
{
	struct stat st;
	uint8_t id[STACK_BUILD_ID_MAX];
	struct stack_utab *u = NULL;
	struct tabent *e;
	bool fresh = false;
	int idlen, err;

	*out = NULL;
	if (stat(path, &st))
		return -errno;
	for (size_t i = 0; i < s->n; i++) {
		e = &s->v[i];
		if (e->dev == st.st_dev && e->ino == st.st_ino && e->size == st.st_size &&
		    e->mtime.tv_sec == st.st_mtim.tv_sec && e->mtime.tv_nsec == st.st_mtim.tv_nsec)
			return (*out = e->u) ? 0 : e->err;
	}
	idlen = stack_build_id(path, id, sizeof(id));
	if (idlen < 0)
		idlen = 0;
	for (size_t i = 0; idlen && i < s->n; i++) {
		e = &s->v[i];
		if (e->idlen == (uint32_t)idlen && !memcmp(e->id, id, (size_t)idlen)) {
			u = e->u;
			err = e->err;
			goto add;	/* the same build, another file */
		}
	}
	err = -ENOENT;
	if (idlen && s->dir)
		err = stack_utab_load(s->dir, id, (size_t)idlen, &u);
	if (err) {
		err = stack_utab_build(path, &u);
		if (!err && idlen && s->dir)
			stack_utab_save(u, s->dir);
	}
	fresh = !err;
add:
	e = tabset_add(s);
	if (!e) {
		if (fresh)
			stack_utab_free(u);
		return -ENOMEM;
	}
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->size = st.st_size;
	e->mtime = st.st_mtim;
	memcpy(e->id, id, (size_t)idlen);
	e->idlen = (uint32_t)idlen;
	e->err = err;
	e->u = err ? NULL : u;
	e->owner = fresh;
	*out = e->u;
	return err;
}
