#!/usr/bin/env bash
# Instructions per delivery of two live relays under the same chat load, A B A B …
# (callgrind), for a change whose wall-clock ratio this 2-core machine cannot settle.
#
#   benchmarks/instructions-compare.sh RELAY_A RELAY_B [relay args…]
#   e.g. benchmarks/instructions-compare.sh /tmp/relay-A target/release/moqx-relay --driver tokio
#
# A_VERSIONS / B_VERSIONS (space-separated, optional) pin each side's clients to these
# protocol versions, members taking them in turn (`moq-bench run --version`): one relay
# binary as A and B, to compare what the protocols cost it (e.g. B_VERSIONS="05 moqt-18").
#
# Each round runs one relay under valgrind --tool=callgrind with `moq-bench run` offering
# chat load (CONNS clients, rooms of ROOM, 1 msg/s each). After WARM seconds (connections
# set up, every subscription in place) the relay's counters are zeroed, and WINDOW seconds
# later dumped: the dump holds the instructions of exactly WINDOW seconds of steady load,
# CONNS × WINDOW × (ROOM − 1) deliveries, the same for both relays. A relay under
# callgrind runs ~50× slower: 100 clients keep it below one core; much more and it falls
# behind its QUIC timers (the round then reports loss, and the figure is void).
#
# Needs valgrind (callgrind_control) and moq-bench (MOQ_BENCH, default
# target/release/moq-bench). Output: one line per round, then B/A per pair.
set -euo pipefail

A=$1 B=$2
shift 2
A_VERSIONS=${A_VERSIONS:-} B_VERSIONS=${B_VERSIONS:-}
PAIRS=${PAIRS:-3} CONNS=${CONNS:-100} ROOM=${ROOM:-10} WARM=${WARM:-40} WINDOW=${WINDOW:-30}
BENCH=${MOQ_BENCH:-target/release/moq-bench}
OUT=${OUT:-$(mktemp -d /tmp/instructions-compare.XXXXXX)}
TEMPLATE="--bind 127.0.0.1:{port} --no-http --fingerprint-file {fingerprint_file} --max-sessions 100000 --max-subscriptions 100000"
DELIVERIES=$((CONNS * WINDOW * (ROOM - 1)))

# The valgrind process of round $1 (not moq-bench, whose arguments name the same file).
relay_pid() {
    local pid
    for pid in $(pgrep -f "callgrind-out-file=$OUT/$1\." || true); do
        case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
        valgrind* | callgrind*) echo "$pid" && return ;;
        esac
    done
}

# Zeroes round $1's counters WARM seconds after its relay started; dumps them WINDOW later.
window() {
    local pid=""
    for _ in $(seq 600); do
        pid=$(relay_pid "$1")
        [ -n "$pid" ] && break
        sleep 0.1
    done
    sleep "$WARM"
    callgrind_control -z "$pid" >/dev/null 2>&1
    sleep "$WINDOW"
    callgrind_control -d window "$pid" >/dev/null 2>&1
}

# Runs round $1 on relay binary $2, its clients on versions $3 (space-separated, or none),
# with the relay arguments after them; prints the window's instructions.
round() {
    local label=$1 relay=$2 versions=$3
    shift 3
    local pins=()
    for version in $versions; do pins+=(--version "$version"); done
    window "$label" &
    local watcher=$!
    "$BENCH" run --profile chat --connections "$CONNS" --room "$ROOM" --rate 1 "${pins[@]}" \
        --seconds $((WARM + WINDOW + 5)) --warmup-limit 600 --startup 30 \
        --relay "valgrind --tool=callgrind --callgrind-out-file=$OUT/$label.%p $relay $TEMPLATE $*" \
        >"$OUT/$label.bench.txt" 2>&1
    wait "$watcher"
    if ! grep -qE '^chat .* 0\.000 ' "$OUT/$label.bench.txt"; then
        echo "round $label lost messages or failed: $OUT/$label.bench.txt" >&2
        exit 1
    fi
    grep '^summary:' "$OUT/$label".*.1 | awk '{print $2}'
}

echo "$DELIVERIES deliveries per window; callgrind files in $OUT"
for pair in $(seq "$PAIRS"); do
    a=$(round "A$pair" "$A" "$A_VERSIONS" "$@")
    b=$(round "B$pair" "$B" "$B_VERSIONS" "$@")
    awk -v p="$pair" -v a="$a" -v b="$b" -v d="$DELIVERIES" 'BEGIN {
        printf "pair %d: A %.0f  B %.0f instructions/delivery  B/A %.4f\n", p, a / d, b / d, b / a
    }'
done
