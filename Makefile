# Tributary — common tasks. `make test` is what CI runs.
GO ?= go
# The program, cmd/tributary, is a module of its own in the go.work workspace,
# which ./... at the root does not reach: test and verify name it beside ./... .
PROGRAM = ./cmd/tributary/...

.PHONY: all test fuzz-short test-watermill test-otel test-prometheus test-kafka test-jetstream test-browser monitor-screenshot demo lincheck verify fmt bench bench-cpu profile bench-scaling bench-16-build

all: verify test

## test: go vet, then every package's tests under the race detector, then
## the linearizability checker against the deliberately broken brokers
## and the differential test against the same broken engines (built with the
## tributary_faults tag; see porcupine/faults_test.go, engine/diff_faults_test.go,
## engine/room_faults_test.go, engine/session_faults_test.go), and the paged log's checks against its broken
## variants (ringlog/faults_test.go), and Consumer.Run's state tests against its broken
## hand-offs (run_faults_test.go),
## then the Watermill adapter (its own module, watermill/) with Watermill's
## universal Pub/Sub suite at its -short size, then the OpenTelemetry
## instrumentation (its own module, otel/: test-otel) and the Prometheus
## exporter (its own module, prometheus/: test-prometheus), then the Kafka
## protocol front end (its own module, kafka/: test-kafka), then fuzz-short.
test:
	$(GO) vet ./... $(PROGRAM)
	$(GO) test -race -count=1 ./... $(PROGRAM)
	$(GO) test -count=1 -tags tributary_faults ./porcupine/... ./cmd/lincheck/ ./ringlog/
	$(GO) test -count=1 -tags tributary_faults -run 'Diff|RoomFaults|LivenessFaults' ./engine/
	$(GO) test -count=1 -tags tributary_faults -run 'RunFaults' .
	cd watermill && $(GO) vet ./... && $(GO) vet -tags tributary_faults ./...
	cd watermill && $(GO) test -race -short -count=1 ./...
	$(MAKE) test-otel
	$(MAKE) test-prometheus
	$(MAKE) test-kafka
	$(MAKE) fuzz-short

## fuzz-short: each fuzz target of the codecs (root package) and of the
## program's event-file parser (cmd/tributary) under the fuzzer for a fixed
## number of inputs, about 10 s each on 2 cores (Go fuzzes one target per
## run). A count, not a -fuzztime duration: go1.26's fuzzer can fail a
## duration run with "context deadline exceeded" and no failing input
## (golang/go#75804). Their seed corpora, testdata/fuzz/ included, already
## ran in go test above. An input that fails is written to the package's
## testdata/fuzz/<target>/: keep it there, with the fix.
FUZZ_TARGETS = .:FuzzJSONDecode:100000 .:FuzzJSONRoundTrip:50000 .:FuzzIntegerDecode:100000 \
	.:FuzzIntegerRoundTrip:100000 .:FuzzStringCodec:100000 .:FuzzBytesCodec:100000 \
	./cmd/tributary:FuzzEventFile:20000
fuzz-short:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$${rest#*:}; \
		echo "$(GO) test -run '^$$' -fuzz '^$$name$$' -fuzztime $${n}x $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $${n}x $$pkg || exit 1; \
	done

## test-watermill: the Watermill adapter at full size: Watermill's
## universal suite without -short, the adapter's tests and the check that
## the suite fails on the adapter's deliberately broken builds, under the
## race detector; then the suite's stress test (each configuration ten
## times in parallel) without it, as the detector's memory would exceed
## 2 GB there. CI runs it after make test.
test-watermill:
	cd watermill && $(GO) test -race -count=1 -timeout 10m -skip Stress ./...
	cd watermill && $(GO) test -count=1 -timeout 10m -run Stress ./...

## test-otel: the OpenTelemetry instrumentation (its own module, otel/):
## go vet, then its tests under the race detector, against the SDK's
## in-memory metric reader and span recorder (a few seconds).
test-otel:
	cd otel && $(GO) vet ./... && $(GO) test -race -count=1 ./...

## test-prometheus: the Prometheus lag exporter (its own module,
## prometheus/): go vet, then its tests under the race detector (exact
## expositions of a cluster in a known state, promlint, concurrent scrapes).
## make test runs it.
test-prometheus:
	cd prometheus && $(GO) vet ./... && $(GO) test -race -count=1 ./...

## test-kafka: the Kafka protocol front end (its own module, kafka/): go
## vet, its tests under the race detector (franz-go's kgo clients against
## it and against kfake, bad frames, share and classic groups), then its
## request fuzzer for 20,000 inputs. The kcat tests live with the program
## (cmd/tributary, make test); this target installs Debian's kcat first
## when it is missing (as root, with apt-get), and TRIBUTARY_REQUIRE_KCAT=1
## makes a missing kcat a failure there, not a skip.
test-kafka:
	@command -v kcat >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; }
	cd kafka && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd kafka && $(GO) test -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime 20000x .

## test-jetstream: the JetStream backend's 3-node cluster tests that make
## test leaves out (porcupine histories on Replicas 3: TRIBUTARY_JS_CLUSTER=1),
## with its single-node, fault and conformance tests again, under the race
## detector. CI runs it after make test.
test-jetstream:
	TRIBUTARY_JS_CLUSTER=1 $(GO) test -race -count=1 -timeout 10m ./jetstream/

## test-browser: the monitor page (package monitor) in headless Chromium: a
## live cluster's page loaded, its DOM checked against Describe, and pages
## with a wrong lag rejected (monitor/browser_test.go, about 15 s). Installs
## Debian's chromium first when it is missing (as root, with apt-get: about a
## minute); TRIBUTARY_BROWSER=1 makes a missing browser a failure, not a
## skip. CI runs it after make test.
test-browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	TRIBUTARY_BROWSER=1 $(GO) test -race -count=1 -run Browser -v ./monitor/

