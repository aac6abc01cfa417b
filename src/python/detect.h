/* Recognising CPython in a binary or a process: the file that holds the
 * runtime (an executable that links it statically, as Debian's
 * /usr/bin/python3.11, or libpython3.X.so when the interpreter is shared or
 * embedded), its version from the exported Py_Version (3.11 and later:
 * PY_VERSION_HEX), and where _PyRuntime and the type objects are.
 *
 * Only .dynsym is needed (these symbols are exported, stripped or not). */
#ifndef USC_PYTHON_DETECT_H
#define USC_PYTHON_DETECT_H

#include <stdint.h>
#include <sys/types.h>

#include "python/offsets.h"
#include "python/symbolize.h"

/* What py: probes call and compare with (exported by every supported
 * version); 0: not found. */
struct python_api {
	uint64_t set_profile;		/* _PyEval_SetProfile(tstate, func, obj) */
	uint64_t add_pending;		/* Py_AddPendingCall(func, arg) */
	uint64_t none, true_, false_;	/* _Py_NoneStruct, _Py_TrueStruct, _Py_FalseStruct */
	uint64_t long_type, bool_type;	/* PyLong_Type, PyBool_Type */
	/* 3.12 and later: sys.monitoring's functions called from C */
	uint64_t sys_getobject;		/* PySys_GetObject(name): borrowed */
	uint64_t call_method;		/* PyObject_CallMethod(obj, name, fmt, ...) */
	uint64_t getattr;		/* PyObject_GetAttrString(obj, name) */
	uint64_t cmethod_new;		/* PyCMethod_New(def, self, module, cls) */
	uint64_t incref, decref;	/* Py_IncRef, Py_DecRef */
	uint64_t err_fetch, err_restore, err_clear;	/* PyErr_Fetch, _Restore, _Clear */
	uint64_t long_as_long;		/* PyLong_AsLong */
	uint64_t tstate_get;		/* PyThreadState_GetUnchecked (3.13 on) */
	/* 3.11: py: probes' entries through a PEP 523 frame evaluator */
	uint64_t eval_default;		/* _PyEval_EvalFrameDefault */
	uint64_t eval_set, eval_get;	/* _PyInterpreterState_{Set,Get}EvalFrameFunc */
};

struct python_runtime {
	uint32_t version;		/* Py_Version */
	const struct python_offsets *off;	/* the table's entry, or own */
	struct python_offsets own;	/* built from the interpreter's
					   _Py_DebugOffsets (debugoffs.h) */
	char *path;			/* the file with the runtime */
	/* addresses: link-time ones for a file, run-time ones in a process */
	uint64_t runtime;		/* _PyRuntime */
	struct python_types types;	/* PyCode_Type, PyUnicode_Type, PyBytes_Type */
	struct python_api api;
	uint64_t bias;			/* run-time - link-time addresses (a process) */
	/* the process's glibc's struct pthread, where uscope knows it (the
	 * glibc it was read from: python_glibc_offsets); zero otherwise (a
	 * container's other glibc, musl, a file): then a thread's state is
	 * found in its interpreter's thread list, not by CPython's key */
	struct python_glibc glibc;
};

/* A file: 0 when it holds a CPython runtime uscope reads; -ENOENT when it
 * holds none (not logged: an answer), -ENOTSUP for another CPython (one
 * line says which version, and which uscope reads), -EPROTO for a 3.13 or
 * later whose _Py_DebugOffsets disagree with the table or are not laid out
 * as uscope reads them, or -errno. With USCOPE_PY_DEBUG_OFFSETS=1 (or for
 * a version the table lacks) off is built from those debug offsets. */
int python_detect_file(const char *path, struct python_runtime *rt);
/* The same, saying nothing (not even of another version). */
int python_find_file(const char *path, struct python_runtime *rt);
/* A program's CPython: its own runtime, or that of a libpython it links
 * (DT_NEEDED); as python_find_file when quiet, else python_detect_file. */
int python_find_linked(const char *exe, struct python_runtime *rt, bool quiet);

/* A process: its executable, then each mapped libpython*, as above, with
 * run-time addresses. -ESRCH if it has gone. */
int python_detect_pid(pid_t pid, struct python_runtime *rt);
/* The same, saying nothing (of a process with no CPython, -ENOENT, nor of
 * another version): a process of a traced tree that runs something else. */
int python_find_pid(pid_t pid, struct python_runtime *rt);

void python_runtime_free(struct python_runtime *rt);

/* System-wide: the CPython runtimes a system has, under root (a
 * directory, a "/proc/PID/root", or NULL: the host's): the executables
 * python3.X in /usr/local/bin, /usr/bin and /bin, and the libpython3.X.so
 * of /usr/local/lib, /usr/lib/x86_64-linux-gnu, /usr/lib and
 * /lib/x86_64-linux-gnu, each file once (by device and inode), those
 * uscope reads. The count (*out malloc'd, paths under root: free with
 * python_runtimes_free), or -errno. */
ssize_t python_runtimes_under(const char *root, char ***out);
void python_runtimes_free(char **v, size_t n);

#endif
