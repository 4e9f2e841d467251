# PlasmaFS developer targets. `make run` starts a local cluster; `make test`
# runs everything CI runs.
GO ?= go
BIN := bin/plasma
BENCH_BIN := bin/plasma-bench
export GOFLAGS := -buildvcs=false

.PHONY: build run test deps check unit race integration fuzz bench bench-quick clean

# plasma is what operators deploy; plasma-bench (the benchmarks and their
# references) is built beside it, where 'plasma bench' finds it.
build:
	$(GO) build -o $(BIN) ./cmd/plasma
	$(GO) build -o $(BENCH_BIN) ./cmd/plasma-bench

# A namenode (embedded SQLite) and two datanodes on 127.0.0.1; Ctrl-C stops it.
run: build
	./$(BIN) cluster up

test: deps build check race integration fuzz

# What the tests need beyond Go: a real NFS client (libnfs-utils), a C
# toolchain for the build-through-a-mount test, and the programs the mount
# tests drive (git, rsync, sqlite3), and PostgreSQL's server programs
# (initdb, pg_ctl: the PostgreSQL store's tests start throwaway servers).
# FUSE needs no package (mount(2) directly, as root).
deps:
	@for c in nfs-cp gcc make git rsync sqlite3 chromium; do command -v $$c >/dev/null 2>&1 || missing=1; done; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing=1; \
	[ -z "$$missing" ] || { \
		echo "== installing test dependencies (libnfs-utils gcc make git rsync sqlite3 chromium postgresql)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnfs-utils gcc make git rsync sqlite3 chromium postgresql; }
	@python3 -c 'import fsspec, hdfs, requests, pyspark' 2>/dev/null || { echo "== installing the Python WebHDFS clients the tests drive (fsspec hdfs requests pyspark)"; python3 -m pip install -q fsspec hdfs requests pyspark; }
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { echo "== installing java and maven (Hadoop's client for the WebHDFS test; its jars come from Maven Central)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless maven; }

check:
	@echo "== gofmt / go vet"
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Unit tests and in-process cluster tests under the race detector.
race:
	@echo "== race"
	$(GO) test -race -count=1 ./internal/... ./client/... ./kv/... ./mapred/...

# Each package under tests/ is a subject and runs as its own process; -p 4
# runs four at once: their time goes mostly to waiting on the processes
# they start, so more than the 2 cores of CI helps.
integration:
	@echo "== integration (real processes)"
	PLASMA_BIN=$(CURDIR)/$(BIN) PLASMA_BENCH_BIN=$(CURDIR)/$(BENCH_BIN) $(GO) test -count=1 -p 4 -timeout 15m ./tests/...

# Every wire decoder is fuzzed for a short, fixed budget: a count of
# inputs, not a duration (Go 1.26's fuzz coordinator can fail a timed run
# with "context deadline exceeded", golang/go#75804).
FUZZTIME ?= 50000x
fuzz:
	@echo "== fuzz"
	@for f in FuzzDecodeRequest FuzzDecodeResponse FuzzDecodeDataReq FuzzReadDataResp; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./internal/wire || exit 1; done
	@for f in FuzzOpenTicket FuzzParseCredential FuzzMACRead; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./internal/auth || exit 1; done
	@$(GO) test -run '^$$' -fuzz '^FuzzChecksum$$' -fuzztime $(FUZZTIME) ./internal/blockcrc
	@for f in FuzzDecodeNode FuzzDecodeTrailer; do \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./kv || exit 1; done

bench: build
	./bench/run

bench-quick: build
	./bench/run --quick

clean:
	rm -rf bin
