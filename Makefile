# Tributary — common tasks. `make test` is what CI runs.
GO ?= go

.PHONY: all test demo lincheck verify race-short fmt

all: verify test

## test: go vet, then every package's tests under the race detector, then
## the linearizability checker against the deliberately broken brokers
## (engine built with the tributary_faults tag; see porcupine/faults_test.go).
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -tags tributary_faults ./porcupine/... ./cmd/lincheck/

## demo: the worked examples, then a concurrent workload with its checks.
demo:
	$(GO) run ./cmd/tributary demo

## lincheck: seeded concurrent histories of the engine checked for
## linearizability for 50 s (about a minute with the build); writes the
## evidence of a violation to lincheck-out/ and exits 1. More: go run ./cmd/lincheck -h
lincheck:
	$(GO) run ./cmd/lincheck -duration 50s

## verify: formatting, vet and a tidy go.mod (staticcheck too when it installs).
verify:
	@test -z "$$(gofmt -l .)" || (echo "gofmt -l lists:"; gofmt -l .; exit 1)
	$(GO) vet ./...
	$(GO) mod tidy -diff
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...; \
	else echo "staticcheck unavailable; skipped"; fi

fmt:
	gofmt -w .
