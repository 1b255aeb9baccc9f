# bloscfs — see README.md. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 5s
BENCHTIME ?= 1s
APT_PACKAGES := fuse3 python3-numpy python3-blosc fio rsync

# Every fuzz target, as package:Target.
FUZZ_TARGETS := \
	./blosc:FuzzParseHeader \
	./blosc:FuzzDecode \
	./blosc/blosclz:FuzzDecompress \
	./blosc/blosclz:FuzzRoundTrip \
	./shuffle:FuzzShuffleRoundTrip

.PHONY: all build deps test unit race purego fuzz fuzz-long vet fmt-check bench run clean

all: build

build:
	$(GO) build -o bin/bloscfs ./cmd/bloscfs

# deps installs what the tests need when it is missing: Debian packages
# (python3-blosc and python3-numpy for /usr/bin/python3, fuse3, fio) and Go
# modules.
deps:
	@missing=""; \
	/usr/bin/python3 -c 'import blosc, numpy' 2>/dev/null || missing="yes"; \
	command -v fio >/dev/null || missing="yes"; \
	command -v fusermount3 >/dev/null || missing="yes"; \
	command -v rsync >/dev/null || missing="yes"; \
	if [ -n "$$missing" ]; then \
		echo "installing $(APT_PACKAGES)"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PACKAGES) >/dev/null; \
	fi
	$(GO) mod download

vet:
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./shuffle/ ./blosc/...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

# unit runs every test once (fuzz targets run their seed corpora).
unit:
	$(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race ./...

purego:
	$(GO) test -count=1 -tags purego ./shuffle/ ./blosc/...

# fuzz runs each fuzz target for FUZZTIME (go test -fuzz takes one target
# of one package at a time).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

fuzz-long:
	$(MAKE) fuzz FUZZTIME=10m

test: deps fmt-check vet race purego fuzz
	@echo "make test: all passed"

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./shuffle/ ./blosc/...

run:
	@echo "bloscfs mount is not built yet (see README.md, 'Status')."; \
	echo "What works today: the chunk codec; try 'make test' or 'make bench'."

clean:
	rm -rf bin