## monitor-screenshot: the browser test, writing its screenshot of the page
## to docs/images/monitor.png.
monitor-screenshot:
	TRIBUTARY_BROWSER=1 $(GO) test -count=1 -run Browser ./monitor/ -screenshot $(CURDIR)/docs/images/monitor.png

## demo: the worked examples, then a concurrent workload with its checks.
demo:
	$(GO) run ./cmd/tributary demo

## lincheck: seeded concurrent histories of the engine checked for
## linearizability for 50 s (about a minute with the build); writes the
## evidence of a violation to lincheck-out/ and exits 1. More: go run ./cmd/lincheck -h
lincheck:
	$(GO) run ./cmd/lincheck -duration 50s

## bench: a short cmd/brokerbench run (about 35 s on 2 cores): every
## scenario on the engine and its baselines at GOMAXPROCS 1,2,…,NumCPU, the
## table, the performance targets, bench/out/results.json and a throughput plot.
## Longer, steadier: go run ./cmd/brokerbench -benchtime 1s -count 3.
bench:
	@mkdir -p bench/out
	$(GO) run ./cmd/brokerbench -benchtime 100ms -json bench/out/results.json -plot bench/out/throughput.svg

## bench-cpu: brokerbench -cputime (about 15 s): the typed library against
## the engine and channels (bench/typed's families), each family's loops in
## interleaved chunks timed by the process's CPU time, 20 rounds; the table
## of CPU ns per record and paired ratios, the typed library's goals,
## bench/out/cputime.json and bench/out/cputime.md. Steadier:
## go run ./cmd/brokerbench -cputime -rounds 40 -chunk 50ms.
bench-cpu:
	@mkdir -p bench/out
	$(GO) run ./cmd/brokerbench -cputime -json bench/out/cputime.json -markdown bench/out/cputime.md

## bench-scaling: the full table over GOMAXPROCS 1,2,4,8,16 (for a 16-core
## machine; about 18 minutes), into bench/results/.
bench-scaling:
	$(GO) run ./cmd/brokerbench -cpu 1,2,4,8,16 -benchtime 300ms -count 5 \
		-json bench/results/bench-16core.json -plot bench/results/bench-16core.svg \
		-markdown bench/results/bench-16core.md

## bench-16-build: bench/out/scaling/, a folder to copy to a 16-core
## machine without Go: bench/scaling.sh and the binaries it runs
## (brokerbench, lincheck, the engine's and the typed library's tests built
## with -race). There, ./scaling.sh runs brokerbench at GOMAXPROCS
## 1,2,4,8,16, brokerbench -cputime (the typed families at GOMAXPROCS 1, and
## the ConsumerRun families at each GOMAXPROCS for their wall-time
## throughput), lincheck for 45 s and the race tests in about 5 minutes, and
## writes Markdown, JSON, the plot and the logs to $$OUT (else ./out).
bench-16-build:
	rm -rf bench/out/scaling && mkdir -p bench/out/scaling
	$(GO) build -o bench/out/scaling/brokerbench ./cmd/brokerbench
	$(GO) build -o bench/out/scaling/lincheck ./cmd/lincheck
	$(GO) test -c -race -o bench/out/scaling/engine.race.test ./engine
	$(GO) test -c -race -o bench/out/scaling/tributary.race.test .
	cp bench/scaling.sh bench/out/scaling/scaling.sh

## profile: CPU, mutex and block profiles of the Mixed workload on the engine
## (and CPU profiles of RoundTrip and Parallel/groups=3) in bench/out/profile/.
## Read them with go tool pprof, e.g. go tool pprof -top bench/out/profile/mixed.cpu.pprof
profile:
	@mkdir -p bench/out/profile
	$(GO) test -run '^$$' -bench 'Mixed/engine$$' -benchtime 2s -outputdir bench/out/profile -o bench/out/profile/bench.test \
		-cpuprofile mixed.cpu.pprof -mutexprofile mixed.mutex.pprof -blockprofile mixed.block.pprof ./bench/
	$(GO) test -run '^$$' -bench 'RoundTrip/engine$$' -benchtime 2s -outputdir bench/out/profile -o bench/out/profile/bench.test \
		-cpuprofile roundtrip.cpu.pprof ./bench/
	$(GO) test -run '^$$' -bench 'Parallel/groups=3/engine$$' -benchtime 2s -cpu 2 -outputdir bench/out/profile -o bench/out/profile/bench.test \
		-cpuprofile parallel3.cpu.pprof -mutexprofile parallel3.mutex.pprof ./bench/
	@echo "profiles in bench/out/profile/; e.g. go tool pprof -top bench/out/profile/mixed.cpu.pprof"

## verify: formatting, vet and a tidy go.mod (staticcheck too when it installs).
verify:
	@test -z "$$(gofmt -l .)" || (echo "gofmt -l lists:"; gofmt -l .; exit 1)
	$(GO) vet ./... $(PROGRAM)
	$(GO) mod tidy -diff
	cd cmd/tributary && $(GO) mod tidy -diff
	cd watermill && $(GO) mod tidy -diff && $(GO) vet ./...
	cd otel && $(GO) mod tidy -diff && $(GO) vet ./...
	cd prometheus && $(GO) mod tidy -diff && $(GO) vet ./...
	cd kafka && $(GO) mod tidy -diff && $(GO) vet ./...
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... $(PROGRAM); \
	else echo "staticcheck unavailable; skipped"; fi

fmt:
	gofmt -w .
