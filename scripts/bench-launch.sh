#!/usr/bin/env bash
# scripts/bench-launch.sh [--tokens N] [--runs R] [--only plain|csv|personalized] [--callgrind]
#
# `pushfleet launch` alone, against a private Redis and Postgres on loopback: N recipients
# (default 1,000,000) launched R times (default 3; 0 for none) from each audience in turn, alternating:
#   plain         a token file, one payload;
#   csv           CSV with two fields per recipient (`token,first_name,offer`), the fields unused;
#   personalized  the same CSV and a template naming both fields, rendered per recipient.
# Redis is emptied before each launch. Prints, per launch, the wall time from start to the printed
# id, recipients a second, and the CPU of the launch process, Redis and Postgres over it.
#
# --callgrind adds the figure that does not vary with the machine's load: instructions per recipient
# of the launch process, counted by `valgrind --tool=callgrind` on launches of 20,000 and 120,000
# recipients of each audience, their difference over 100,000 (the process's start, its connections
# and its certificates cancel out). As in scripts/bench-http2-sender.sh, the binary runs stripped of
# its debug information and with PUSHFLEET_SYNC_MAIN=1. (--runs 0 --callgrind counts alone.)
#
# Not a test: it asserts nothing about speed.
set -euo pipefail
# Times and rates are read back by awk and `read`: a decimal point, whatever the locale.
export LC_ALL=C
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh
# shellcheck source=lib/harness.sh
source scripts/lib/harness.sh

tokens=1000000
runs=3
only=
callgrind=0
while (($#)); do
    case "$1" in
        --tokens) tokens="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --only) only="$2"; shift 2 ;;
        --callgrind) callgrind=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ "$tokens" =~ ^[1-9][0-9]*$ && "$runs" =~ ^[0-9]+$ ]] || { echo "--tokens is a positive number, --runs a number" >&2; exit 2; }
[[ -z "$only" || "$only" =~ ^(plain|csv|personalized)$ ]] || { echo "--only is plain, csv or personalized" >&2; exit 2; }

pf_harness_start bench-launch
((callgrind == 0)) || pf_install_missing valgrind binutils
redis_port="${PUSHFLEET_REDIS_URL##*:}"
redis_pid="$(cat "$tmp/redis/redis.pid")"
postgres_pid="$(head -n 1 "$tmp/pg/pgdata/postmaster.pid")"
hz="$(getconf CLK_TCK)"

seconds() { awk -v t="$1" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }'; }

# with_fields FILE: FILE's tokens as CSV with two fields per recipient.
with_fields() { awk 'BEGIN { print "token,first_name,offer" } { printf "%s,Name%d,%d%% off\n", $0, NR, 10 + NR % 90 }' "$1"; }

pf_make_tokens "$tokens" >"$tmp/tokens.txt"
with_fields "$tmp/tokens.txt" >"$tmp/audience.csv"
plain_payload='{"aps":{"alert":"Ding dong: someone is at the door","sound":"default"}}'
template='{"aps":{"alert":"Hi {{first_name|there}}, {{offer}} today","sound":"default"}}'

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -m), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "run: launch of $tokens recipients, $runs runs of each audience, Redis emptied before each"
printf '%-13s %4s %8s %14s %12s %10s %12s\n' audience run wall recipients/s "launch CPU" "Redis CPU" "Postgres CPU"

launch_once() {
    local kind="$1" run="$2" audience payload
    case "$kind" in
        plain) audience="$tmp/tokens.txt"; payload="$plain_payload" ;;
        csv) audience="$tmp/audience.csv"; payload="$plain_payload" ;;
        personalized) audience="$tmp/audience.csv"; payload="$template" ;;
    esac
    redis-cli -p "$redis_port" flushall >/dev/null
    local redis0 pg0 redis1 pg1 wall user system
    redis0="$(cpu_ticks "$redis_pid")"
    pg0="$(tree_ticks "$postgres_pid")"
    # Wall time and the launch process's own CPU (user, system), as bash's `time` reports them.
    local TIMEFORMAT='%R %U %S'
    { time "$bin" launch --topic com.example.bench --tokens "$audience" --payload "$payload" >"$tmp/launch.out" 2>"$tmp/launch.err"; } 2>"$tmp/time" ||
        { cat "$tmp/launch.err" >&2; return 1; }
    # The launch's Postgres backend has ended; let the postmaster reap it, so that its CPU counts.
    sleep 0.3
    redis1="$(cpu_ticks "$redis_pid")"
    pg1="$(tree_ticks "$postgres_pid")"
    read -r wall user system <"$tmp/time"
    printf '%-13s %4s %7ss %14s %11ss %9ss %11ss\n' "$kind" "$run" "$wall" \
        "$(awk -v n="$tokens" -v w="$wall" 'BEGIN { printf "%d", (w > 0 ? n / w : 0) }')" \
        "$(awk -v u="$user" -v s="$system" 'BEGIN { printf "%.2f", u + s }')" "$(seconds $((redis1 - redis0)))" "$(seconds $((pg1 - pg0)))"
}

for run in $(seq "$runs"); do
    for kind in plain csv personalized; do
        [[ -z "$only" || "$only" == "$kind" ]] || continue
        launch_once "$kind" "$run"
    done
done

((callgrind)) || exit 0
strip -g -o "$tmp/pushfleet.stripped" "$bin"
pf_make_tokens 120000 >"$tmp/cg-all.txt"
echo "callgrind: instructions of the launch process per recipient, (count at 120,000 - count at 20,000) / 100,000"
for kind in plain csv personalized; do
    [[ -z "$only" || "$only" == "$kind" ]] || continue
    counts=()
    for n in 20000 120000; do
        head -n "$n" "$tmp/cg-all.txt" >"$tmp/cg-tokens.txt"
        if [[ "$kind" == plain ]]; then cp "$tmp/cg-tokens.txt" "$tmp/cg-audience"; else with_fields "$tmp/cg-tokens.txt" >"$tmp/cg-audience"; fi
        payload="$plain_payload"
        [[ "$kind" != personalized ]] || payload="$template"
        redis-cli -p "$redis_port" flushall >/dev/null
        PUSHFLEET_SYNC_MAIN=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.out" \
            "$tmp/pushfleet.stripped" launch --topic com.example.bench --tokens "$tmp/cg-audience" --payload "$payload" \
            >/dev/null 2>"$tmp/callgrind.err" || { tail -n 20 "$tmp/callgrind.err" >&2; exit 1; }
        counts+=("$(awk '/^summary:/ { print $2 }' "$tmp/callgrind.out")")
        [[ -n "${counts[-1]}" ]] || { echo "callgrind wrote no summary for $kind, $n recipients" >&2; exit 1; }
    done
    printf '%-13s %s instructions per recipient\n' "$kind" "$(((counts[1] - counts[0]) / 100000))"
done
