# bloscfs — see README.md. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 3s
BENCHTIME ?= 1s
APT_PACKAGES := fuse3 python3-numpy python3-blosc fio rsync mawk strace python3-zarr python3-numcodecs e2fsprogs
# The S3 server of the remote integration tests, built once per machine
# into a folder outside the checkout.
TOOLS_DIR ?= $(HOME)/.cache/bloscfs-tools/bin
VERSITYGW_VERSION := v1.8.0
# VERSITYGW is an optimized build (make deps, the benchmarks);
# VERSITYGW_QUICK one without the compiler's optimizations, which make
# test builds in the background where neither exists (see versitygw-start).
VERSITYGW := $(TOOLS_DIR)/versitygw
VERSITYGW_QUICK := $(TOOLS_DIR)/versitygw-quick
export BLOSCFS_VERSITYGW := $(if $(wildcard $(VERSITYGW)),$(VERSITYGW),$(VERSITYGW_QUICK))
# zarrita (npm), the second Zarr v3 implementation of the zarr tests.
ZARRITA_VERSION := 0.7.5
export BLOSCFS_ZARRITA := $(HOME)/.cache/bloscfs-tools/zarrita

# Every fuzz target, as package:Target.
FUZZ_TARGETS := \
	./blosc:FuzzParseHeader \
	./blosc:FuzzDecode \
	./blosc:FuzzDecodeRange \
	./blosc:FuzzLZ4Prefix \
	./blosc:FuzzLZ4Walk \
	./blosc/blosclz:FuzzDecompress \
	./blosc/blosclz:FuzzRoundTrip \
	./blosc/lz4fast:FuzzCompress \
	./shuffle:FuzzShuffleRoundTrip \
	./pack/bloscpack:FuzzOpen \
	./pack/frame:FuzzOpenFrame \
	./pack/b2store:FuzzEmbedMap \
	./pack/b2store:FuzzOpenEmbed \
	./pack/b2store:FuzzTree \
	./pack/all:FuzzOpenHead \
	./zarr:FuzzMeta \
	./zarr:FuzzShardIndex \
	./zarr:FuzzZarrRead \
	./zarr:FuzzZipTree \
	./npy:FuzzDescrLiteral \
	./zipread:FuzzOpen

.PHONY: all build build-static deps deps-base versitygw versitygw-start versitygw-wait test test-long unit race integration integration-purego simd purego canary fuzz fuzz-long vet fmt-check bench bench-mount bench-remote bench-table run stop clean

all: build

# VERSION is what `bloscfs --version` prints first: the git description
# of the commit when there is one (release builds may set it).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X main.version=$(VERSION))

# The binary is built with cgo where a C compiler exists: it then decodes
# zstd with the system's libzstd (libzstd.so.1, loaded at run time; without
# it, klauspost's decoder runs), 1.4-2.2x faster than klauspost's pure-Go
# decoder on float64 data, equal on text (docs/PERFORMANCE.md, "Settings
# and why"). The
# price is a dynamically linked binary (glibc) that starts about a
# millisecond later. `make build-static` builds the static, pure-Go
# binary (CGO_ENABLED=0), which runs on any Linux of the architecture.
CGO ?= $(shell command -v $${CC:-cc} >/dev/null 2>&1 && echo 1 || echo 0)
build:
	CGO_ENABLED=$(CGO) $(GO) build -ldflags '$(LDFLAGS)' -o bin/bloscfs ./cmd/bloscfs

build-static:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o bin/bloscfs ./cmd/bloscfs

# install puts bloscfs where mount(8) finds it for fstab lines and
# `mount -t fuse.bloscfs` (its helpers run with the shell's default PATH,
# which has /usr/local/bin), with the man page and shell completions.
PREFIX ?= /usr/local
DESTDIR ?=
.PHONY: install uninstall
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 755 bin/bloscfs $(DESTDIR)$(PREFIX)/bin/bloscfs
	install -m 644 man/bloscfs.1 $(DESTDIR)$(PREFIX)/share/man/man1/bloscfs.1
	install -m 644 completion/bloscfs.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/bloscfs
	install -m 644 completion/_bloscfs $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_bloscfs

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/bloscfs $(DESTDIR)$(PREFIX)/share/man/man1/bloscfs.1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/bloscfs $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_bloscfs

# deps installs what the tests need when it is missing: Debian packages
# (python3-blosc and python3-numpy for /usr/bin/python3, fuse3, fio,
# e2fsprogs's lsattr and chattr), Go modules, zarrita and versitygw.
deps: deps-base versitygw

