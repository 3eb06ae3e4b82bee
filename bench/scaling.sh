#!/usr/bin/env bash
# The 16-core run in one command, from prebuilt binaries: no Go toolchain
# is needed where it runs. `make bench-16-build` puts this script and the
# binaries it runs in bench/out/scaling/; copy that folder to the machine
# and run ./scaling.sh there. It writes to $OUT when that is set, else to
# ./out beside the script:
#
#   machine.txt       date, CPU model, core count, kernel
#   scaling.md|json|svg  brokerbench: the scenarios below at GOMAXPROCS
#                     $CPUS (default 1,2,4,8,16), the table, the targets
#                     and the throughput plot
#   typed.md|json     brokerbench -cputime: the typed library's families
#                     (bench/typed) at their GOMAXPROCS 1, $ROUNDS (20)
#                     interleaved rounds timed by CPU time, and the typed
#                     library's goals as paired CPU-time ratios
#   typed-scaling.md|json  brokerbench -cputime on the ConsumerRun
#                     families at GOMAXPROCS $CPUS, $SCALING_ROUNDS (5)
#                     rounds: the units/s (wall) column is the scaling
#                     figure of typed Run and of the engine used directly
#   lincheck.txt      go run ./cmd/lincheck -duration $LINCHECK (45s) at
#                     GOMAXPROCS = all cores: histories checked, verdicts
#   race.txt          the engine's and the typed library's tests under the
#                     race detector
#
# Each step's exit status is recorded in status.txt and the script goes on;
# it exits 1 if any step failed. About 5 minutes on 16 cores.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
cpus=${CPUS:-1,2,4,8,16}
benchtime=${BENCHTIME:-200ms}
lincheck=${LINCHECK:-45s}
rounds=${ROUNDS:-20}
scaling_rounds=${SCALING_ROUNDS:-5}
scenarios=${SCENARIOS:-'^(RoundTrip|RoundTrip/handles|HotTopic/partitions=16|Parallel/groups=1|Contended/members=64|Contended/groups=16|Mixed)$'}
mkdir -p "$out"
: > "$out/status.txt"
failed=0
step() { # step NAME LOG COMMAND...: run COMMAND, its output to LOG and stdout
	local name=$1 log=$2
	shift 2
	echo "== $name: $*"
	"$@" 2>&1 | tee "$out/$log"
	local rc=${PIPESTATUS[0]}
	echo "$name $rc" >> "$out/status.txt"
	[ "$rc" -eq 0 ] || failed=1
}
{
	date -u +%Y-%m-%dT%H:%M:%SZ
	grep -m1 'model name' /proc/cpuinfo 2>/dev/null || true
	echo "cores: $(getconf _NPROCESSORS_ONLN)"
	uname -srm
} > "$out/machine.txt"
cat "$out/machine.txt"
step brokerbench brokerbench.txt "$here/brokerbench" -cpu "$cpus" -benchtime "$benchtime" \
	-scenarios "$scenarios" -json "$out/scaling.json" -markdown "$out/scaling.md" -plot "$out/scaling.svg"
step typed typed.txt "$here/brokerbench" -cputime -rounds "$rounds" \
	-json "$out/typed.json" -markdown "$out/typed.md"
step typed-scaling typed-scaling.txt "$here/brokerbench" -cputime -scenarios '^ConsumerRun/' -cpu "$cpus" \
	-rounds "$scaling_rounds" -json "$out/typed-scaling.json" -markdown "$out/typed-scaling.md"
step lincheck lincheck.txt "$here/lincheck" -duration "$lincheck" -out "$out/lincheck-out"
step race-engine race.txt "$here/engine.race.test" -test.count 1
step race-tributary race-tributary.txt "$here/tributary.race.test" -test.count 1
cat "$out/status.txt"
exit "$failed"
