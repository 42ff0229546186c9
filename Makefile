# The two commands a user needs: `make run` (the demo on embedded
# infrastructure) and `make test` (every test). Both need only Go.
GO ?= go
TEST_TIMEOUT ?= 14m
BENCH ?= .

.PHONY: run test lint bench build

run:
	$(GO) run ./cmd/demo

build:
	$(GO) build ./...

test:
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

lint:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './data/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# Benchmarks print figures next to a baseline taken in the same run; they are
# never asserted (the machine is shared and noisy).
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=1 -timeout 30m ./...
