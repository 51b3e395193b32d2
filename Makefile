# Convene: `make run` starts a node, `make test` runs every test.
GO      ?= go
BIN     := bin/convene
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: run build test test-deps deps bench fuzz vet clean

run: deps build
	./$(BIN) serve $(ARGS)

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/convene

deps:
	@scripts/install-deps.sh run

test-deps:
	@scripts/install-deps.sh test

vet: deps
	@unformatted=$$(gofmt -l cmd internal); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# Every test, with the race detector; fuzz seed corpora run as tests too.
test: test-deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

# Micro-benchmarks of the hot path (allocations per packet, fan-out rate).
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./internal/broker/ ./internal/udpmux/

# Run each fuzzer for a short while (FUZZTIME=30s by default).
FUZZTIME ?= 30s
fuzz: deps
	@scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf bin
