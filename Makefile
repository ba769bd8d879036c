# The README's commands. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: try build static test deps vet bench bench-smoke bench-replay fuzz

# The README's first command: build (saying so), then replay the bundled
# samples. scripts/try.sh checks Go's version and the C compiler first.
try:
	@./scripts/try.sh

build:
	$(GO) build -o logjail ./cmd/logjail

# One static binary (SQLite included, no libc needed at run time), for a
# server without Go or a C compiler: copy ./logjail there.
static:
	CGO_ENABLED=1 $(GO) build -tags osusergo,netgo,sqlite_omit_load_extension \
	  -ldflags '-linkmode external -extldflags -static' -o logjail ./cmd/logjail

# Everything the tests need, then every test under the race detector.
test: deps vet
	$(GO) test -race -count=1 ./...

deps:
	./scripts/deps.sh

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt wants to rewrite: $$out"; exit 1; fi

# Every figure of issue 23 as one Markdown table of ratios against their
# targets, measured in one run (a few minutes; docs/performance.md keeps
# the table, before and after). bench-smoke: every row at a small size,
# under a minute, targets not judged (TestBenchSmoke runs it in `make test`).
bench:
	./scripts/deps.sh
	./scripts/bench-table.sh

bench-smoke:
	BENCH_QUICK=1 ./scripts/bench-table.sh

# Replay's details: against fail2ban-regex and a reference loop on a
# generated 1M-line log, then the parser's and detector's Go benchmarks.
bench-replay: build
	./scripts/bench.sh

fuzz:
	./scripts/fuzz.sh
