#!/bin/sh
# cost.sh: how porcupine's check time grows with history length and clients
# per topic (the cost table of the README). One topic per history, so each
# check is one topic's search; 40 histories per row; -timeout is lincheck's
# default (10 s), and a check that hits it counts as Unknown.
# Usage: sh porcupine/cost.sh   (from the repository root)
set -e
bin=$(mktemp -d)/lincheck
go build -o "$bin" ./cmd/lincheck
out=$(mktemp -d)
row() { printf 'clients=%s ops/client=%s | ' "$1" "$2"; "$bin" -count 40 -topics 1 -clients "$1" -ops "$2" -out "$out" | tail -1 || true; }
for o in 25 50 100 200 400 800 1600; do row 8 "$o"; done
for c in 2 4 12 16; do for o in 100 400; do row "$c" "$o"; done; done
