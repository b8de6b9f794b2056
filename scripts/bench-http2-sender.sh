#!/usr/bin/env bash
# scripts/bench-http2-sender.sh [--tokens N] [--connections C] [--unkind-gateway] [--no-callgrind]
#
# Measures the HTTP/2 sender alone against the simulator, each in its own process, no Redis or
# Postgres: `pushfleet send --protocol http2` (provider-token auth) of N clean tokens (default
# 1,000,000) over C connections (default 4). Prints wall time, notifications per second, sender
# CPU per notification and peak RSS, then the simulator's ledger.
#
# --unkind-gateway: the simulator as common HTTP/2 servers behave (see scripts/bench.sh): 250
# streams, a 65,535-byte window refunded per request, a TLS record per answer frame, and one token
# in five stale (alternately 400 BadDeviceToken and 410 Unregistered, each with a body).
#
# Then the figure that does not vary: instructions per notification, counted by
# `valgrind --tool=callgrind` (Debian's valgrind) on two fixed runs of the same sender (2,000 and
# 12,000 tokens, one connection, the simulator outside valgrind): the difference of their counts
# over 10,000, so the process's start, the TLS handshake and the token file's first read cancel
# out. The binary runs stripped of its debug information (valgrind 3.19 cannot read Swift's) and
# with PUSHFLEET_SYNC_MAIN=1 (valgrind 3.19 stops in libdispatch once a main thread calls
# dispatchMain; see Sources/PushFleetCLI/Entry.swift). --no-callgrind skips it.
#
# Not a test: it asserts nothing about speed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh
# shellcheck source=lib/harness.sh
source scripts/lib/harness.sh

tokens=1000000
connections=4
unkind=0
callgrind=1
while (($#)); do
    case "$1" in
        --no-callgrind) callgrind=0; shift ;;
        --unkind-gateway) unkind=1; shift ;;
        --tokens) tokens="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

pf_harness_start http2-sender --no-services
key_id="PFBENCHKEY"
team_id="PFBENCHTEAM"
pf_make_tokens "$tokens" >"$tmp/clean.txt"
simulator=(--provider-key "$key_id:$team_id:$tmp/certs/auth-key-public.pem")
if ((unkind)); then
    awk -v invalid="$tmp/invalid.txt" -v unregistered="$tmp/unregistered.txt" \
        'NR % 10 == 3 { print > invalid } NR % 10 == 8 { print > unregistered }' "$tmp/clean.txt"
    simulator+=(--max-concurrent-streams 250 --connection-window 65535 --window-update-per-request --flush-each-frame
        --invalid-tokens "$tmp/invalid.txt" --unregistered-tokens "$tmp/unregistered.txt")
fi
pf_start_simulator "${simulator[@]}"
[[ -n "$http2_port" ]] || { echo "mock-apns did not start:" >&2; cat "$tmp/mock.log" >&2; exit 1; }

echo "machine: $(nproc) cores, $(uname -m), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ((unkind)); then
    echo "== throughput: $tokens tokens (20% stale), $connections connections, unkind gateway"
else
    echo "== throughput: $tokens clean tokens, $connections connections"
fi
"$bin" send --protocol http2 --endpoint "127.0.0.1:$http2_port" --ca "$tmp/certs/ca.pem" \
    --auth-key "$tmp/certs/auth-key.p8" --key-id "$key_id" --team-id "$team_id" --topic com.example.bench \
    --payload '{"aps":{"alert":"Ding dong: someone is at the door","sound":"default"}}' \
    --connections "$connections" --json --tokens "$tmp/clean.txt" | tail -n 1
echo "ledger: $(curl -s "http://127.0.0.1:$admin_port/stats")"

if ((callgrind)); then
    pf_install_missing valgrind binutils
    cp "$bin" "$tmp/pushfleet-stripped"
    strip -g "$tmp/pushfleet-stripped"
    instructions() {
        head -n "$1" "$tmp/clean.txt" >"$tmp/fixed.txt"
        PUSHFLEET_SYNC_MAIN=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.$1" \
            "$tmp/pushfleet-stripped" send --protocol http2 --endpoint "127.0.0.1:$http2_port" --ca "$tmp/certs/ca.pem" \
            --auth-key "$tmp/certs/auth-key.p8" --key-id "$key_id" --team-id "$team_id" --topic com.example.bench \
            --payload '{"aps":{"alert":"Ding dong: someone is at the door","sound":"default"}}' \
            --connections 1 --json --tokens "$tmp/fixed.txt" >"$tmp/callgrind-send.$1" 2>"$tmp/callgrind-log.$1" ||
            { echo "callgrind run of $1 tokens failed:" >&2; tail -n 20 "$tmp/callgrind-log.$1" >&2; exit 1; }
        awk '/^summary:/ { print $2 }' "$tmp/callgrind.$1"
    }
    small="$(instructions 2000)"
    large="$(instructions 12000)"
    echo "== instructions (callgrind): $small for 2,000 tokens, $large for 12,000; per notification: $(( (large - small) / 10000 ))"
fi