# deps-base is deps but versitygw, which only the integration step needs:
# make test builds that in the background meanwhile (versitygw-start).
deps-base:
	@missing=""; \
	/usr/bin/python3 -c 'import blosc, numpy, zarr, numcodecs' 2>/dev/null || missing="yes"; \
	command -v fio >/dev/null || missing="yes"; \
	command -v fusermount3 >/dev/null || missing="yes"; \
	command -v rsync >/dev/null || missing="yes"; \
	command -v strace >/dev/null || missing="yes"; \
	command -v mawk >/dev/null || missing="yes"; \
	command -v lsattr >/dev/null || missing="yes"; \
	if [ -n "$$missing" ]; then \
		echo "installing $(APT_PACKAGES)"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi
	$(GO) mod download
	@if [ ! -d "$(BLOSCFS_ZARRITA)/node_modules/zarrita" ]; then \
		echo "installing zarrita $(ZARRITA_VERSION) into $(BLOSCFS_ZARRITA)"; \
		mkdir -p "$(BLOSCFS_ZARRITA)" && cd "$(BLOSCFS_ZARRITA)" && \
		command -v npm >/dev/null || { echo "npm (Node 20) is needed for the zarr tests"; exit 1; }; \
		npm install --no-audit --no-fund --silent zarrita@$(ZARRITA_VERSION) @zarrita/storage@0.2.0 numcodecs@0.3.2; \
	fi

# versitygw builds the S3 server of the remote tests and benchmarks when
# it is missing (a minute or two of both cores, once per machine).
versitygw:
	@$(MAKE) --no-print-directory versitygw-wait
	@if [ ! -x "$(VERSITYGW)" ]; then \
		echo "installing versitygw $(VERSITYGW_VERSION) into $(TOOLS_DIR) (a few minutes, once)"; \
		GOBIN="$(TOOLS_DIR)" $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); \
	fi

# versitygw-start starts a build of it in the background, at the lowest
# CPU priority, when no versitygw is there: on a new machine it then takes
# the cores that vet and race leave idle rather than a minute of its own.
# That build is VERSITYGW_QUICK: without the compiler's optimizations
# (-N -l: 86 s of CPU against 123 s for an optimized build, so that it
# fits in those idle cores) and without debug information; the tests
# spend little in the server (2 s more of CPU over the remote tests than
# with an optimized one). versitygw-wait waits for it (and fails with its
# log if it failed).
VERSITYGW_BUILD := $(TOOLS_DIR)/.versitygw-build
versitygw-start:
	@if [ ! -x "$(BLOSCFS_VERSITYGW)" ] && ! { [ -f "$(VERSITYGW_BUILD).pid" ] && kill -0 "$$(cat "$(VERSITYGW_BUILD).pid")" 2>/dev/null; }; then \
		echo "building versitygw $(VERSITYGW_VERSION) into $(TOOLS_DIR) in the background (once per machine)"; \
		mkdir -p "$(TOOLS_DIR)"; rm -f "$(VERSITYGW_BUILD).rc"; \
		( tmp=$$(mktemp -d "$(TOOLS_DIR)/.versitygw-quick.XXXXXX") && \
		  GOBIN="$$tmp" nice -n 19 $(GO) install -gcflags='all=-N -l' -ldflags='-s -w' github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) && \
		  mv "$$tmp/versitygw" "$(VERSITYGW_QUICK)"; rc=$$?; rm -rf "$$tmp"; echo $$rc > "$(VERSITYGW_BUILD).rc" ) \
			< /dev/null > "$(VERSITYGW_BUILD).log" 2>&1 & \
		echo $$! > "$(VERSITYGW_BUILD).pid"; \
	fi

versitygw-wait:
	@if [ -f "$(VERSITYGW_BUILD).pid" ]; then \
		pid=$$(cat "$(VERSITYGW_BUILD).pid"); \
		if kill -0 $$pid 2>/dev/null; then echo "waiting for the versitygw build"; fi; \
		while kill -0 $$pid 2>/dev/null; do sleep 1; done; \
		rm -f "$(VERSITYGW_BUILD).pid"; \
		if [ "$$(cat "$(VERSITYGW_BUILD).rc" 2>/dev/null)" != 0 ]; then \
			echo "building versitygw failed:"; cat "$(VERSITYGW_BUILD).log"; exit 1; \
		fi; \
	fi

