/* What walking Python frames costs in the process, as the inject agent will
 * do it for $pystack (issue 20's target: 200 ns a hit): Debian's libpython3.11
 * embedded, a Python recursion DEPTH deep calls walk(), which walks its own
 * thread's frames ITER times with src/python/walk.h, two ways:
 *   - loads: memory read with plain loads (the thread walks its own chain);
 *   - syscall: memory read with process_vm_readv, as the agent's
 *     read_user() reads for fetch arguments today;
 * finding the thread state by CPython's pthread key from %fs, as the agent
 * would. Prints ns a walk and a frame.
 *
 *   cc -O2 -Isrc $(/usr/bin/python3.11-config --includes) bench/pywalk.c \
 *      src/python/offsets.c src/core/log.c -L/usr/lib/x86_64-linux-gnu \
 *      -lpython3.11 -o build/pywalk && build/pywalk
 *
 * Here (2 cores, kernel 6.18): loads about 20 ns a frame plus 40 ns (a
 * 12-frame walk 240 ns); process_vm_readv about 6 us a frame.
 */
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "python/offsets.h"

static int load_read(void *dst, uint64_t addr, size_t len)
{
	memcpy(dst, (const void *)(uintptr_t)addr, len);
	return 0;
}

static int sys_read(void *dst, uint64_t addr, size_t len)
{
	struct iovec l = {dst, len}, r = {(void *)(uintptr_t)addr, len};

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)len;
}

#define PYWALK_FN(n) ld_##n
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) ((void)(env), load_read((dst), (addr), (len)))
#include "python/walk.h"
#define PYWALK_FN(n) sc_##n
#define PYWALK_INLINE static inline
#define PYWALK_READ(env, dst, addr, len) ((void)(env), sys_read((dst), (addr), (len)))
#include "python/walk.h"

static const struct python_offsets *off;
static uint32_t key;

static uint64_t fsbase(void)
{
	uint64_t v;

	__asm__ volatile("mov %%fs:0, %0" : "=r"(v));	/* tcbhead_t.tcb: itself */
	return v;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static PyObject *walk(PyObject *self, PyObject *args)
{
	struct python_frame out[PYTHON_FRAMES_MAX];
	struct python_walk w = {0, 0, PYWALK_MORE};
	long iter;
	uint64_t ts = 0;
	double t0, t1, t2;

	(void)self;
	if (!PyArg_ParseTuple(args, "l", &iter))
		return NULL;
	t0 = now();
	for (long i = 0; i < iter; i++) {
		ld_tss(python_glibc_offsets(), fsbase(), key, &ts, NULL);
		ld_walk(off, ts, &w, out, PYTHON_FRAMES_MAX, NULL);
	}
	t1 = now();
	for (long i = 0; i < iter / 100; i++) {
		sc_tss(python_glibc_offsets(), fsbase(), key, &ts, NULL);
		sc_walk(off, ts, &w, out, PYTHON_FRAMES_MAX, NULL);
	}
	t2 = now();
	if (ts != (uint64_t)(uintptr_t)PyThreadState_Get() || w.status != PYWALK_END)
		return PyErr_Format(PyExc_RuntimeError, "walk: wrong thread state or status %u",
				    w.status);
	return Py_BuildValue("(kdd)", (unsigned long)w.n, (t1 - t0) / iter,
			     (t2 - t1) / (iter / 100));
}

static PyMethodDef methods[] = {{"walk", walk, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "pywalk", NULL, -1, methods,
				 NULL, NULL, NULL, NULL};

static PyObject *init(void)
{
	return PyModule_Create(&mod);
}

int main(void)
{
	extern const unsigned long Py_Version;
	extern char _PyRuntime[];

	PyImport_AppendInittab("pywalk", init);
	Py_Initialize();
	off = python_offsets_for((uint32_t)Py_Version);
	if (!off)
		return 1;
	memcpy(&key, _PyRuntime + off->rt_tss_key, 4);
	return PyRun_SimpleString(
		"import pywalk\n"
		"def down(n, it):\n"
		"    return down(n - 1, it) if n else pywalk.walk(it)\n"
		"for depth in (1, 10, 50):\n"
		"    n, ld, sc = down(depth, 200000)\n"
		"    print('%3d frames: loads %6.0f ns a walk (%4.1f a frame), process_vm_readv '\n"
		"          '%7.0f ns a walk' % (n, ld, ld / n, sc))\n");
}
