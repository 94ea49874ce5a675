# meshccl — top-level entry points. `make run` and `make test` do all set-up on
# a fresh Debian 12 machine (as root they apt-get what is missing).
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# What the ThreadSanitizer stage runs (the tests labelled tsan, tests/CMakeLists.txt).
TSAN_TARGETS := meshccl meshccl-run mp_coll mp_fault mp_nonblocking mp_hostile mp_errors mp_misuse \
  mp_shrink mp_init_all mp_net_timeout mp_abort_thread
JOBS ?= $(shell nproc)
# dpkg-dev and lintian: `make deb` and tests/mp/test_deb.sh (dpkg-shlibdeps, dpkg-buildflags, lintian).
DEB_PKGS := pkg-config gcc g++ clang clang-format libclang-rt-14-dev make cmake libc6-dev iproute2 procps git python3 openmpi-bin libopenmpi-dev graphviz nftables iperf3 gdb dpkg-dev lintian
# The Python packages (python/, `make python`): the torch.distributed backend
# builds against each Python's torch: Debian's PyTorch 1.13 (these packages)
# for /usr/bin/python3, and torch 2.13 in python3 (python/build.sh pip-installs
# it there when missing); the numpy module needs numpy.
DEB_PKGS_PYTHON := python3-torch libtorch-dev pybind11-dev python3-numpy python3-dev python3-setuptools

.PHONY: all deps deps-python build build-asan build-tsan faults python install uninstall deb run test test-tsan test-fast bench bench-mpi fuzz format envdoc clean

all: build

# install_debs(packages, target): apt-get the missing ones when root, else name them.
define install_debs
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "$(2): installing$$missing"; \
	    (apt-get update -q || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else \
	    echo "$(2): missing Debian packages:$$missing (run as root, or: sudo apt-get install$$missing)"; \
	  fi; \
	fi
endef

deps:
	$(call install_debs,$(DEB_PKGS),deps)

deps-python:
	$(call install_debs,$(DEB_PKGS_PYTHON),deps-python)

# The configure steps wait for deps (order-only): under make -j a fresh machine
# would otherwise configure before apt-get installed the compilers.
$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The sanitizer build uses clang, so that every change also builds warning-free with clang,
# at -O1 (CMakeLists.txt): at -O0 the tests spent most of the stage generating and checking data.
$(ASAN_BUILD)/CMakeCache.txt: | deps
	CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMESHCCL_SANITIZE=ON

build-asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# ThreadSanitizer (clang, -O1): the library and the programs of the tsan tests only.
$(TSAN_BUILD)/CMakeCache.txt: | deps
	CC=clang CXX=clang++ cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMESHCCL_TSAN=ON

build-tsan: deps $(TSAN_BUILD)/CMakeCache.txt
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TARGETS)

# meshccl (numpy) and meshccl_torch (torch.distributed backend) into
# $(BUILD)/python; without torch, one line says what is skipped (docs/PYTORCH.md).
python: build deps-python
	./python/build.sh $(BUILD) $(JOBS)

# Installs headers (in include/meshccl/), libraries, tools, meshccl.pc and
# the CMake package under $(DESTDIR)$(PREFIX); NCCL_COMPAT=1 adds NCCL's names
# (libnccl.so.2, include/nccl.h, nccl.pc, find_package(NCCL)), which would
# shadow a real NCCL installed there. cmake --install records each file in
# $(BUILD)/install_manifest*.txt, which `make uninstall` (same PREFIX, DESTDIR
# and NCCL_COMPAT) removes again.
PREFIX ?= /usr/local
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"
	@if [ "$(NCCL_COMPAT)" = 1 ]; then \
	  for c in nccl_compat nccl_compat_dev; do \
	    echo "DESTDIR=\"$(DESTDIR)\" cmake --install $(BUILD) --prefix \"$(PREFIX)\" --component $$c"; \
	    DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)" --component $$c || exit 1; \
	  done; \
	fi

uninstall:
	packaging/uninstall.sh "$(BUILD)" "$(DESTDIR)" "$(PREFIX)" "$(NCCL_COMPAT)"

# The Debian packages (docs/INSTALL.md): a build for /usr in $(DEB_BUILD) with
# Debian's flags, cpack -G DEB, finished as debhelper would (packaging/build_deb.sh).
DEB_BUILD ?= build-deb
deb: deps
	packaging/build_deb.sh $(DEB_BUILD) $(JOBS)

# The main job: a 4-rank communicator on this host, and what init found.
run: build
	$(BUILD)/bin/meshccl-run -n 4 $(BUILD)/bin/meshccl-hello
	$(BUILD)/bin/meshccl-run -n 4 $(BUILD)/bin/meshccl-perf all_reduce -b 8 -e 64M -f 4 -c 1

# Everything CI must pass: the release build's tests (the Python ones with
# the packages of `make python`), then the unit and multi-process tests again
# under ASan+UBSan, then the tests labelled tsan under ThreadSanitizer: every
# process of theirs writes its reports to $(TSAN_BUILD)/tsan-logs and stops at
# the first (exit 66); any report fails the stage and is printed.
test: build build-asan build-tsan python
	cd $(BUILD) && ctest --output-on-failure -j 2
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 2 -L 'unit|mp' -LE nosan
	$(MAKE) -s test-tsan