# vet checks every package as built here, then the files that other builds
# use instead: without cgo and with the purego tag (the static build: the
# packages below are the only ones with such files), and on arm64
# (without cgo: a cross vet does not type-check the cgo files). First,
# go.mod and go.sum must be as `go mod tidy` leaves them (it fetches the
# test dependencies of the modules once, from the module proxy).
vet:
	$(GO) mod tidy -diff
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) vet -tags purego ./shuffle/ ./blosc/... ./pack/all/ ./internal/mmapfile/
	GOARCH=arm64 $(GO) vet ./shuffle/ ./blosc/...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# Every go test call has a -timeout with room: Go's default (10 minutes
# per package) is what a loaded machine meets first.

# unit runs every test once (fuzz targets run their seed corpora).
unit:
	$(GO) test -count=1 -timeout 30m ./...

# RACE_PKGS are the packages race runs under the race detector: all but
# - the codecs (shuffle/, blosc/, blosc/blosclz, blosc/lz4fast), which start no goroutine
#   and whose hot loops are in assembly or single-threaded, so that the
#   detector has nothing to see in their own tests (it sees their code run
#   on many goroutines in pack/all's and fs's tests). Their tests run in
#   simd and purego without it; blosc's one test with goroutines (a shared
#   dictionary cache) runs here under it.
# - the integration tests (integration/...) and the command's tests
#   (cmd/bloscfs), whose code under test is the bloscfs binary in other
#   processes: the detector would watch only the tests' own harness. They
#   run in the integration step; the one that runs a daemon built with
#   -race (TestConcurrentReadersRace) runs there.
# - internal/testkit/hostile, which writes files on one goroutine (integration).
# RACE_SKIP are zarr's tests of hostile stores: one goroutine each, that
# reads GiB-sized sparse files and bounds allocations (20 times slower
# under the detector: 99 s of the race step against 5 s). They run in
# canary.
RACE_SKIP = ^(TestShardIndexCache|TestHostileZarr|TestZipTreeHostile|TestCodecBounds)$$
RACE_PKGS = $(shell $(GO) list ./... | grep -v -x -e '.*/shuffle' -e '.*/blosc' -e '.*/blosc/.*' -e '.*/integration' -e '.*/integration/.*' -e '.*/internal/testkit/hostile' -e '.*/cmd/bloscfs')

race:
	$(GO) test -count=1 -race -timeout 30m -skip '$(RACE_SKIP)' $(RACE_PKGS)
	$(GO) test -count=1 -race -timeout 10m -run '^TestZstdDictEviction$$' ./blosc/

# integration runs the integration tests, against real mounts of the
# built binary, the command's tests and the hostile-file writer's test,
# without the detector.
# (Three packages at once, -p 3, saved 14 s of 223: they are CPU-bound
# enough that the timing-sensitive kill tests are better off with two.)
integration:
	$(GO) test -count=1 -timeout 30m ./integration/... ./cmd/bloscfs/ ./internal/testkit/hostile/

# simd runs the codecs' tests without the race detector and with the SIMD
# shuffle, on their whole grids (the canary grids, the random-parameter
# round trips).
simd:
	$(GO) test -count=1 -timeout 20m ./shuffle/ ./blosc/...

# purego runs the codec, container and command tests without the race
# detector, without cgo and with the portable shuffle (the byte-wise
# iotest checks of every fixture run here; under -race they are limited
# to the small ones): the static build's zstd decoder (klauspost's; the
# purego tag leaves libzstd out too) and shuffle in Go. One build
# configuration for both: the SIMD shuffle without cgo is the one simd
# tests (it does not use cgo), and vet builds every package without cgo.
purego:
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m -tags purego ./shuffle/ ./blosc/... ./pack/... ./cmd/bloscfs/

# canary runs, without the race detector and with the SIMD shuffle, the
# whole grids of the tests that keep every decoder inside its output and
# the parallel decode paths equal to a serial decode (under -race they run
# on smaller grids: the stores they check are in assembly, which the
# detector does not see), fs's tests of a GiB or more, which skip under
# -race, remote's listing of 100,000 objects (20,000 under -race), and
# zarr's hostile-store tests (RACE_SKIP). blosc's canary grid runs in
# simd, integration's in integration.
canary:
	$(GO) test -count=1 -timeout 30m -run 'Canary|ParallelPaths|ParallelDecode|DemoteUnshuffled|RemoteSequentialGETs|HostileHugeChunkWrite|List100k' ./pack/all/ ./fs/ ./remote/
	$(GO) test -count=1 -timeout 30m -run '$(RACE_SKIP)' ./zarr/

