# Tributary — common tasks. `make test` is what CI runs.
GO ?= go

.PHONY: all test demo verify race-short fmt

all: verify test

## test: go vet, then every package's tests under the race detector.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## demo: the worked examples, then a concurrent workload with its checks.
demo:
	$(GO) run ./cmd/tributary demo

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
