# uscope - dynamic tracer for Linux user-space programs.
#   make          build ./uscope
#   make check    install dependencies, build, run every test
#   make demo     install dependencies, build, trace the bundled demo
#   make bench    run the benchmarks
#   make install PREFIX=/usr/local

VERSION  := 0.1.0
PREFIX   ?= /usr/local
CC       ?= cc
PKGS     := libtracefs libtraceevent libelf libdw libbpf
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

all: uscope

# The bpf engine's kernel program, compiled at build time (no compiler is
# needed at run time) and embedded as a libbpf skeleton.
build/bpf/uscope.bpf.o: src/engine/bpf/uscope.bpf.c src/engine/bpf/bpf_shared.h src/probe/fetch.h
	@mkdir -p $(dir $@)
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu -Isrc -c $< -o $@
build/bpf/uscope.skel.h: build/bpf/uscope.bpf.o
	bpftool gen skeleton $< name uscope_bpf > $@.tmp && mv $@.tmp $@
build/rel/src/engine/bpf/bpf.o build/san/src/engine/bpf/bpf.o: build/bpf/uscope.skel.h
BASE_CFLAGS += -Ibuild/bpf

# The inject engine's agent: freestanding code the tracer copies into the
# traced process, so no libc, no unwind tables, no jump tables, no vector
# registers, and no relocation left after a link at address 0 (checked).
AGENT_CFLAGS := -std=gnu11 -Wall -Wextra $(WERROR) -Isrc -O2 -fPIC -ffreestanding \
	-fno-builtin -fno-stack-protector -fno-asynchronous-unwind-tables -fno-unwind-tables \
	-fno-tree-loop-distribute-patterns -mgeneral-regs-only \
	-fcf-protection=none -fvisibility=hidden -fno-sanitize=all
build/inject/agent.bin: src/engine/inject/agent/agent.c src/engine/inject/agent/agent.lds \
		src/engine/inject/inject_shared.h src/probe/fetch.h
	@mkdir -p $(dir $@)
	$(CC) $(AGENT_CFLAGS) -c $< -o build/inject/agent.o
	@if readelf -rW build/inject/agent.o | awk '/^Relocation section/ { sec = $$3 } \
		/R_X86_64_(64|32|32S) / && index(sec, "agent_hdr") == 0 { bad = 1 } \
		END { exit !bad }'; then \
		echo "agent.o has absolute relocations: it must be position-independent" >&2; \
		exit 1; fi
	ld -T src/engine/inject/agent/agent.lds -o build/inject/agent.elf build/inject/agent.o
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

# ---- tests -------------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,build/san/tests/%,$(UNIT_SRCS))
build/san/tests/%: tests/unit/%.c build/san/libuscope.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SAN_FLAGS) -Itests/unit -MMD -MP -o $@ $< build/san/libuscope.a $(PKG_LIBS) -lcmocka

FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(FUZZ_SRCS))
FUZZ_LIB_SRCS := src/core/log.c $(wildcard src/probe/*.c) src/usdt/usdt.c src/elf/elf.c src/elf/demangle.c
build/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(BASE_CFLAGS) -O1 -g -fsanitize=fuzzer,address,undefined -o $@ $^ -lelf -liberty
FUZZ_SECONDS ?= 20

targets:
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
e2e: uscope build/san/uscope targets
	USCOPE=$(CURDIR)/build/san/uscope $(PYTHON) -m pytest -q tests/e2e

check: deps
	$(MAKE) uscope build/san/uscope
	$(MAKE) unit
	$(MAKE) fuzz
	$(MAKE) e2e

demo: deps
	$(MAKE) uscope targets
	@bash scripts/demo.sh

bench: uscope targets
	@bash scripts/deps.sh bench
	@bash bench/run.sh

install: uscope
	install -D -m 0755 uscope $(DESTDIR)$(PREFIX)/bin/uscope

clean:
	rm -rf build uscope
	$(MAKE) -C tests/targets clean

.PHONY: all deps unit fuzz e2e check demo bench install clean targets
-include $(shell find build -name '*.d' 2>/dev/null)
