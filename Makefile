# Convene: `make run` starts a node, `make test` runs every test.
GO      ?= go
BIN     := bin/convene
BENCH   := bin/convene-bench
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: run build build-bench web test test-deps deps bench bench-quick microbench fuzz vet clean

run: deps build
	./$(BIN) serve $(ARGS)

build: deps web
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/convene

# The web app (web/, TypeScript and Preact) is built into
# internal/webui/dist, which the binary embeds.
web:
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent

# The benchmark tooling is its own binary; it runs bin/convene (beside it)
# as child processes.
build-bench: build
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BENCH) ./cmd/convene-bench

deps:
	@scripts/install-deps.sh run

test-deps:
	@scripts/install-deps.sh test

vet: deps
	@unformatted=$$(gofmt -l cmd internal); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@scripts/check-deps.sh
	@scripts/import-graph.sh -check

# Every test, with the race detector; fuzz seed corpora run as tests too.
# Then the web app's unit tests and its end-to-end tests in Chromium
# against the binary just built.
test: test-deps vet build
	$(GO) test -race -count=1 -timeout 20m ./...
	cd web && npm test --silent && npm run e2e --silent

# The seed's benchmark suite: Convene beside nats-server and the machine's
# own UDP fan-out limit, in one run (about 25 minutes; bench-quick about 5).
# Writes bench/results/<date>.md, .json, PNG plots and CPU profiles (the
# profiles are not committed: .gitignore). The broker scenarios run the node
# with admission off; `overload` drives it to twice its measured capacity.
bench: test-deps build-bench microbench
	./$(BENCH) broker -out bench/results $(BENCHARGS)
	./$(BENCH) overload -out bench/results
	./$(BENCH) floor -out bench/results
	@scripts/install-deps.sh bench
	./$(BENCH) sip -out bench/results
	./$(BENCH) relay -out bench/results
	./$(BENCH) webrtc -out bench/results
	./$(BENCH) mixer -out bench/results
	./$(BENCH) recorder -out bench/results
	./$(BENCH) chat -out bench/results
	./$(BENCH) cluster -out bench/results
	./$(BENCH) media -out bench/results
	cd web && node bench/jointime.mjs ../bench/results

bench-quick: test-deps build-bench
	./$(BENCH) broker -quick -out bench/results $(BENCHARGS)

# Micro-benchmarks of the hot path (allocations per packet, fan-out rate),
# the conversation context's bytes per message against members and the
# delivery latency ordering adds (the seed's workload, simulated).
microbench: deps
	$(GO) test -run '^$$' -bench . -benchtime 1s ./internal/broker/ ./internal/udpmux/ ./internal/relay/
	$(GO) test -run '^$$' -bench 'ContextSize|OrderingHold' -benchtime 1x ./internal/conversation/

# Run each fuzzer for a short while (FUZZTIME=30s by default).
FUZZTIME ?= 30s
fuzz: deps
	@scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf bin