# fuzz runs each fuzz target for FUZZTIME (go test -fuzz takes one target
# of one package at a time), FUZZJOBS targets at a time with FUZZPAR
# workers each (the machines have two cores; one at a time, the 21
# targets took 95 s, mostly building and starting). With more than one
# job, each target's output comes whole when it ends (make -O). Go's
# fuzzer can end a run on a loaded machine with "context deadline
# exceeded" and no failing input, when FUZZTIME runs out while a worker
# is busy: that run is tried again, up to three runs. A found input
# ("Failing input written to ...") always fails.
FUZZJOBS ?= 2
FUZZPAR ?= 1
FUZZ_RUNS := $(addprefix fuzz@,$(subst /,+,$(subst :,@,$(FUZZ_TARGETS))))
.PHONY: $(FUZZ_RUNS)
fuzz:
	@$(MAKE) --no-print-directory -j$(FUZZJOBS) -Otarget $(FUZZ_RUNS)

$(FUZZ_RUNS):
	@t='$(subst +,/,$(patsubst fuzz@%,%,$@))'; pkg=$${t%@*}; name=$${t#*@}; \
	for try in 1 2 3; do \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		out=$$($(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) -parallel=$(FUZZPAR) -fuzzminimizetime=2s -timeout 20m $$pkg 2>&1) && { echo "$$out"; break; }; \
		echo "$$out"; \
		if [ $$try != 3 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input'; then \
			echo "fuzz $$pkg $$name: the run ended on its deadline with no failing input; again"; continue; \
		fi; \
		exit 1; \
	done

# fuzz-long fuzzes one target at a time, on both cores.
fuzz-long:
	$(MAKE) fuzz FUZZTIME=10m FUZZJOBS=1 FUZZPAR=2

# (simd runs before integration so that a versitygw build started by
# versitygw-start has the cores it leaves idle.)
test: deps-base versitygw-start fmt-check vet race simd versitygw-wait integration-purego canary fuzz
	@echo "make test: all passed"

# integration-purego runs integration and, beside it, purego at the lowest
# CPU priority: the integration tests wait on mounts, daemons and kills
# and leave half a core idle (130 s of wall time for 195 s of CPU), which
# purego then takes; they themselves keep their priority, so their
# timing does not change. purego's output follows integration's; both
# must pass. An interrupt stops both.
integration-purego:
	@log=$$(mktemp); \
	setsid nice -n 19 $(MAKE) --no-print-directory purego > "$$log" 2>&1 & pid=$$!; \
	trap 'kill -- -'$$pid' 2>/dev/null; rm -f "'$$log'"; exit 130' INT TERM; \
	$(MAKE) --no-print-directory integration; irc=$$?; \
	wait $$pid; prc=$$?; \
	echo "purego (run beside integration, at nice 19):"; cat "$$log"; rm -f "$$log"; \
	if [ $$irc != 0 ] || [ $$prc != 0 ]; then echo "integration exit $$irc, purego exit $$prc"; exit 1; fi

# test-long runs the write-path tests at length (200,000 random
# operations per format, 150 crash kills, 1,800 kills of the daemon
# anywhere), 300 kills of remote mounts, and every fuzz target for 10
# minutes.
test-long: deps
	BLOSCFS_LONG=1 $(GO) test -count=1 -timeout 90m ./integration/writes/
	BLOSCFS_LONG=1 $(GO) test -count=1 -timeout 30m -run TestKillDuringRemoteRead ./integration/remote/
	$(MAKE) fuzz-long

# The benchmarks and test-long run against the optimized versitygw (which
# deps builds where it is missing), never against make test's quick one.
bench bench-table bench-remote test-long: export BLOSCFS_VERSITYGW := $(VERSITYGW)

# bench runs the codec, shuffle and container benchmarks, then the mount
# benchmark (root; BLOSCFS_BENCH_SIZE MiB files, 1024 by default).
bench: bench-mount bench-remote
	$(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) -timeout 60m ./shuffle/ ./blosc/... ./pack/... ./zarr/
	$(GO) test -run='^$$' -bench=BenchmarkWrite -benchtime=1x -timeout=40m ./integration/writes/
	$(MAKE) bench-table

# bench-table measures the one table of docs/PERFORMANCE.md in one run
# (root; BLOSCFS_BENCH_SIZE MiB per data set, 1024 by default; the
# listing rows list BLOSCFS_BENCH_FILES files, 100000 by default, and
# BLOSCFS_BENCH_OBJECTS objects in versitygw, 10000 by default) and
# prints it last; it is also kept in bench-table.md. With BLOSCFS_CBLOSC2
# naming c-blosc2's libblosc2.so (and a C compiler), BenchmarkDecodeVsC
# adds our decoder against c-blosc2 on its own frames and zstd through
# the mount against the FUSE ceiling (256 MiB per data set by default),
# and BenchmarkPackVsC pack ÷ c-blosc2 per codec and clevel (at most
# 256 MiB per data set). BenchmarkB2StoreTable reads an array as the leaf
# of a python-blosc2 .b2z against the same .b2nd as a file.
bench-table: deps
	BLOSCFS_BENCH_TABLE=$(CURDIR)/bench-table.md $(GO) test -run='^$$' -bench='BenchmarkTable$$|BenchmarkZarrTable|BenchmarkB2StoreTable|BenchmarkDecodeVsC|BenchmarkPackVsC|BenchmarkListing' -benchtime=1x -timeout=150m ./integration/
	BLOSCFS_BENCH_TABLE=$(CURDIR)/bench-table.md $(GO) test -run='^$$' -bench='BenchmarkRemoteListing' -benchtime=1x -timeout=30m ./integration/remote/
	@echo; cat bench-table.md

bench-mount:
	$(GO) test -run='^$$' -bench=BenchmarkMount -benchtime=1x -timeout=30m ./fs/

# bench-remote compares a remote mount (versitygw on 127.0.0.1) with a
# local mount of the same files and with `rclone mount` of the plain data
# (root; BLOSCFS_BENCH_SIZE MiB). It installs Debian's rclone when it is
# missing; make test does not need it.
bench-remote: deps
	@if ! command -v rclone >/dev/null; then \
		echo "installing rclone (the benchmark compares with rclone mount)"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq rclone >/dev/null; \
	fi
	$(GO) test -run='^$$' -bench='BenchmarkRemote$$' -benchtime=1x -timeout=30m ./integration/remote/

# run mounts the bundled examples at ./mnt (see README.md); make stop
# unmounts it.
MNT ?= mnt
run: build
	@mkdir -p $(MNT)
	@if grep -qs " $$(realpath $(MNT)) " /proc/mounts; then bin/bloscfs unmount $(MNT); fi
	bin/bloscfs mount --log bloscfs.log examples $(MNT)
	@echo; echo "examples/ is mounted at $(MNT)/ (log: bloscfs.log). Try:"; \
	echo "  ls -l $(MNT) examples        # sizes: plain in the mount, compressed on disk"; \
	echo "  head $(MNT)/server-log       # a Bloscpack file read as text"; \
	echo "  od -A d -t f8 -j 8000 -N 40 $(MNT)/temperatures   # float64 values 1000-1004 of a frame"; \
	echo "  head -c 128 $(MNT)/grid.npy; echo   # the NPY header of a .b2nd array"; \
	echo "  ls $(MNT)/weather.zarr; head -c 128 $(MNT)/weather.zarr/pressure.npy; echo   # a Zarr array as one .npy"; \
	echo "  ls -R $(MNT)/station.b2z; bin/bloscfs info examples/station.b2z   # a python-blosc2 TreeStore, zipped"; \
	echo "  bin/bloscfs info examples/temperatures.b2frame   # how it is stored"; \
	echo "  bin/bloscfs stats $(MNT)     # cache hits, misses, decode time"; \
	if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then \
	echo "  /usr/bin/python3 -c 'import numpy as np; a = np.load(\"$(MNT)/grid.npy\", mmap_mode=\"r\"); print(a.shape, a[100, :5])'"; \
	echo "  /usr/bin/python3 -c 'import numpy as np; print(np.fromfile(\"$(MNT)/temperatures\", dtype=\"<f8\", count=5, offset=8*1000))'"; \
	else echo "  (with numpy: apt-get install python3-numpy, then np.load(\"$(MNT)/grid.npy\", mmap_mode=\"r\"))"; fi; \
	echo "Unmount with: make stop   (or: bin/bloscfs unmount $(MNT))"

# stop unmounts what make run mounted; nothing mounted is no error.
stop:
	@if grep -qs " $$(realpath $(MNT) 2>/dev/null) " /proc/mounts; then bin/bloscfs unmount $(MNT); fi

clean:
	rm -rf bin bloscfs.log
