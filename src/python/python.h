/* Python support: CPython's own frames, read from the inside (issue 20).
 *
 * This is the one index of src/python: what exists, where, and what comes
 * next. Include it for everything, or the one header you need.
 *
 * WHAT EXISTS (part 1, the foundation)
 *
 *   offsets.h, offsets.c   The one table of CPython structure offsets, one
 *       entry per minor version (3.11, 3.12, 3.13), each value with where it
 *       comes from: the version's headers, checked against the DWARF of
 *       builds that have it (tests/unit/test_python.c checks every value on
 *       every pyenv build here), and for 3.13 against the _Py_DebugOffsets
 *       the interpreter carries (python_offsets_check_debug, at detection).
 *       struct python_offsets is plain fixed-width data: uscope copies it to
 *       the agent and to a bpf map as is. Also glibc's struct pthread offsets
 *       for the thread-specific key (2.36).
 *
 *   detect.h, detect.c     Recognising CPython in a file or a process: the
 *       file with the runtime (an executable, or libpython3.X.so when shared
 *       or embedded), its version from the exported Py_Version, _PyRuntime
 *       and the type objects' addresses (run-time ones in a process). Other
 *       versions are refused in one line ("... is CPython 3.10; uscope reads
 *       the frames of CPython 3.11, 3.12 and 3.13 only").
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
 *       base, as py-spy does. Compiled as freestanding agent code and
 *       accepted by the kernel's verifier (checked by hand for part 1).
 *
 *   linetable.h, .c        CPython's location table (co_linetable, PEP 626
 *       and 657, the same format in 3.11 to 3.13): the line of an
 *       instruction, as PyCode_Addr2Line answers.
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
 *   Tests: tests/unit/test_python.c (line tables of real 3.11-3.13 code
 *   objects against co_lines(), readers, walker and symbolizer on synthetic
 *   memory, detection, the table against DWARF), tests/unit/test_pystack.c
 *   (under ptrace, at every call of libpymark's pymark from
 *   tests/targets/pystack.py: walked and symbolized frames equal
 *   traceback.extract_stack() on Debian's python3.11 and pyenv's 3.11, 3.12
 *   and 3.13), tests/fuzz/fuzz_python.c.
 *
 * WHAT COMES NEXT
 *
 *   Part 2: $pystack in the inject agent and the bpf program. uscope detects
 *       the runtime at attach (python_detect_pid), reads the pthread key
 *       (python_tss_key) and hands struct python_offsets, the key and
 *       python_glibc to the engine. At a hit the agent or the program finds
 *       the thread's PyThreadState by the key from the thread's %fs base
 *       (the agent: rdfsbase or %fs:0x10; the bpf program: task->thread.fsbase)
 *       and walks with walk.h into the record: a count and 16-byte
 *       python_frame triples (PYTHON_FRAMES_MAX at most, cut frames said so).
 *       uscope symbolizes them with a python_sym per process while the
 *       process lives (a recording keeps the triples and, beside them, the
 *       code objects' names and tables read at record time).
 *
 *   Part 3: Python frames in $ustack: each _PyEval_EvalFrameDefault native
 *       frame is replaced by the Python frames it runs, from the innermost
 *       frame to the next PYFRAME_ENTRY one (hidden frames count as
 *       boundaries and are not shown).
 *
 *   Part 4: py: probes (py:QUALNAME, py:MODULE:QUALNAME, globs, r:py:), on
 *       inject only: the agent registers a C profile function through
 *       CPython's own API (_PyEval_SetProfile(tstate, fn, arg) for every
 *       thread state, run with the GIL held by Py_AddPendingCall; a thread
 *       started later gets it where it takes the GIL before running Python
 *       code, return probes on PyEval_AcquireThread and PyEval_RestoreThread
 *       that set it when the thread state's c_profilefunc is not ours yet),
 *       and removes it at detach the same way. The
 *       function sees PyTrace_CALL and PyTrace_RETURN with the frame, and
 *       decides by code object in C: a per-process table of code addresses
 *       with their verdict, filled at a code object's first call by matching
 *       the probes' globs (filter_eval.h's matcher) against its co_qualname
 *       and its function's __module__, and checked against reuse as the
 *       symbolizer checks its cache.
 */
#ifndef USC_PYTHON_PYTHON_H
#define USC_PYTHON_PYTHON_H

#include "python/detect.h"
#include "python/frame.h"
#include "python/linetable.h"
#include "python/offsets.h"
#include "python/symbolize.h"

#endif