test-tsan: build-tsan
	rm -rf $(TSAN_BUILD)/tsan-logs && mkdir -p $(TSAN_BUILD)/tsan-logs
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 log_path=$(CURDIR)/$(TSAN_BUILD)/tsan-logs/tsan" \
	  ctest --output-on-failure -j 2 -L tsan
	@if ls $(TSAN_BUILD)/tsan-logs | grep -q .; then \
	  cat $(TSAN_BUILD)/tsan-logs/*; echo "test-tsan: ThreadSanitizer reports above ($(TSAN_BUILD)/tsan-logs)"; exit 1; \
	fi; echo "test-tsan: no ThreadSanitizer report"

test-fast: build python
	cd $(BUILD) && ctest --output-on-failure -j 2

bench: build python
	./bench/init.sh $(BUILD)
	$(MAKE) -s bench-mpi
	$(BUILD)/bench/membw
	$(BUILD)/bench/core_pair 10
	$(BUILD)/bench/limit | tee $(BUILD)/bench/limit.txt
	RANKS="2 4" PERF_FLAGS="-w 5 -n 20" LIMIT_FIGURES="$$(sed -n 's/^# figures: //p' $(BUILD)/bench/limit.txt)" \
	  ./bench/vs_limit.sh $(BUILD) all_reduce 64K 256M
	RANKS="2 4" PERF_FLAGS="-w 5 -n 20" ./bench/allreduce_compare.sh $(BUILD) all_reduce 256M
	RUNS=20 RANKS="2 4" ./bench/bw_distribution.sh $(BUILD) all_reduce 64K 128M
	RUNS=20 RANKS="2 4" MC_FLAGS="-R 2" ./bench/bw_distribution.sh $(BUILD) all_reduce 64K 128M
	RUNS=8 RANKS="2 4" ./bench/sym_compare.sh $(BUILD) all_reduce 64K 256M
	./bench/netns_compare.sh $(BUILD) 256M || [ $$? = 77 ]
	./bench/tree_ring_netns.sh $(BUILD) 2 4 8 || [ $$? = 77 ]
	./bench/mesh_netns.sh $(BUILD) || [ $$? = 77 ]
	./bench/torch_allreduce.sh $(BUILD) || [ $$? = 77 ]

# The MPI baseline (bench/mpi_perf.c, with tools/perf/ for identical tables), the
# memcpy probe and the two-core probe (bench/core_pair.c); used by
# bench/allreduce_compare.sh and bench/bw_distribution.sh. mpi_perf is skipped
# without Open MPI's mpicc.
bench-mpi:
	@mkdir -p $(BUILD)/bench
	$(CC) -O2 -Wall -Wextra -Werror -o $(BUILD)/bench/membw bench/membw.c
	$(CC) -O2 -Wall -Wextra -Werror -std=c11 -o $(BUILD)/bench/core_pair bench/core_pair.c
	@if command -v mpicc > /dev/null; then \
	  echo "mpicc -O2 -o $(BUILD)/bench/mpi_perf bench/mpi_perf.c tools/perf/*.c"; \
	  mpicc -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Itools/perf -o $(BUILD)/bench/mpi_perf \
	    bench/mpi_perf.c tools/perf/perf_args.c tools/perf/perf_data.c tools/perf/perf_format.c; \
	else \
	  echo "bench-mpi: mpicc not found (Debian: apt-get install openmpi-bin libopenmpi-dev): mpi_perf skipped"; \
	fi

# The fuzzers (clang, ASan+UBSan) for a minute each: the topology XML over the
# real files, the bootstrap's message parsers over tests/data/boot, the
# transports' connect messages and the nets' handles over their seeds
# (tests/data/fuzz/); new inputs are kept in $(ASAN_BUILD)/fuzz-corpus/<name>.
fuzz: build-asan
	mkdir -p $(ASAN_BUILD)/fuzz-corpus/topo_xml $(ASAN_BUILD)/fuzz-corpus/boot_msg
	$(ASAN_BUILD)/tests/fuzz_topo_xml -max_total_time=60 -rss_limit_mb=2048 -print_final_stats=1 \
	  $(ASAN_BUILD)/fuzz-corpus/topo_xml tests/data/topo
	$(ASAN_BUILD)/tests/fuzz_boot_msg -max_total_time=60 -rss_limit_mb=2048 -print_final_stats=1 \
	  $(ASAN_BUILD)/fuzz-corpus/boot_msg tests/data/boot
	for t in tp_blob net_handle; do \
	  mkdir -p $(ASAN_BUILD)/fuzz-corpus/$$t && \
	  $(ASAN_BUILD)/tests/fuzz_$$t -max_total_time=60 -rss_limit_mb=2048 -print_final_stats=1 \
	    $(ASAN_BUILD)/fuzz-corpus/$$t tests/data/fuzz/$$t || exit 1; \
	done

# The fault matrix (tests/faults/fault_matrix.py, docs/TOOLS.md): kill, stop and link
# cut at each init stage and mid-collective, ncclCommAbort from another thread
# mid-collective, 2-16 ranks, P2P, SHM, NET, namespace hosts and containers (PID
# namespaces; those two need root); a table of how every survivor reported. About 15 minutes.
faults: build
	python3 tests/faults/fault_matrix.py $(BUILD)

envdoc: build
	$(BUILD)/bin/meshccl-env --markdown > docs/ENV.md

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(DEB_BUILD)
