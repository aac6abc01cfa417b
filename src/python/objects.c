/* Reading CPython's objects out of a process: memory, str, bytes, thread
 * states. Layouts from python_offsets (offsets.c). */
#include "python/symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"

/* ---- a live process's memory ------------------------------------------ */

static int procmem_read(void *ctx, uint64_t addr, void *dst, size_t len)
{
	struct python_procmem *pm = ctx;
	struct iovec l = {dst, len}, r = {(void *)(uintptr_t)addr, len};
	char path[64];
	ssize_t n;

	if (!len)
		return 0;
	if (pm->fd < 0) {
		n = process_vm_readv(pm->pid, &l, 1, &r, 1, 0);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0 || (errno != EPERM && errno != ENOSYS))
			return n >= 0 || errno == EFAULT || errno == EIO ? -EFAULT : -errno;
		snprintf(path, sizeof(path), "/proc/%d/mem", (int)pm->pid);
		pm->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (pm->fd < 0)
			return -errno;
	}
	if (addr > INT64_MAX)
		return -EFAULT;
	n = pread(pm->fd, dst, len, (off_t)addr);
	if (n == (ssize_t)len)
		return 0;
	return n >= 0 || errno == EIO ? -EFAULT : -errno;
}

void python_procmem_init(struct python_procmem *pm, pid_t pid, struct python_mem *mem)
{
	pm->pid = pid;
	pm->fd = -1;
	mem->read = procmem_read;
	mem->ctx = pm;
}

void python_procmem_close(struct python_procmem *pm)
{
	if (pm->fd >= 0)
		close(pm->fd);
	pm->fd = -1;
}

/* ---- str --------------------------------------------------------------- */

static uint64_t get64(const uint8_t *b, unsigned o)
{
	uint64_t v;

	memcpy(&v, b + o, 8);
	return v;
}

