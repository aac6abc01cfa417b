# uscope - dynamic tracer for Linux user-space programs.
#   make          build ./uscope
#   make check    install dependencies, build, run every test
#   make demo     install dependencies, build, trace the bundled demo
#   make bench    run the benchmarks
#   make static   build/static/uscope: one file for any x86-64 distribution (doc/install.md)
#   make install PREFIX=/usr/local   (uscope, its man pages and bash completion,
#                                     libuscope-sdt and its Python module)

VERSION  := 0.1.0
PREFIX   ?= /usr/local
CC       ?= cc
PKGS     := libtracefs libtraceevent libelf libdw libbpf zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lZydis -liberty
WERROR   ?= $(if $(CI),-Werror,)
CFLAGS   ?= -O2 -g
BASE_CFLAGS := -std=gnu11 -Wall -Wextra $(WERROR) -Isrc -I. $(PKG_CFLAGS) \
	-DUSC_VERSION='"$(VERSION)"' -D_GNU_SOURCE
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRCS := $(shell find src -name '*.c' ! -name '*.bpf.c' ! -path '*/agent/*' | sort)
CLI_SRCS := $(wildcard cli/*.c)

# Two builds of the same sources: build/rel (what users run) and build/san
# (ASan+UBSan, what the tests run).
define objs
$(patsubst %.c,$(1)/%.o,$(2))
endef
REL_LIB_OBJS := $(call objs,build/rel,$(LIB_SRCS))
REL_CLI_OBJS := $(call objs,build/rel,$(CLI_SRCS))
SAN_LIB_OBJS := $(call objs,build/san,$(LIB_SRCS))
SAN_CLI_OBJS := $(call objs,build/san,$(CLI_SRCS))

all: uscope sdt

# The bpf engine's kernel program, compiled at build time (no compiler is
# needed at run time) and embedded as a libbpf skeleton.
build/bpf/uscope.bpf.o: src/engine/bpf/uscope.bpf.c $(wildcard src/engine/bpf/prog/*.h) \
		src/engine/bpf/bpf_shared.h src/probe/fetch.h \
		src/probe/fetch_eval.h src/probe/filter_eval.h src/agg/agg_shared.h \
		src/python/walk.h src/python/frame.h src/python/offsets.h
	@mkdir -p $(dir $@)
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu -Isrc -c $< -o $@
build/bpf/uscope.skel.h: build/bpf/uscope.bpf.o
	bpftool gen skeleton $< name uscope_bpf > $@.tmp && mv $@.tmp $@
# Every object of the bpf engine may include the skeleton: with make -j they
# must wait for it (a clean CI build compiled agg.c first and failed).
BPF_ENGINE_SRCS := $(filter src/engine/bpf/%.c,$(LIB_SRCS))
$(call objs,build/rel,$(BPF_ENGINE_SRCS)) $(call objs,build/san,$(BPF_ENGINE_SRCS)): build/bpf/uscope.skel.h
BASE_CFLAGS += -Ibuild/bpf
# The inject engine's gate (src/engine/inject/gate.c): a program of its own.
# uscope script's program in the kernel: an object of its own (the engine's
# load time and kernel floor stay), with the executor every engine shares.
build/bpf/script.bpf.o: src/engine/bpf/script.bpf.c src/engine/bpf/script_shared.h \
		src/engine/bpf/bpf_shared.h src/script/vm.h src/script/prog.h src/probe/fetch.h \
		src/probe/fetch_eval.h src/agg/agg_shared.h
	@mkdir -p $(dir $@)
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu -Isrc -c $< -o $@
build/bpf/script_bpf.skel.h: build/bpf/script.bpf.o
	bpftool gen skeleton $< name uscope_script_bpf > $@.tmp && mv $@.tmp $@
$(call objs,build/rel,$(BPF_ENGINE_SRCS)) $(call objs,build/san,$(BPF_ENGINE_SRCS)): build/bpf/script_bpf.skel.h
build/bpf/gate.bpf.o: src/engine/inject/gate.bpf.c src/engine/inject/gate_shared.h
	@mkdir -p $(dir $@)
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu -Isrc -c $< -o $@
build/bpf/gate.skel.h: build/bpf/gate.bpf.o
	bpftool gen skeleton $< name inj_gate_bpf > $@.tmp && mv $@.tmp $@
$(call objs,build/rel,src/engine/inject/gate.c) $(call objs,build/san,src/engine/inject/gate.c): build/bpf/gate.skel.h

# The inject engine's agent: freestanding code the tracer copies into the
# traced process, so no libc, no unwind tables, no jump tables, no vector
# registers, and no relocation left after a link at address 0 (checked).
AGENT_CFLAGS := -std=gnu11 -Wall -Wextra $(WERROR) -Isrc -O2 -fPIC -ffreestanding \
	-fno-builtin -fno-stack-protector -fno-asynchronous-unwind-tables -fno-unwind-tables \
	-fno-tree-loop-distribute-patterns -mgeneral-regs-only \
	-fcf-protection=none -fvisibility=hidden -fno-sanitize=all
AGENT_SRCS := src/engine/inject/agent/agent.c src/engine/inject/agent/tracer.c \
	src/engine/inject/agent/ustack.c src/engine/inject/agent/python.c \
	src/engine/inject/agent/pymon.c src/engine/inject/agent/pyeval.c src/engine/inject/agent/fast.c \
	src/engine/inject/agent/script.c
AGENT_OBJS := $(patsubst src/engine/inject/agent/%.c,build/inject/%.o,$(AGENT_SRCS))
build/inject/agent.bin: $(AGENT_SRCS) $(wildcard src/engine/inject/agent/*.h) src/engine/inject/agent/agent.lds \
		src/engine/inject/inject_shared.h src/engine/inject/objset.h src/probe/fetch.h src/probe/fetch_eval.h \
		src/probe/filter_eval.h src/agg/agg_shared.h src/python/frame.h src/python/walk.h \
		src/python/offsets.h src/stack/stack_walk.h src/engine/inject/script_shared.h \
		src/script/prog.h src/script/vm.h src/script/table.h
	@mkdir -p $(dir $@)
	@set -e; for f in $(AGENT_SRCS); do \
		echo "$(CC) $(AGENT_CFLAGS) -c $$f"; \
		$(CC) $(AGENT_CFLAGS) -c $$f -o build/inject/$$(basename $${f%.c}).o; done
	@if readelf -rW $(AGENT_OBJS) | \
		awk '/^Relocation section/ { sec = $$3 } \
		/R_X86_64_(64|32|32S) / && index(sec, "agent_hdr") == 0 { bad = 1 } \
		END { exit !bad }'; then \
		echo "the agent has absolute relocations: it must be position-independent" >&2; \
		exit 1; fi
	ld -T src/engine/inject/agent/agent.lds -o build/inject/agent.elf $(AGENT_OBJS)
	objcopy -O binary build/inject/agent.elf $@
build/rel/src/engine/inject/blob.o build/san/src/engine/inject/blob.o: build/inject/agent.bin

build/rel/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SAN_FLAGS) -MMD -MP -c $< -o $@

build/rel/libuscope.a: $(REL_LIB_OBJS)
	@rm -f $@; ar rcs $@ $^
build/san/libuscope.a: $(SAN_LIB_OBJS)
	@rm -f $@; ar rcs $@ $^

uscope: $(REL_CLI_OBJS) build/rel/libuscope.a
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)
build/san/uscope: $(SAN_CLI_OBJS) build/san/libuscope.a
	$(CC) $(SAN_FLAGS) -o $@ $^ $(PKG_LIBS)

# ---- make static: one executable for any x86-64 distribution (issue 37) ----
# build/static/uscope: ./uscope's own objects (build/rel) linked -static-pie
# with the static archive of every library it uses, glibc's included, so it
# needs nothing of the machine it runs on but the kernel: the BPF programs
# (skeletons) and the inject agent (blob.c) are in the objects already. It is
# not the default build: ./uscope links the libraries dynamically as a
# distribution's package would (their security updates apply; the tests'
# ASan build cannot be static anyway), and the static link needs a Zydis
# archive Debian does not ship, built once a machine from Debian's source
# (scripts/static-deps.sh, which downloads it). glibc's dlopen and NSS are
# wrapped (src/core/static.c) and the link checked (scripts/static-link.sh).
# What the static binary gives up, and how to copy it to a server:
# doc/install.md.
STATIC_PKGS := libtracefs libtraceevent libelf libdw libbpf zlib
STATIC_LIBS = build/static/libZydis.a $(shell pkg-config --static --libs $(STATIC_PKGS)) -liberty
STATIC_WRAP := -Wl,--wrap=dlopen,--wrap=getaddrinfo
static: build/static/uscope
build/static/libZydis.a: scripts/static-deps.sh
	bash scripts/static-deps.sh build/static
build/static/uscope: $(REL_CLI_OBJS) build/rel/src/core/static.o build/rel/libuscope.a \
		build/static/libZydis.a scripts/static-link.sh
	bash scripts/static-link.sh $@ $(CC) $(CFLAGS) -static-pie -o $@ $(REL_CLI_OBJS) \
		build/rel/src/core/static.o build/rel/libuscope.a $(STATIC_LIBS) $(STATIC_WRAP)
# The e2e tests run it in other distributions' roots (tests/e2e/test_static.py);
# make bench compares it with ./uscope (bench/static.py).
e2e bench: build/static/uscope
.PHONY: static
# ---- end of make static ----

# ---- libuscope-sdt: USDT probes a program defines at run time (sdt/) ----
# A shared library that exports its public API only (-fvisibility=hidden,
# USC_SDT_API on the API), a static one from the same objects, and a
# sanitized static build for the unit tests.
SDT_SRCS := $(wildcard sdt/src/*.c)
SDT_SONAME := libuscope-sdt.so.0
SDT_CFLAGS := -std=gnu11 -Wall -Wextra $(WERROR) -D_GNU_SOURCE -Isdt/include -fPIC \
	-fvisibility=hidden
SDT_LIBS := -lelf
SDT_OBJS := $(patsubst sdt/src/%.c,build/sdt/obj/%.o,$(SDT_SRCS))
SDT_SAN_OBJS := $(patsubst sdt/src/%.c,build/san/sdt/%.o,$(SDT_SRCS))

build/sdt/obj/%.o: sdt/src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(SDT_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
build/san/sdt/%.o: sdt/src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(SDT_CFLAGS) -O1 -g $(SAN_FLAGS) -MMD -MP -c $< -o $@

build/sdt/libuscope-sdt.so: $(SDT_OBJS)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SDT_SONAME) -Wl,-z,defs -o $@ $^ $(SDT_LIBS)
	ln -sf libuscope-sdt.so build/sdt/$(SDT_SONAME)
build/sdt/libuscope-sdt.a: $(SDT_OBJS)
	@rm -f $@; ar rcs $@ $^
build/san/sdt/libuscope-sdt.a: $(SDT_SAN_OBJS)
	@rm -f $@; ar rcs $@ $^

sdt: build/sdt/libuscope-sdt.so build/sdt/libuscope-sdt.a

# ---- tests -------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,build/san/tests/%,$(UNIT_SRCS))
build/san/tests/%: tests/unit/%.c build/san/libuscope.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SAN_FLAGS) -Itests/unit -MMD -MP -o $@ $< build/san/libuscope.a $(PKG_LIBS) -lcmocka

# Programs the e2e tests run (tests/tools): unwcheck compares the stack
# walker with libdw's unwinder on a traced program's stacks.
# bpfwalk runs the walker in a bpf program (walk.bpf.o) against the same
# walker in user space.
TOOL_BINS := build/san/tests/unwcheck build/san/tests/bpfwalk build/tools/walk.bpf.o
build/san/tests/unwcheck: tests/tools/unwcheck.c build/san/libuscope.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SAN_FLAGS) -MMD -MP -o $@ $< build/san/libuscope.a $(PKG_LIBS)
build/san/tests/bpfwalk: tests/tools/bpfwalk.c build/san/libuscope.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SAN_FLAGS) -MMD -MP -o $@ $< build/san/libuscope.a $(PKG_LIBS)
build/tools/walk.bpf.o: tests/tools/walk.bpf.c src/stack/stack_walk.h src/probe/fetch.h
	@mkdir -p $(dir $@)
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu -Isrc -c $< -o $@

# libuscope-sdt's tests: the sanitized library, read back with uscope's
# own ELF and USDT code; sdt_fastpath.c is built as a program would be
# (-O2, no sanitizers) for the test to read its machine code.
build/sdt/test/sdt_fastpath.o: tests/unit/sdt_fastpath.c sdt/include/uscope/sdt.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -Wall -Wextra $(WERROR) -O2 -Isdt/include -c $< -o $@
build/san/tests/test_sdt: tests/unit/test_sdt.c build/san/libuscope.a build/san/sdt/libuscope-sdt.a \
		build/sdt/test/sdt_fastpath.o
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -Isdt/include -O1 -g $(SAN_FLAGS) -Itests/unit -MMD -MP -o $@ $< \
		build/sdt/test/sdt_fastpath.o build/san/sdt/libuscope-sdt.a build/san/libuscope.a \
		$(PKG_LIBS) -lcmocka

FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS))
FUZZ_LIB_SRCS := src/core/log.c src/core/grow.c $(wildcard src/probe/*.c) src/usdt/usdt.c src/objfile/file.c src/objfile/symtab.c \
	src/objfile/symbols.c src/objfile/sections.c src/objfile/fde.c src/objfile/demangle.c src/objfile/gofile.c \
	src/objfile/gopclntab.c
build/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(BASE_CFLAGS) -O1 -g -fsanitize=fuzzer,address,undefined -o $@ $^ -lelf -ldw -liberty \
		$(FUZZ_FLAGS)
# The recording reader, the engines' decoders it calls and the output; the
# reader's mmap becomes an exact-size heap copy ASan watches; undefined
# behaviour is a failure, as in build/san.
build/fuzz/fuzz_record: src/record/reader.c src/record/buf.c src/core/tsc.c \
	src/engine/inject/inject_raw.c src/engine/bpf/bpf_raw.c src/output/output.c src/output/govalue.c \
	src/python/linetable.c
build/fuzz/fuzz_record: FUZZ_FLAGS := -fno-sanitize-recover=undefined -Wl,--wrap=mmap,--wrap=munmap
# The folded-stack parser, the flame graph's layout and its SVG.
build/fuzz/fuzz_flame: src/flame/flame.c
# The metrics server's request parser and Accept negotiation.
build/fuzz/fuzz_http: src/serve/http.c
# Python's location tables, strs, bytes, frame walks and symbolization.
build/fuzz/fuzz_python: src/python/linetable.c src/python/objects.c src/python/offsets.c src/python/debugoffs.c \
	src/python/symbolize.c
# Go's function table reader, and its pcsp values as unwind rows.
build/fuzz/fuzz_gopclntab: src/stack/unwgo.c
# uscope script's passes, text to bytecode, and the executor on what they make.
build/fuzz/fuzz_script: src/script/ast.c src/script/compile.c src/script/diag.c src/script/fmt.c \
	src/script/fuse.c \
	src/script/lex.c src/script/lower.c src/script/parse.c src/script/probes.c src/script/script.c \
	src/script/sema.c src/script/sema_call.c
# The unwind-table cache file's reader, and the walker over what it accepts.
build/fuzz/fuzz_unwtab: src/stack/unwcache.c src/stack/unwtab.c src/stack/unwgo.c src/stack/unwimage.c \
	src/stack/unwjit.c \
	src/objfile/modules.c \
	src/objfile/procroot.c src/ns/root.c src/ns/pids.c src/core/proc.c
FUZZ_SECONDS ?= 20

targets: sdt
	$(MAKE) -C tests/targets

deps:
	@bash scripts/deps.sh

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# A crash or sanitizer report fails the run; its input is kept in build/fuzz/.
fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do n=$$(basename $$f); mkdir -p build/fuzz/corpus-$$n; \
	  echo "== $$n ($(FUZZ_SECONDS)s)"; \
	  if ! $$f -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=build/fuzz/$$n- \
	      build/fuzz/corpus-$$n tests/fuzz/seeds/$$n > build/fuzz/$$n.log 2>&1; then \
	    tail -n 40 build/fuzz/$$n.log; echo "fuzz: $$n failed"; exit 1; fi; \
	  tail -n 1 build/fuzz/$$n.log; done

# Debian's python3, which has python3-pytest (a python3 earlier on PATH,
# e.g. from pyenv, may not).
PYTHON ?= /usr/bin/python3
e2e: uscope build/san/uscope sdt targets $(TOOL_BINS)
	USCOPE=$(CURDIR)/build/san/uscope $(PYTHON) -m pytest -q tests/e2e

# The kernel matrix (tests/vm): Debian's 6.1, 6.12 and 5.10 kernels booted
# under QEMU, the README's tour on every engine inside each (about 5 minutes
# once the kernels and the guest's root are cached in /var/cache/uscope).
build/demo/server: demo/server.c
	@mkdir -p $(dir $@)
	cc -O1 -g -o $@ $<

vm: uscope targets build/demo/server
	$(PYTHON) -m pytest -q tests/vm

check: deps
	$(MAKE) uscope build/san/uscope
	$(MAKE) unit
	$(MAKE) fuzz
	$(MAKE) e2e
	$(MAKE) vm

demo: deps
	$(MAKE) uscope targets
	@bash scripts/demo.sh

# The stack walker's cost and its tables' (bench/unwalk.c, run by
# bench/unwtab.py in make bench): built as Debian builds, no frame pointers.
build/rel/bench/unwalk: bench/unwalk.c build/rel/libuscope.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -g -fomit-frame-pointer -o $@ $< build/rel/libuscope.a $(PKG_LIBS)

bench: uscope sdt targets build/rel/bench/unwalk
	@bash scripts/deps.sh bench
	@bash bench/run.sh

# libuscope-sdt: the library (soname and link), the static one, the header,
# a pkg-config file, and the Python module with the installed library's path
# written in, in the directory this Python looks in for PREFIX.
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PYTHON_SITE ?= $(shell $(PYTHON) sdt/python/site_dir.py $(PREFIX))
# The man pages (doc/man, written by hand) and the bash completion, under
# PREFIX like everything else: bash-completion also looks in
# $XDG_DATA_DIRS/bash-completion/completions, which holds PREFIX/share for the
# usual prefixes (/usr, /usr/local, and ~/.local through XDG_DATA_HOME).
# BASHCOMPDIR=$(pkg-config --variable=completionsdir bash-completion) puts it
# where the system's bash-completion keeps its own.
MANDIR ?= $(PREFIX)/share/man
MAN1 := $(wildcard doc/man/*.1)
MAN7 := $(wildcard doc/man/*.7)
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
install: uscope sdt
	install -D -m 0755 uscope $(DESTDIR)$(PREFIX)/bin/uscope
	install -d $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/
	install -D -m 0644 doc/bash-completion/uscope $(DESTDIR)$(BASHCOMPDIR)/uscope
	install -D -m 0755 build/sdt/libuscope-sdt.so $(DESTDIR)$(LIBDIR)/$(SDT_SONAME)
	ln -sf $(SDT_SONAME) $(DESTDIR)$(LIBDIR)/libuscope-sdt.so
	install -D -m 0644 build/sdt/libuscope-sdt.a $(DESTDIR)$(LIBDIR)/libuscope-sdt.a
	install -D -m 0644 sdt/include/uscope/sdt.h $(DESTDIR)$(INCLUDEDIR)/uscope/sdt.h
	@mkdir -p $(DESTDIR)$(LIBDIR)/pkgconfig
	printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: uscope-sdt\nDescription: %s\nVersion: %s\nLibs: -L$${libdir} -luscope-sdt\nLibs.private: -lelf\nCflags: -I$${includedir}\n' \
		'$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' 'USDT probes defined at run time' '$(VERSION)' \
		> $(DESTDIR)$(LIBDIR)/pkgconfig/uscope-sdt.pc
	@test -n '$(PYTHON_SITE)' || { echo "install: cannot tell where $(PYTHON) looks for modules" >&2; exit 1; }
	@mkdir -p $(DESTDIR)$(PYTHON_SITE)
	sed 's|^_INSTALLED_LIB = None$$|_INSTALLED_LIB = "$(LIBDIR)/$(SDT_SONAME)"|' sdt/python/uscope_sdt.py \
		> $(DESTDIR)$(PYTHON_SITE)/uscope_sdt.py
	@grep -q '^_INSTALLED_LIB = "' $(DESTDIR)$(PYTHON_SITE)/uscope_sdt.py
	@# the dynamic loader finds a new library by name once its cache knows it
	@if [ -z '$(DESTDIR)' ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

clean:
	rm -rf build uscope
	$(MAKE) -C tests/targets clean

.PHONY: all deps unit fuzz e2e vm check demo bench install clean targets sdt
# (not build/bench: make bench builds an earlier tree there, whose sources
# have .d files of their own: tests/targets/usdt_probes.d)
-include $(shell find build -path build/bench -prune -o -name '*.d' -print 2>/dev/null)
