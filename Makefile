# The README's commands. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: try build static test deps vet bench fuzz

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

# Replay throughput against fail2ban-regex on a generated 1M-line log.
bench: build
	./scripts/bench.sh

fuzz:
	./scripts/fuzz.sh
