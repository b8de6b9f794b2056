#!/usr/bin/env bash
# scripts/chaos.sh [--tokens N] [--faults "a b ..."]: one HTTP/2 campaign per fault, through a fleet
# of a coordinator and two workers against the bundled simulator, with the fault injected once 30%
# of the audience is accepted. Prints one row per fault: did it complete, how many valid tokens were
# never delivered (lost), how many were delivered twice (duplicates, from the simulator's ledger),
# what `status` counted as resent, and the wall time from launch to the end.
#
# Faults: none, worker-kill (SIGKILL, a new worker starts), worker-freeze (SIGSTOP past its lease,
# then SIGCONT), worker-sigterm (drain, a new worker starts), coordinator-kill (SIGKILL, a new one
# starts 2 s later), apns-503 (every request answered 503 for 10 s), postgres-stop (10 s), and
# redis-flushall (every Redis key lost; the coordinator rebuilds the queue from Postgres), and
# redis-restart (Redis without persistence stopped and started again, empty).
#
# Release build, or PUSHFLEET_BIN. Starts its own Redis and Postgres on loopback and stops them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/services.sh
# shellcheck source=lib/harness.sh
source scripts/lib/harness.sh

tokens=1000000
faults="none worker-kill worker-freeze worker-sigterm coordinator-kill apns-503 postgres-stop redis-flushall redis-restart"
while (($#)); do
    case "$1" in
        --tokens) tokens="$2"; shift 2 ;;
        --faults) faults="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ "$tokens" =~ ^[1-9][0-9]*$ ]] || { echo "--tokens is a positive number" >&2; exit 2; }

fleet=()
pf_harness_start chaos
# The fleet of the fault under way, stopped before everything else.
trap 'stop_fleet; pf_harness_stop' EXIT
pg_port="${PUSHFLEET_POSTGRES_URL##*:}"
pg_port="${pg_port%%/*}"
topic="com.example.chaos"
lease_s=10

# 1% stale: every 200th token unregistered (410), every 200th from the 100th invalid (400).
head -c $((tokens * 32)) /dev/urandom | od -An -v -tx1 -w32 | tr -d ' ' >"$tmp/tokens.txt"
awk -v u="$tmp/unregistered.txt" -v b="$tmp/invalid.txt" 'NR % 200 == 0 { print > u } NR % 200 == 100 { print > b }' "$tmp/tokens.txt"
touch "$tmp/unregistered.txt" "$tmp/invalid.txt"
stale=$(($(wc -l <"$tmp/unregistered.txt") + $(wc -l <"$tmp/invalid.txt")))
valid=$((tokens - stale))

pf_start_simulator --provider-key "PFCHAOSKEY:PFCHAOSTEA:$tmp/certs/auth-key-public.pem" \
    --invalid-tokens "$tmp/invalid.txt" --unregistered-tokens "$tmp/unregistered.txt"
admin="http://127.0.0.1:$admin_port"
sender=(--protocol http2 --endpoint "127.0.0.1:$http2_port" --ca "$tmp/certs/ca.pem" --auth-key "$tmp/certs/auth-key.p8"
    --key-id PFCHAOSKEY --team-id PFCHAOSTEA --connection-spacing-s 0.2)

now() { date +%s.%N; }
field() { local value; value="$(sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$2" | head -n 1)"; echo "${value:-0}"; }
state_of() { sed -n 's/.*"state":"\([a-z]*\)".*/\1/p' <<<"$1"; }
status() { "$bin" status "$1" --json 2>/dev/null || echo '{}'; }

start_coordinator() { "$bin" coordinator --interval-ms 500 --outage-resume-s 5 >>"$tmp/coordinator.log" 2>&1 & fleet[0]=$!; }
start_worker() { "$bin" worker --topic "$topic" --connections 2 --lease-ms $((lease_s * 1000)) "${sender[@]}" >>"$tmp/worker.log" 2>&1 & fleet[$1]=$!; }
stop_fleet() {
    for pid in "${fleet[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${fleet[@]}"; do pf_wait_or_kill "$pid"; done
    fleet=()
}
postgres() { pf_as_pg "$PF_PG_DIR" "$PF_PG_BIN/pg_ctl" -D "$PF_PG_DIR/pgdata" -l "$PF_PG_DIR/postgres.log" -w "$@" >/dev/null; }

inject() {
    case "$1" in
        none) ;;
        worker-kill) kill -KILL "${fleet[1]}"; wait "${fleet[1]}" 2>/dev/null || true; start_worker 1 ;;
        worker-freeze) kill -STOP "${fleet[1]}"; sleep $((lease_s + 5)); kill -CONT "${fleet[1]}" ;;
        worker-sigterm) kill -TERM "${fleet[1]}"; wait "${fleet[1]}" 2>/dev/null || true; start_worker 1 ;;
        coordinator-kill) kill -KILL "${fleet[0]}"; wait "${fleet[0]}" 2>/dev/null || true; sleep 2; start_coordinator ;;
        apns-503) curl -s -X POST "$admin/outage?status=503" >/dev/null; sleep 10; curl -s -X DELETE "$admin/outage" >/dev/null ;;
        postgres-stop) postgres -m fast stop; sleep 10
            postgres -o "-p $pg_port -k '$PF_PG_DIR/sock' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start ;;
        redis-flushall) redis-cli -p "$PF_REDIS_PORT" FLUSHALL >/dev/null ;;
        redis-restart) pf_restart_redis ;;
        *) echo "unknown fault $1" >&2; exit 2 ;;
    esac
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "each fault: $tokens tokens ($stale stale), HTTP/2, 2 workers x 2 connections, lease $lease_s s, injected at 30% accepted"
printf '%-17s %-10s %9s %11s %8s %8s\n' fault state lost duplicates resent "wall s"
for fault in $faults; do
    curl -s -X POST "$admin/reset" >/dev/null
    start=$(now)
    id="$("$bin" launch --topic "$topic" --protocol http2 --tokens "$tmp/tokens.txt" --payload '{"aps":{"alert":"chaos"}}' 2>>"$tmp/launch.log" | tail -n 1)"
    start_coordinator
    start_worker 1
    start_worker 2
    until (($(field accepted "$(status "$id")") >= tokens * 3 / 10)); do sleep 0.3; done
    inject "$fault"
    # A fault nothing recovers from yet ends the wait after 120 s without progress.
    last=-1 idle_since=$SECONDS
    while :; do
        report="$(status "$id")"
        state="$(state_of "$report")"
        [[ "$state" == completed || "$state" == failed || "$state" == cancelled ]] && break
        accepted="$(field accepted "$report")"
        if [[ "$accepted" != "$last" ]]; then last="$accepted" idle_since=$SECONDS; fi
        ((SECONDS - idle_since < 120)) || break
        sleep 0.5
    done
    end=$(now)
    stats="$(curl -s "$admin/stats")"
    delivered="$(field accepted "$stats")"
    distinct="$(field distinct_tokens "$stats")"
    stop_fleet
    [[ "$state" == completed || "$state" == failed || "$state" == cancelled ]] || "$bin" campaign cancel "$id" >/dev/null 2>&1 || true
    printf '%-17s %-10s %9d %11d %8d %8s\n' "$fault" "${state:-unknown}" $((valid - distinct)) $((delivered - distinct)) \
        "$(field resent "$report")" "$(awk -v a="$end" -v b="$start" 'BEGIN { printf "%.1f", a - b }')"
done
