#!/usr/bin/env bash
# The cost meter's count of two builds, side by side: relay instructions per delivery of
# meter A and meter B (each a `moq-meter` binary built from the commit to compare), A B A B
# … for each workload, and B/A per pair.
#
#   benchmarks/meter-compare.sh METER_A METER_B [workload…]     (default: chat fanout media)
#   e.g. git stash; cargo build --release -p moq-meter; cp target/release/moq-meter /tmp/meter-A
#        git stash pop; cargo build --release -p moq-meter
#        benchmarks/meter-compare.sh /tmp/meter-A target/release/moq-meter chat
#
# Counts are repeatable within 1 % on a quiet machine (BENCHMARKS.md, "Issue 31"). quiche
# reads the real clock, so a busy machine can slow a run under callgrind past a probe
# timeout: that run's "relay datagrams per message" is higher than its pair's, and its
# count is void. PAIRS (default 1) pairs per workload; OUT keeps every report; METER_ARGS
# go to every count (`METER_ARGS="--scheme https"`: members on WebTransport).
set -euo pipefail

A=$1 B=$2
shift 2
WORKLOADS=${*:-chat fanout media}
PAIRS=${PAIRS:-1}
OUT=${OUT:-$(mktemp -d /tmp/meter-compare.XXXXXX)}
read -r -a METER_ARGS <<< "${METER_ARGS:-}"
mkdir -p "$OUT"

per_delivery() { sed -n 's/^relay instructions: .* \([0-9]*\) per delivery$/\1/p' "$1"; }
datagrams() { sed -n 's/^relay datagrams per message: //p' "$1"; }

for workload in $WORKLOADS; do
    for pair in $(seq "$PAIRS"); do
        for side in A B; do
            meter=$A
            [ "$side" = B ] && meter=$B
            "$meter" count "$workload" "${METER_ARGS[@]}" > "$OUT/$workload-$pair-$side.txt"
        done
        a=$(per_delivery "$OUT/$workload-$pair-A.txt")
        b=$(per_delivery "$OUT/$workload-$pair-B.txt")
        printf '%-7s pair %s  A %8s  B %8s  B/A %s   (datagrams per message A: %s; B: %s)\n' \
            "$workload" "$pair" "$a" "$b" "$(awk "BEGIN { printf \"%.4f\", $b / $a }")" \
            "$(datagrams "$OUT/$workload-$pair-A.txt")" "$(datagrams "$OUT/$workload-$pair-B.txt")"
    done
done
echo "reports: $OUT"
