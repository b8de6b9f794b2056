#!/usr/bin/env bash
# scripts/bench-http2-sender.sh [--tokens N] [--connections C] [--unkind-gateway]
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
# Not a test: it asserts nothing about speed. Wall and CPU time vary by about 20% from run to run
# on this machine; an instruction count would not, but none is taken yet: Debian 12's valgrind
# (3.19) stops with an internal SIGSEGV on any Swift program with an async main (in libdispatch's
# _dispatch_sig_thread, once the main thread hands itself over), and this virtual machine exposes
# no hardware counters to perf.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh
# shellcheck source=lib/harness.sh
source scripts/lib/harness.sh

tokens=1000000
connections=4
unkind=0
while (($#)); do
    case "$1" in
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
