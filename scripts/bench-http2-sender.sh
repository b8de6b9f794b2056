#!/usr/bin/env bash
# scripts/bench-http2-sender.sh [--tokens N] [--connections C]
#
# Measures the HTTP/2 sender alone against the simulator, each in its own process, no Redis or
# Postgres: `pushfleet send --protocol http2` (provider-token auth) of N clean tokens (default
# 1,000,000) over C connections (default 4). Prints wall time, notifications per second, sender
# CPU per notification and peak RSS, then the simulator's ledger.
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
while (($#)); do
    case "$1" in
        --tokens) tokens="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

pf_harness_start http2-sender --no-services
key_id="PFBENCHKEY"
team_id="PFBENCHTEAM"
pf_start_simulator --provider-key "$key_id:$team_id:$tmp/certs/auth-key-public.pem"
[[ -n "$http2_port" ]] || { echo "mock-apns did not start:" >&2; cat "$tmp/mock.log" >&2; exit 1; }

echo "machine: $(nproc) cores, $(uname -m), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "== throughput: $tokens clean tokens, $connections connections"
pf_make_tokens "$tokens" >"$tmp/clean.txt"
"$bin" send --protocol http2 --endpoint "127.0.0.1:$http2_port" --ca "$tmp/certs/ca.pem" \
    --auth-key "$tmp/certs/auth-key.p8" --key-id "$key_id" --team-id "$team_id" --topic com.example.bench \
    --payload '{"aps":{"alert":"Ding dong: someone is at the door","sound":"default"}}' \
    --connections "$connections" --json --tokens "$tmp/clean.txt" | tail -n 1
echo "ledger: $(curl -s "http://127.0.0.1:$admin_port/stats")"
