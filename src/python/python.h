/* Python support: CPython's own frames, read from the inside (issue 20;
 * 3.8 to 3.15 and containers: issue 38).
 *
 * This is the one index of src/python: what exists, where, and what comes
 * next. Include it for everything, or the one header you need.
 *
 * WHAT EXISTS (part 1, the foundation)
 *
 *   offsets.h, offsets.c   The one table of CPython structure offsets, one
 *       entry per minor version (3.8 to 3.15), each value with where it
 *       comes from: the version's headers, checked against the DWARF of
 *       builds that have it (tests/unit/test_python.c checks every value on
 *       every pyenv build here, 3.8 to 3.13), and from 3.13 against the
 *       _Py_DebugOffsets the interpreter carries (at detection). 3.8 to
 *       3.10 (PYOFF_FRAMEOBJ): frames are PyFrameObjects (f_back, f_code,
 *       f_lasti), co_name stands for co_qualname, co_varnames for
 *       co_localsplusnames, older dicts, a line table of another format
 *       (lt_format).
 *       python_eval_sees_every_call: whether a PEP 523 evaluator sees every
 *       call of a version (not 3.11.0 to 3.11.3: gh-104405; the profile
 *       function counts py: probes there, engine/inject/python.c).
 *       struct python_offsets is plain fixed-width data: uscope copies it to
 *       the agent and to a bpf map as is. Also glibc's struct pthread offsets
 *       for the thread-specific key (2.36).
 *
 *   detect.h, detect.c     Recognising CPython in a file or a process: the
 *       file with the runtime (an executable, or libpython3.X.so when shared
 *       or embedded), its version from the exported Py_Version, _PyRuntime
 *       and the type objects' addresses (run-time ones in a process). Other
 *       versions are refused in one line ("... is CPython 3.7; uscope reads
 *       the frames of CPython 3.8 to 3.15 only"); before 3.11 (no
 *       Py_Version) the version is told by what the runtime exports. 3.14
 *       and 3.15 are walked with their own _Py_DebugOffsets (debugoffs.h)
 *       over their table entries, which give what they do not carry and
 *       must agree with them where both have a field. A process: its
 *       executable among its mappings by device and inode, every file
 *       through /proc/PID/root (a container's); its glibc's struct pthread
 *       where uscope has read it (2.36), else a thread's state is found in
 *       the thread list, not by CPython's key. System-wide: the CPythons
 *       under a root (python_runtimes_under).
 *
 *   frame.h, walk.h        The frame walker, written once, in the way of
 *       probe/fetch_eval.h: the includer says how memory is read and names
 *       the functions. From a thread state (tstate->cframe->current_frame;
 *       tstate->current_frame in 3.13) along _PyInterpreterFrame.previous,
 *       innermost first, it records per frame (code address, instruction
 *       offset, flags): 16 bytes, no string read. PYFRAME_ENTRY marks where
 *       C entered the evaluator (is_entry in 3.11, the C-stack shim in 3.12
 *       and 3.13, which is skipped). One read a frame; bounded steps; the
 *       step function is a bpf_loop callback as is. tss() finds a thread's
 *       PyThreadState through CPython's pthread key from the thread's %fs
 *       base, as py-spy does; tfind() in its interpreter's thread list, by
 *       TID or pthread_t (3.14, whose debug offsets do not carry the key). Compiled as freestanding agent code and
 *       accepted by the kernel's verifier (checked by hand for part 1).
 *
 *   linetable.h, .c        CPython's location table (co_linetable, PEP 626
 *       and 657, the same format in 3.11 to 3.15): the line of an
 *       instruction, as PyCode_Addr2Line answers; 3.8's and 3.9's co_lnotab
 *       and 3.10's co_linetable made such tables (one reader after that).
 *
 *   launch.h, launch.c     The CPython a COMMAND launches without being it:
 *       env, a pyenv shim, a shell script's exec, unshare, chroot (the
 *       root's CPython).
 *
 *   symbolize.h, objects.c, symbolize.c   Reading a process afterwards:
 *       memory (process_vm_readv, or /proc/PID/mem), str as UTF-8 (compact
 *       ASCII, latin-1, UCS-2, UCS-4, legacy), bytes, thread states by TID,
 *       the pthread key; and a per-process cache of code objects by address
 *       (qualname, filename, first line, line table, _co_firsttraceable)
 *       that turns a walk's triples into qualname, file and line, hiding the
 *       incomplete frames traceback hides. A cached code object is checked
 *       on request against the object's head (type, first line, the
 *       addresses of its names and table), which a freed-and-reused address
 *       changes.
 *
 *   Tests: tests/unit/test_py314.c (a synthetic 3.14.0 runtime, walked
 *   through its debug offsets), tests/unit/test_python.c (line tables of real 3.8-3.13 code
 *   objects against co_lines(), readers, walker and symbolizer on synthetic
 *   memory, detection, the table against DWARF), tests/unit/test_pystack.c
 *   (under ptrace, at every call of libpymark's pymark from
 *   tests/targets/pystack.py: walked and symbolized frames equal
 *   traceback.extract_stack() on Debian's python3.11 and pyenv's 3.11, 3.12
 *   and 3.13), tests/fuzz/fuzz_python.c.
 *
 * WHERE THE REST LIVES (each in its layer; this header indexes them)
 *
 *   names.h, names.c   Code objects and frames by name per process, told
 *       by reading the process, by the inject agent's copies and by
 *       recordings (REC_PYCODE); a stack's Python frames as interned
 *       locations ("qualname (file:line)").
 *   $pystack: the probe language's FOP_PYSTACK (probe/fetch.h); walked with
 *       walk.h in the inject agent (engine/inject/agent/python.c, the
 *       thread state by CPython's key from the thread's %fs base) and in the
 *       bpf program (engine/bpf/uscope.bpf.c, task->thread.fsbase), stored
 *       as python_frame triples (frame.h), named by session/python.c.
 *       System-wide: session/pysystem.c (the bpf program told of each
 *       process's CPython at the start or at its first hit, PYWALK_NOTYET
 *       before).
 *   Python frames in $ustack: a $ustack site gets a hidden $pystack
 *       (session/python.c) and stack_splice_python (stack/pysplice.c) puts
 *       them in place of each _PyEval_EvalFrameDefault frame, or of a part
 *       split off it that a stripped file names not (resolve/shape.h).
 *   py: probes (py:QUALNAME, py:MODULE:QUALNAME, globs, r:py:), inject
 *       only, CPython 3.8 to 3.15 (system-wide too: a site in each CPython
 *       under the root, resolve/python.c). 3.12 and later go through sys.monitoring
 *       (PEP 669): the agent claims a tool id and registers C callbacks
 *       through sys.monitoring's own functions, called from C
 *       (agent/python.c, "sys.monitoring"), first at PyEval_EvalCode's entry
 *       (a hidden site: before a script's first line) or by a pending call
 *       (-p). 3.8 to 3.11: resolve/python.c
 *       makes their sites; the agent (engine/inject/agent/python.c) sets a C
 *       profile function through CPython's own API (_PyEval_SetProfile for
 *       every thread state, run with the GIL held by Py_AddPendingCall; a
 *       thread started later gets it at the returns of PyEval_AcquireThread
 *       and PyEval_RestoreThread, hidden sites) and takes it out at detach
 *       the same way (engine/inject/python.c); it decides by code object,
 *       once per code object, matching the probes' globs against
 *       co_qualname and the function's __module__; sink/python.c names the
 *       events after the Python function.
 */
#ifndef USC_PYTHON_PYTHON_H
#define USC_PYTHON_PYTHON_H

#include "python/detect.h"
#include "python/frame.h"
#include "python/linetable.h"
#include "python/offsets.h"
#include "python/symbolize.h"

#endif
