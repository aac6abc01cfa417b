/* Go support in uscope: an index. Open this first. It declares nothing:
 * include the header of the file you use.
 *
 * uscope traces Go programs as it traces C ones (same probes, same engines).
 * What is Go's own is a file in each layer it belongs to, so that no layer
 * depends on one above it (a Go folder holding them all made the ELF
 * reader, resolve and output depend on each other through it):
 *
 *   src/objfile/gofile.c     A Go program's ELF file, while src/objfile/ opens it: is
 *                        it Go (its build id note, .go.buildinfo, .gopclntab),
 *                        which Go built it (ef->go_version), and, stripped of
 *                        .symtab, its functions from Go's function table
 *                        (symbols flagged OBJFILE_SYM_GOPCLNTAB, OBJFILE_SYM_GO_ABI0
 *                        for assembly). gofile_detect, gofile_version,
 *                        gofile_load_funcs; src/objfile/file.c and symtab.c call
 *                        them.
 *   src/objfile/gopclntab.c  Go's function table read from bytes: the header of
 *                        each layout (Go 1.2 to 1.20+), every function's name,
 *                        entry and end; every read bounded (fuzz_gopclntab).
 *   src/objfile/gotypes.c    Go's runtime type descriptors in a binary: the Go
 *                        minor version and a runtime._type's name (an
 *                        interface's dynamic type).
 *   src/resolve/goabi.c  Go's register ABI at a probe: $argN, $retvalN and
 *                        $goid on a Go function bound to registers
 *                        (ABIInternal) or the stack (ABI0); $goid is
 *                        runtime.g's goid through R14; $argN:string a Go
 *                        string, its length the next word (no debug info
 *                        needed).
 *   src/output/govalue.c Go values shown as Go shows them: a string quoted, a
 *                        slice with its length, capacity and first elements,
 *                        an interface as its dynamic type and data pointer.
 *   src/debuginfo/go.c       the debug info's Go parts (with src/debuginfo/go.h): Go's
 *                        values in several words (a string, slice or
 *                        interface, marked DW_AT_go_kind) lowered to their
 *                        parts; a function's results, which Go lists among its
 *                        formal parameters, left out of its parameters; where
 *                        a Go function's parameters are read. It stays in
 *                        src/debuginfo because it works on the DWARF lowering's
 *                        own state.
 *   src/probe/           the language: $goid and $retvalN with N >= 2 parse
 *                        to FOP_GOID / FOP_RETVAL (fetch.h), Go's names
 *                        ("main.(*T).m", "net/http.(*Server).Serve") parse
 *                        as functions (parse.c); a Go value's parts and its
 *                        shown argument (USC_SHOW_GO_*, go_parts, go_elem,
 *                        go_type in probe.h).
 *   src/resolve/resolve.c  binds a function probe's $argN/$retvalN/$goid
 *                        through goabi_bind; labels events with Go's names.
 *   src/resolve/bind.c   for a command that pairs calls (RESOLVE_GO_PAIRS:
 *                        flow, latency, record, report, export), a hidden
 *                        last argument on a register-ABI Go function's sites
 *                        (goabi_regabi): its goroutine's g, R14.
 *   src/flow/flow.c      flow_ctx_of: the calls of such a site pair by that
 *                        g, not by thread (a goroutine that blocks goes on
 *                        on another thread); every sink that pairs feeds
 *                        it. The engines pair per thread, so a Go
 *                        function's latency is aggregated by uscope
 *                        (src/session/agg.c, in_place).
 *   src/output/output.c  shows a Go value through govalue_append.
 *   src/engine/          nothing Go's own for $goid or Go values: goabi_bind
 *                        makes $goid ordinary fetch instructions (R14, a
 *                        load at goid's offset) and a string's or slice's
 *                        bytes are a counted store, which the bpf program
 *                        (bpf/uscope.bpf.c) and the inject agent
 *                        (inject/agent/agent.c) run through
 *                        src/probe/fetch_eval.h, and tracefs writes as
 *                        uprobe fetchargs (src/probe/render.c). The inject
 *                        engine keys a thread by its fs base when it is not
 *                        glibc's, as in a Go program (INJ_KEY_FSBASE,
 *                        inject/image.c).
 *   src/stack/frames.c   names a Go frame from .gopclntab's functions too
 *                        (through objfile_func_at).
 *   Return probes sit on the return instructions (src/resolve/shape.c,
 *   src/x86/analyze.c), for Go's sake: with the return address swapped, as
 *   uretprobes do, Go's runtime dies copying a goroutine's stack
 *   ("unexpected return pc").
 *
 * Tests: tests/unit/test_gopclntab.c (gofile, gopclntab, gotypes on Go
 * binaries built at run time, tests/unit/fixtures/go/build.sh),
 * tests/unit/test_govalue.c, tests/fuzz/fuzz_gopclntab.c, tests/e2e/test_go.py
 * (and Go cases in test_inject.py, test_returns.py); the Go targets are
 * tests/targets/goctl and gogrow. */
#ifndef USC_GO_GO_H
#define USC_GO_GO_H
#endif