static size_t put_utf8(char *d, uint32_t c)
{
	if (c == 0 || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80) {
		d[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		d[0] = (char)(0xc0 | c >> 6);
		d[1] = (char)(0x80 | (c & 63));
		return 2;
	}
	if (c < 0x10000) {
		d[0] = (char)(0xe0 | c >> 12);
		d[1] = (char)(0x80 | ((c >> 6) & 63));
		d[2] = (char)(0x80 | (c & 63));
		return 3;
	}
	d[0] = (char)(0xf0 | c >> 18);
	d[1] = (char)(0x80 | ((c >> 12) & 63));
	d[2] = (char)(0x80 | ((c >> 6) & 63));
	d[3] = (char)(0x80 | (c & 63));
	return 4;
}

int python_read_str(const struct python_offsets *off, const struct python_mem *mem,
		    const struct python_types *types, uint64_t addr, char **out)
{
	uint8_t hdr[64];
	uint32_t state, kind, ascii;
	uint64_t len, data;
	uint8_t *raw;
	char *s;
	size_t o = 0;

	*out = NULL;
	if (off->str_ascii_size > sizeof(hdr))
		return -EINVAL;
	if (!addr || python_mem_read(mem, addr, hdr, off->str_ascii_size))
		return -EFAULT;
	if (types && types->unicode && get64(hdr, off->ob_type) != types->unicode)
		return -EINVAL;
	memcpy(&state, hdr + off->str_state, 4);
	len = get64(hdr, off->str_length);
	kind = (state >> off->str_kind_shift) & 7;
	ascii = state >> off->str_ascii_bit & 1;
	if (kind != 1 && kind != 2 && kind != 4)
		return -EINVAL;	/* 3.11's wchar_t-only strings (not ready) */
	if (off->str_ready_bit != 0xff && !(state >> off->str_ready_bit & 1))
		return -EINVAL;
	if (ascii && kind != 1)
		return -EINVAL;
	if (len > PYTHON_STR_MAX)
		return (int64_t)len < 0 ? -EINVAL : -E2BIG;
	if (state >> off->str_compact_bit & 1)
		data = addr + (ascii ? off->str_ascii_size : off->str_compact_size);
	else if (python_mem_read(mem, addr + off->str_compact_size, &data, 8))
		return -EFAULT;	/* a legacy string: PyUnicodeObject.data.any */
	raw = malloc(len * kind + 1);
	s = malloc(len * 4 + 1);
	if (!raw || !s) {
		free(raw);
		free(s);
		return -ENOMEM;
	}
	if (len && (!data || python_mem_read(mem, data, raw, len * kind))) {
		free(raw);
		free(s);
		return -EFAULT;
	}
	for (uint64_t i = 0; i < len; i++) {
		uint32_t c;

		if (kind == 1) {
			c = raw[i];
		} else if (kind == 2) {
			uint16_t w;

			memcpy(&w, raw + 2 * i, 2);
			c = w;
		} else {
			memcpy(&c, raw + 4 * i, 4);
		}
		o += put_utf8(s + o, c);
	}
	s[o] = 0;
	free(raw);
	*out = s;
	return 0;
}

/* ---- bytes ------------------------------------------------------------- */

int python_read_bytes(const struct python_offsets *off, const struct python_mem *mem,
		      const struct python_types *types, uint64_t addr, uint8_t **out,
		      size_t *len)
{
	uint8_t hdr[24];
	int64_t size;
	uint8_t *b;

	*out = NULL;
	*len = 0;
	if (!addr || python_mem_read(mem, addr, hdr, sizeof(hdr)))
		return -EFAULT;
	if (types && types->bytes && get64(hdr, off->ob_type) != types->bytes)
		return -EINVAL;
	size = (int64_t)get64(hdr, off->ob_size);
	if (size < 0)
		return -EINVAL;
	if (size > PYTHON_BYTES_MAX)
		return -E2BIG;
	if (!size)
		return 0;
	b = malloc((size_t)size);
	if (!b)
		return -ENOMEM;
	if (python_mem_read(mem, addr + off->bytes_sval, b, (size_t)size)) {
		free(b);
		return -EFAULT;
	}
	*out = b;
	*len = (size_t)size;
	return 0;
}

/* ---- thread states ----------------------------------------------------- */

/* The walker's own thread-list finder (walk.h), as the agent and the bpf
 * program run it. */
#define PYWALK_FN(n) obj_##n
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) \
	(python_mem_read((const struct python_mem *)(env), (addr), (dst), (len)) != 0)
#include "python/walk.h"

int python_find_tstate(const struct python_offsets *off, const struct python_mem *mem,
		       uint64_t runtime, pid_t tid, uint64_t *tstate)
{
	*tstate = 0;
	if (off->ts_native_thread_id == PYOFF_NONE)
		return -ENOTSUP;	/* (before 3.11: no TID in a thread state) */
	return python_find_tstate_by(off, mem, runtime, off->ts_native_thread_id, (uint64_t)tid,
				     tstate);
}

int python_find_tstate_by(const struct python_offsets *off, const struct python_mem *mem,
			  uint64_t runtime, uint16_t by, uint64_t id, uint64_t *tstate)
{
	struct python_tfind f;

	*tstate = 0;
	obj_tfind_start(off, runtime, &f, (void *)mem);
	for (uint32_t i = 0; i < PYTHON_TSTATE_STEPS; i++)
		if (obj_tfind_step(off, &f, by, id, (void *)mem))
			break;
	if (f.status == PYWALK_FAULT)
		return -EFAULT;
	if (f.status != PYWALK_END || !f.found)
		return -ESRCH;	/* (a list that loops ends with the steps) */
	*tstate = f.found;
	return 0;
}

int python_tss_key(const struct python_offsets *off, const struct python_mem *mem,
		   uint64_t runtime, uint32_t *key)
{
	int32_t init = 0;

	*key = 0;
	if (python_mem_read(mem, runtime + off->rt_tss_init, &init, 4) ||
	    python_mem_read(mem, runtime + off->rt_tss_key, key, 4))
		return -EFAULT;
	return init ? 0 : -ENOENT;
}
