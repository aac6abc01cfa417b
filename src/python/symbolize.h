/* Python frames as people read them: a walk's (code, instruction, flags)
 * triples (walk.h) turned into qualname, file and line, by reading the
 * process's memory afterwards; and the readers that needs: memory, strings,
 * bytes, thread states.
 *
 * Every read goes through a struct python_mem, so the same code reads a live
 * process (process_vm_readv, or /proc/PID/mem) and a test's or fuzzer's
 * buffer. Memory that is unreadable, or that holds something else than it
 * should (a freed object, a wrong address), gives an error or a wrong name,
 * never a crash, an unbounded allocation or an endless loop. */
#ifndef USC_PYTHON_SYMBOLIZE_H
#define USC_PYTHON_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "python/offsets.h"
#include "python/frame.h"

/* Reading memory: 0, or -errno (-EFAULT: not all of it is readable). */
struct python_mem {
	int (*read)(void *ctx, uint64_t addr, void *dst, size_t len);
	void *ctx;
};

static inline int python_mem_read(const struct python_mem *m, uint64_t addr, void *dst,
				  size_t len)
{
	return m->read(m->ctx, addr, dst, len);
}

/* A live process's memory: process_vm_readv, and /proc/PID/mem where that
 * is refused (a kernel without it, or a seccomp filter of ours). */
struct python_procmem {
	pid_t pid;
	int fd;			/* /proc/PID/mem once opened, else -1 */
};

void python_procmem_init(struct python_procmem *pm, pid_t pid, struct python_mem *mem);
void python_procmem_close(struct python_procmem *pm);

/* Runtime addresses of CPython's type objects; a reader checks an object's
 * ob_type against them (0: not checked). */
struct python_types {
	uint64_t code, unicode, bytes;
};

#define PYTHON_STR_MAX 4096	/* code points of a string read */
#define PYTHON_BYTES_MAX (1u << 20)

/* The str at addr as malloc'd UTF-8 (a lone surrogate or a NUL becomes
 * U+FFFD). -EINVAL: not a str (its type, a state CPython does not make),
 * -E2BIG: longer than PYTHON_STR_MAX, -EFAULT, -ENOMEM. */
int python_read_str(const struct python_offsets *off, const struct python_mem *mem,
		    const struct python_types *types, uint64_t addr, char **out);

/* The bytes object at addr: *out malloc'd (NULL when empty), *len its size.
 * -EINVAL, -E2BIG (over PYTHON_BYTES_MAX), -EFAULT, -ENOMEM. */
int python_read_bytes(const struct python_offsets *off, const struct python_mem *mem,
		      const struct python_types *types, uint64_t addr, uint8_t **out,
		      size_t *len);

/* The thread states of a runtime (_PyRuntime at runtime): the one of thread
 * tid (its native_thread_id), across every interpreter. 0, -ESRCH (no such
 * thread state), -EFAULT, -ENOTSUP (before 3.11, thread states hold no
 * TID). */
int python_find_tstate(const struct python_offsets *off, const struct python_mem *mem,
		       uint64_t runtime, pid_t tid, uint64_t *tstate);
/* ... the one whose field at offset by (ts_thread_id: its pthread_t) is
 * id. */
int python_find_tstate_by(const struct python_offsets *off, const struct python_mem *mem,
			  uint64_t runtime, uint16_t by, uint64_t id, uint64_t *tstate);

/* CPython's thread-specific key, for walk.h's tss(): 0, or -ENOENT while
 * the runtime has not made it, -EFAULT. */
int python_tss_key(const struct python_offsets *off, const struct python_mem *mem,
		   uint64_t runtime, uint32_t *key);

/* A code object, as read and kept. */
struct python_code {
	uint64_t addr;
	char *qualname, *filename;
	int firstlineno;
	int firsttraceable;	/* code units before the first traceable one */
	uint8_t *linetable;
	size_t linetable_len;
	/* what tells this code object from a later one at the same address */
	uint64_t type, qualname_p, filename_p, linetable_p;
};

/* One frame, symbolized. */
struct python_frame_info {
	const char *qualname, *filename;	/* the cache's; valid until the
						   next lookup of the same code
						   address */
	int line;		/* -1: no line */
	bool hidden;		/* incomplete: CPython's traceback does not show
				   it (its PYFRAME_ENTRY still counts) */
};

/* A symbolizer for one process: a cache of code objects by address. */
struct python_sym;

struct python_sym *python_sym_new(const struct python_offsets *off, const struct python_mem *mem,
				  const struct python_types *types);
void python_sym_free(struct python_sym *s);

/* The code object at addr, from the cache or read now. With verify, a cached
 * one is checked first (one read of the object's head): code objects live as
 * long as their function, but one freed and another made at its address
 * would differ in its type, first line, or the addresses of its qualname,
 * filename and line table (interned names are shared, so a new object of the
 * same function at the same address reads the same): then it is read again.
 * -EINVAL (not a code object), -EFAULT, -ENOMEM. */
int python_sym_code(struct python_sym *s, uint64_t addr, bool verify,
		    const struct python_code **out);

/* A walk's frame: qualname, file, line (python_linetable_line of its
 * instruction) and whether CPython hides it. */
int python_sym_frame(struct python_sym *s, const struct python_frame *f, bool verify,
		     struct python_frame_info *out);

#endif
