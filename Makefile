# The README's commands. `make test` is what CI runs (.ci/run).
GO ?= go

.PHONY: build test deps vet bench fuzz

build:
	$(GO) build -o logjail ./cmd/logjail

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
