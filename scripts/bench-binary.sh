#!/usr/bin/env bash
# scripts/bench-binary.sh [--tokens N] [--connections C] [--invalid-every K] [--error-delay-ms D]
#
# Measures the binary sender against the simulator, each in its own process, on this machine:
#   1. throughput: N clean tokens (default 1,000,000);
#   2. the write-ups' experiment: 100,000 tokens with one invalid token in every K (default 100),
#      at the simulator's default error delay (500 ms).
# Prints wall time, notifications per second, sender CPU per notification, peak RSS, connections
# opened and frames written in vain. Not a test: it asserts nothing about speed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh

tokens=1000000
connections=4
invalid_every=100
error_delay_ms=500
while (($#)); do
    case "$1" in
        --tokens) tokens="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --invalid-every) invalid_every="$2"; shift 2 ;;
        --error-delay-ms) error_delay_ms="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

pf_install_missing
tmp="$(mktemp -d /tmp/pushfleet-bench.XXXXXX)"
mock_pid=""
# shellcheck disable=SC2317 # reached through the trap
cleanup() {
    [[ -n "$mock_pid" ]] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# PUSHFLEET_BUILD_PATH picks another build folder (e.g. .build-release, to build beside a test run).
build_path="${PUSHFLEET_BUILD_PATH:-.build}"
swift build -c release --product pushfleet --scratch-path "$build_path" >&2
bin="$PWD/$build_path/release/pushfleet"
bash scripts/make-test-certs.sh "$tmp/certs" >/dev/null

# Random 32-byte tokens in hex, one per line.
make_tokens() { head -c $(($1 * 32)) /dev/urandom | od -An -v -tx1 -w32 | tr -d ' '; }

# Starts the simulator on free ports; sets mock_pid and binary_port.
start_mock() {
    local log="$tmp/mock.log"
    "$bin" mock-apns --certs "$tmp/certs" --binary-port 0 --feedback-port 0 --admin-port 0 --http2-port 0 "$@" >"$log" 2>&1 &
    mock_pid=$!
    for _ in $(seq 100); do
        if grep -q '^mock-apns binary=' "$log"; then
            binary_port="$(sed -n 's/^mock-apns binary=\([0-9]*\).*/\1/p' "$log")"
            admin_port="$(sed -n 's/.* admin=\([0-9]*\).*/\1/p' "$log")"
            return 0
        fi
        sleep 0.1
    done
    echo "mock-apns did not start:" >&2; cat "$log" >&2; exit 1
}

stop_mock() { kill "$mock_pid"; wait "$mock_pid" 2>/dev/null || true; mock_pid=""; }

send() {
    "$bin" send --endpoint "127.0.0.1:$binary_port" --ca "$tmp/certs/ca.pem" \
        --cert "$tmp/certs/client.pem" --key "$tmp/certs/client-key.pem" \
        --payload '{"aps":{"alert":"Ding dong: someone is at the door","sound":"default"}}' \
        --connections "$connections" --json "$@" | tail -n 1
}

echo "machine: $(nproc) cores, $(uname -m), $(date -u +%Y-%m-%dT%H:%MZ)"

echo "== 1. throughput: $tokens clean tokens, $connections connections"
make_tokens "$tokens" >"$tmp/clean.txt"
start_mock --error-delay-ms "$error_delay_ms"
send --tokens "$tmp/clean.txt"
echo "ledger: $(curl -s "http://127.0.0.1:$admin_port/stats")"
stop_mock

echo "== 2. the write-ups' experiment: 100000 tokens, 1 invalid in $invalid_every, error delay $error_delay_ms ms, $connections connections"
make_tokens 100000 >"$tmp/seeds.txt"
awk -v k="$invalid_every" 'NR % k == k / 2' "$tmp/seeds.txt" >"$tmp/invalid.txt"
start_mock --error-delay-ms "$error_delay_ms" --invalid-tokens "$tmp/invalid.txt"
send --tokens "$tmp/seeds.txt" >"$tmp/seeds.json" || true
cat "$tmp/seeds.json"
echo "ledger: $(curl -s "http://127.0.0.1:$admin_port/stats")"
stop_mock
