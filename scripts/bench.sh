#!/usr/bin/env bash
# scripts/bench.sh [--tokens N] [--workers W] [--connections C] [--protocol binary|http2] [--error-delay-ms D]
#                  [--stale-percent P] [--doorbell] [--unkind-gateway] [--rate R] [--personalized]
#                  [--autogroup 0|1] [--service-weight W] [--registered] [--coordinator-interval-ms MS]
#                  [--answer-delay-ms D] [--simulator-nice N]
#
# The whole system on this machine, everything local: Redis, Postgres, the simulator, a
# coordinator and W workers as separate processes; one campaign of N tokens (default
# 10,000,000), clean unless --stale-percent P makes P% of them stale, spread evenly: over HTTP/2
# half of those are answered 400 BadDeviceToken and half 410 Unregistered; over the binary protocol
# all are answered InvalidToken (each closes a connection after the error delay: keep P small).
# Prints: launch rate, Redis memory per million tokens, wall time from launch to `completed` (the
# campaign's `finished_at` in Postgres, to the millisecond; the coordinator looks every 500 ms
# unless --coordinator-interval-ms says otherwise, which bounds how late it sees the end),
# notifications per second, worker CPU µs per notification, the same for the simulator, the
# coordinator, Redis and Postgres (from launch to completion), peak RSS per worker, resent and
# retried, and the reconciliation: Postgres's counts and the ledger's lost and duplicate counts,
# stale tokens counted as expected rejections. Not a test: it asserts nothing about speed.
#
# --doorbell measures the doorbell lane instead: `pushfleet demo --doorbell` (the simulator in
# its process, the coordinator and W workers in theirs) runs the N-token campaign while a ring
# goes every second by `POST /v1/notify` to a group of 3 users with 2 phones each, and prints the
# rings' p50/p99 latency from the request to the simulator's acceptance of the sixth phone.
#
# --rate R measures throttling instead: `pushfleet demo --rate R` launches the campaign (by default
# 20 seconds' worth, 20 x R tokens) with a fleet-wide limit of R notifications a second, and prints
# the deliveries of each second as the simulator's ledger counted them, with the spread of the full
# seconds (the first and last are partial).
#
# --personalized launches a personalized campaign: the audience is CSV with two fields per
# recipient (`first_name`, `offer`) and the payload a template naming both, rendered per
# recipient by the workers.
#
# --registered imports the audience into the registry first (`pushfleet tokens import`, timed and
# printed apart) and launches with `--from-registry`: then every rejection also updates its token's
# registry row, as for an app's own devices; a token file's rejections have no row to update.
#
# --unkind-gateway (HTTP/2) makes the simulator behave as common HTTP/2 servers do rather than as
# kindly as it can: 250 streams per connection, HTTP/2's 65,535-byte window for request bodies
# refunded with a WINDOW_UPDATE per request, every answer frame in a TLS record of its own; and 20%
# of the tokens stale (a rejection body each) unless --stale-percent says otherwise.
# --answer-delay-ms D (HTTP/2) makes the simulator write every answer D ms after it read the
# request, as a gateway across a network is heard from a round trip later: the delivery is then
# bound by the streams in flight and the round trip, as against APNs, rather than by this
# machine's two cores, which the fleet, the simulator, Redis and Postgres otherwise share.
# --simulator-nice N runs the simulator at niceness N (-20 to 19; below 0 as root): at -15 its work
# no longer waits behind the fleet's for a core, as APNs' work, done on Apple's machines, does not.
# --autogroup 0|1 sets kernel.sched_autogroup_enabled for the run and puts it back afterwards (as
# root): whether Linux groups processes by session, which decides whether the workers' niced
# campaign threads give way to Postgres, Redis and the API (docs/operations.md, "Sharing cores").
# --service-weight W runs Postgres, Redis and `pushfleet api` in a CPU cgroup of weight W (cgroup
# v2's scale, where a unit's default is 100), as systemd units with `CPUWeight=W` or pods with
# larger CPU requests would run them: the deployment operations.md asks for where the fleet shares
# cores with them. As root; with cgroup v1 its cpu.shares get W × 1024 / 100 (each session group
# of the root cgroup has 1024).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh
# shellcheck source=lib/harness.sh
source scripts/lib/harness.sh

tokens=
workers=2
connections=4
protocol=binary
error_delay_ms=500
stale_percent=
doorbell=0
unkind=0
rate=
personalized=0
autogroup_wanted=
service_weight=
registered=0
coordinator_interval_ms=500
answer_delay_ms=
simulator_nice=
while (($#)); do
    case "$1" in
        --tokens) tokens="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --protocol) protocol="$2"; shift 2 ;;
        --error-delay-ms) error_delay_ms="$2"; shift 2 ;;
        --stale-percent) stale_percent="$2"; shift 2 ;;
        --doorbell) doorbell=1; shift ;;
        --unkind-gateway) unkind=1; shift ;;
        --rate) rate="$2"; shift 2 ;;
        --personalized) personalized=1; shift ;;
        --autogroup) autogroup_wanted="$2"; shift 2 ;;
        --service-weight) service_weight="$2"; shift 2 ;;
        --registered) registered=1; shift ;;
        --coordinator-interval-ms) coordinator_interval_ms="$2"; shift 2 ;;
        --answer-delay-ms) answer_delay_ms="$2"; shift 2 ;;
        --simulator-nice) simulator_nice="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ "$protocol" == binary || "$protocol" == http2 ]] || { echo "--protocol is binary or http2" >&2; exit 2; }
[[ "$coordinator_interval_ms" =~ ^[1-9][0-9]*$ ]] || { echo "--coordinator-interval-ms is a number of milliseconds" >&2; exit 2; }
[[ -z "$rate" || "$rate" =~ ^[1-9][0-9]*$ ]] || { echo "--rate is a number of notifications a second" >&2; exit 2; }
((doorbell == 0)) || [[ -z "$rate" ]] || { echo "--doorbell and --rate are two different runs" >&2; exit 2; }
tokens="${tokens:-$([[ -n "$rate" ]] && echo $((rate * 20)) || echo 10000000)}"
((registered == 0 || personalized == 0)) || { echo "--registered launches from the registry, which holds no recipient values: not with --personalized" >&2; exit 2; }
((unkind == 0)) || [[ "$protocol" == http2 ]] || { echo "--unkind-gateway is for --protocol http2" >&2; exit 2; }
[[ -z "$answer_delay_ms" || "$answer_delay_ms" =~ ^[1-9][0-9]*$ ]] || { echo "--answer-delay-ms is a number of milliseconds" >&2; exit 2; }
[[ -z "$answer_delay_ms" || "$protocol" == http2 ]] || { echo "--answer-delay-ms is for --protocol http2" >&2; exit 2; }
[[ -z "$simulator_nice" ]] || { [[ "$simulator_nice" =~ ^-?[0-9]+$ ]] && ((simulator_nice >= -20 && simulator_nice <= 19)); } ||
    { echo "--simulator-nice is a niceness from -20 to 19" >&2; exit 2; }
[[ -z "$simulator_nice" ]] || ((simulator_nice >= 0 || EUID == 0)) || { echo "--simulator-nice below 0 needs root" >&2; exit 2; }
# The doorbell and rate runs start their simulator inside `pushfleet demo`, which these do not reach.
[[ -z "$answer_delay_ms$simulator_nice" ]] || { ((doorbell == 0)) && [[ -z "$rate" ]]; } ||
    { echo "--answer-delay-ms and --simulator-nice are for a campaign run, not with --doorbell or --rate" >&2; exit 2; }
stale_percent="${stale_percent:-$((unkind ? 20 : 0))}"
gateway_options=()
gateway_note=""
((unkind == 0)) || gateway_note=", unkind gateway"
((unkind == 0)) || gateway_options=(--max-concurrent-streams 250 --connection-window 65535 --window-update-per-request --flush-each-frame)
[[ -z "$answer_delay_ms" ]] || { gateway_options+=(--answer-delay-ms "$answer_delay_ms"); gateway_note+=", answers ${answer_delay_ms} ms late"; }
[[ -z "$simulator_nice" ]] || gateway_note+=", simulator at niceness $simulator_nice"
[[ "$stale_percent" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v p="$stale_percent" 'BEGIN { exit !(p <= 100) }' ||
    { echo "--stale-percent is a percentage from 0 to 100" >&2; exit 2; }

[[ -z "$service_weight" || "$service_weight" =~ ^[1-9][0-9]*$ ]] && ((${service_weight:-1} <= 10000)) ||
    { echo "--service-weight is a CPU weight from 1 to 10000" >&2; exit 2; }
service_cgroup=
service_mover=
simulator_renicer=
# Makes the services' cgroup and puts Postgres (its server and every backend it forks) and Redis in
# it; a loop puts each `pushfleet api` there as the demo starts it.
start_service_cgroup() {
    local root=/sys/fs/cgroup pid
    if [[ -f "$root/cgroup.controllers" ]] && grep -qw cpu "$root/cgroup.controllers"; then
        # A child gets cpu.weight only where its parent hands the controller down.
        grep -qw cpu "$root/cgroup.subtree_control" || echo +cpu >"$root/cgroup.subtree_control" ||
            { echo "--service-weight: the cpu controller is not enabled for children of $root" >&2; exit 2; }
        service_cgroup="$root/pushfleet-bench-$$"
        mkdir "$service_cgroup" && echo "$service_weight" >"$service_cgroup/cpu.weight"
    elif [[ -d "$root/cpu" ]]; then
        service_cgroup="$root/cpu/pushfleet-bench-$$"
        mkdir "$service_cgroup" && echo $((service_weight * 1024 / 100)) >"$service_cgroup/cpu.shares"
    else
        echo "--service-weight needs the cgroup cpu controller under $root" >&2; exit 2
    fi || { echo "--service-weight: cannot make $service_cgroup (root?)" >&2; exit 2; }
    local postmaster
    postmaster="$(head -n 1 "$tmp/pg/pgdata/postmaster.pid")"
    echo "$postmaster" >"$service_cgroup/cgroup.procs"
    cat "$tmp/redis/redis.pid" >"$service_cgroup/cgroup.procs"
    # The backends already running (a new one is forked into its server's cgroup); one may have ended.
    for pid in $(pgrep -P "$postmaster"); do echo "$pid" >"$service_cgroup/cgroup.procs" 2>/dev/null || true; done
    # The demo (a child of this script) starts `pushfleet api` as a child of its own.
    while kill -0 $$ 2>/dev/null && sleep 0.1; do
        for demo in $(pgrep -P $$); do
            for pid in $(pgrep -P "$demo" -f -- "^[^ ]+ api "); do echo "$pid" >"$service_cgroup/cgroup.procs" 2>/dev/null || true; done
        done
    done &
    service_mover=$!
}
# shellcheck disable=SC2317 # reached through the trap
bench_exit() {
    set +e  # every step runs, whatever an earlier one did
    [[ -z "$autogroup_before" ]] || echo "$autogroup_before" >"$autogroup_file"
    [[ -z "$service_mover" ]] || kill "$service_mover" 2>/dev/null || true
    [[ -z "$simulator_renicer" ]] || kill "$simulator_renicer" 2>/dev/null || true
    [[ -z "${tmp:-}" ]] || pf_harness_stop
    [[ -z "$service_cgroup" ]] || rmdir "$service_cgroup" 2>/dev/null ||
        echo "bench: $service_cgroup is left behind (a process still in it: see its cgroup.procs)" >&2
}
[[ -z "$autogroup_wanted" || "$autogroup_wanted" == 0 || "$autogroup_wanted" == 1 ]] || { echo "--autogroup is 0 or 1" >&2; exit 2; }
autogroup_file=/proc/sys/kernel/sched_autogroup_enabled
autogroup_before=
# Set first, and kept by pf_harness_start: whatever fails after it (a release build inside
# pf_harness_start included) still puts back what this run changed on the machine.
trap bench_exit EXIT
# Set before any process starts: Linux places a process in a group when it is forked or calls
# setsid, and leaves it there when the setting changes.
if [[ -n "$autogroup_wanted" ]]; then
    [[ -w "$autogroup_file" ]] || { echo "--autogroup needs a writable $autogroup_file (root, a kernel with session groups)" >&2; exit 2; }
    autogroup_before="$(cat "$autogroup_file")"
    echo "$autogroup_wanted" >"$autogroup_file"
fi
pf_harness_start bench
[[ -z "$service_weight" ]] || start_service_cgroup
tls=(--ca "$tmp/certs/ca.pem" --cert "$tmp/certs/client.pem" --key "$tmp/certs/client-key.pem")
redis_port="${PUSHFLEET_REDIS_URL##*:}"
topic="com.example.bench"

now() { date +%s.%N; }
# The other processes' CPU, sampled at launch and at completion: simulator, coordinator, Redis, Postgres.
others_ticks() { echo "$(cpu_ticks "$simulator_pid") $(cpu_ticks "$coordinator_pid") $(cpu_ticks "$redis_pid") $(tree_ticks "$postgres_pid")"; }
peak_rss_kb() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
redis_memory() { redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }

# Session groups decide whether the workers' niced campaign threads give way to Postgres, Redis
# and the API (docs/operations.md, "Sharing cores"): a doorbell figure means little without it.
autogroup="$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo unknown)"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -m), kernel.sched_autogroup_enabled $autogroup${service_weight:+, Postgres, Redis and the API at CPU weight $service_weight}, $(date -u +%Y-%m-%dT%H:%MZ)"

if ((doorbell)); then
    half="$(awk -v p="$stale_percent" 'BEGIN { print p / 2 }')"
    echo "run: doorbell rings during $tokens tokens ($stale_percent% stale), $workers workers x $connections connections, $protocol"
    status=0
    "$bin" demo --doorbell --tokens "$tokens" --protocol "$protocol" --workers "$workers" --connections "$connections" \
        --invalid-percent "$half" --unregistered-percent "$half" --error-delay-ms "$error_delay_ms" --certs "$tmp/certs" \
        --redis "$PUSHFLEET_REDIS_URL" --postgres "$PUSHFLEET_POSTGRES_URL" >"$tmp/demo.out" 2>"$tmp/demo.err" || status=$?
    grep -E '^ring ' "$tmp/demo.err" | tail -n 3 || true
    grep -E '^(reconciliation|doorbell|✔|✘)' "$tmp/demo.out" || true
    # Every ring's latency on one line, to pool several runs.
    awk '/^ring [0-9]+: 6 phones in / { printf "%s%s", (n++ ? " " : "rings (ms): "), $6 } END { if (n) print "" }' "$tmp/demo.err"
    ((status == 0)) || tail -n 20 "$tmp/demo.err" >&2
    exit "$status"
fi
if [[ -n "$rate" ]]; then
    echo "run: $tokens tokens limited to $rate a second, $workers workers x $connections connections, $protocol"
    status=0
    "$bin" demo --rate "$rate" --tokens "$tokens" --protocol "$protocol" --workers "$workers" --connections "$connections" \
        --invalid-percent 0 --unregistered-percent 0 --error-delay-ms "$error_delay_ms" --certs "$tmp/certs" \
        --redis "$PUSHFLEET_REDIS_URL" --postgres "$PUSHFLEET_POSTGRES_URL" >"$tmp/demo.out" 2>"$tmp/demo.err" || status=$?
    sed -n '/^reconciliation/,$p' "$tmp/demo.out"
    ((status == 0)) || tail -n 20 "$tmp/demo.err" >&2
    exit "$status"
fi
((personalized == 0)) || gateway_note="$gateway_note, personalized (2 fields)"
echo "run: $tokens tokens ($stale_percent% stale), $workers workers x $connections connections, $protocol, simulator error delay $error_delay_ms ms, coordinator every $coordinator_interval_ms ms$gateway_note$( ((registered)) && echo ", launched from the registry")"

head -c $((tokens * 32)) /dev/urandom | od -An -v -tx1 -w32 | tr -d ' ' >"$tmp/tokens.txt"
# Stale tokens, evenly spread: token i is stale when floor((i + 1) * S / N) > floor(i * S / N).
# Over HTTP/2 every other one goes to the simulator's 410 list; over binary all are invalid.
stale="$(awk -v n="$tokens" -v p="$stale_percent" 'BEGIN { printf "%d", n * p / 100 + 0.5 }')"
: >"$tmp/invalid.txt"
: >"$tmp/unregistered.txt"
if ((stale > 0)); then
    awk -v n="$tokens" -v s="$stale" -v split_half="$([[ "$protocol" == http2 ]] && echo 1 || echo 0)" \
        -v invalid="$tmp/invalid.txt" -v unregistered="$tmp/unregistered.txt" '
        { i = NR - 1; if (int((i + 1) * s / n) > int(i * s / n)) { k++; print > ((split_half && k % 2 == 0) ? unregistered : invalid) } }
    ' "$tmp/tokens.txt"
fi
audience="$tmp/tokens.txt"
payload='{"aps":{"alert":"Ding dong: someone is at the door","sound":"default"}}'
if ((personalized)); then
    audience="$tmp/audience.csv"
    awk 'BEGIN { print "token,first_name,offer" } { printf "%s,Name%d,%d%% off\n", $0, NR, 10 + NR % 90 }' "$tmp/tokens.txt" >"$audience"
    payload='{"aps":{"alert":"Hi {{first_name|there}}, {{offer}} today","sound":"default"}}'
fi
invalid_count="$(wc -l <"$tmp/invalid.txt")"
unregistered_count="$(wc -l <"$tmp/unregistered.txt")"

pf_start_simulator --error-delay-ms "$error_delay_ms" \
    --provider-key "PFBENCHKEY:PFBENCHTEA:$tmp/certs/auth-key-public.pem" \
    --invalid-tokens "$tmp/invalid.txt" --unregistered-tokens "$tmp/unregistered.txt" ${gateway_options[@]+"${gateway_options[@]}"}
simulator_pid="${pids[-1]}"
if [[ -n "$simulator_nice" ]]; then
    # Linux keeps a niceness per thread, and the Swift runtime sets its pool threads' own: each
    # thread is read from /proc and reniced while not yet at N, again as the simulator starts more.
    while kill -0 "$simulator_pid" 2>/dev/null; do
        for task in /proc/"$simulator_pid"/task/*; do
            read -r stat <"$task/stat" 2>/dev/null || continue
            read -ra fields <<<"${stat##*) }"  # from field 3 (state) on; niceness is field 19
            [[ "${fields[16]}" == "$simulator_nice" ]] || renice -n "$simulator_nice" -p "${task##*/}" >/dev/null 2>&1 || true
        done
        sleep 0.2
    done &
    simulator_renicer=$!
fi
redis_pid="$(cat "$tmp/redis/redis.pid")"
postgres_pid="$(head -n 1 "$tmp/pg/pgdata/postmaster.pid")"
if [[ "$protocol" == binary ]]; then
    sender=(--protocol binary --endpoint "127.0.0.1:$binary_port" "${tls[@]}")
else
    sender=(--protocol http2 --endpoint "127.0.0.1:$http2_port" --ca "$tmp/certs/ca.pem" --auth-key "$tmp/certs/auth-key.p8"
        --key-id PFBENCHKEY --team-id PFBENCHTEA --connection-spacing-s 0.2)
fi

audience_arguments=(--tokens "$audience")
if ((registered)); then
    imported="$(now)"
    "$bin" tokens import "$tmp/tokens.txt" --topic "$topic" --environment production >/dev/null
    echo "registry import                $(awk -v a="$imported" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }') (not counted below)"
    audience_arguments=(--from-registry)
fi

# Launch alone first, so that its rate and Redis's memory are measured without the fleet.
memory_before="$(redis_memory)"
start="$(now)"
id="$("$bin" launch --topic "$topic" --protocol "$protocol" "${audience_arguments[@]}" --payload "$payload" | tail -n 1)"
launched="$(now)"
memory_after="$(redis_memory)"

"$bin" coordinator --interval-ms "$coordinator_interval_ms" >"$tmp/coordinator.log" 2>&1 &
coordinator_pid=$!
pids+=($!)
read -r sim0 coord0 redis0 pg0 <<<"$(others_ticks)"
worker_pids=()
for i in $(seq "$workers"); do
    "$bin" worker --topic "$topic" --connections "$connections" "${sender[@]}" >"$tmp/worker-$i.log" 2>&1 &
    worker_pids+=($!)
    pids+=($!)
done

while :; do
    state="$("$bin" status "$id" --json | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p')"
    [[ "$state" == completed || "$state" == failed || "$state" == cancelled ]] && break
    sleep 0.5
done
read -r sim1 coord1 redis1 pg1 <<<"$(others_ticks)"
# When the coordinator ended it, not when this loop saw it (up to half a second later). A failed
# query falls back to the loop's time, and says so.
done_at="$(now)"
[[ "$id" =~ ^[0-9a-f-]{36}$ ]] && finished_at="$("$PF_PG_BIN/psql" -X -Atc \
    "SELECT extract(epoch FROM finished_at) FROM campaigns WHERE campaign_id = '$id'" "$PUSHFLEET_POSTGRES_URL" 2>"$tmp/psql.err")" || true
if [[ "${finished_at:-}" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    done_at="$finished_at"
else
    echo "bench: no finished_at for campaign $id in Postgres ($(head -c 300 "$tmp/psql.err")); the end is when the status poll saw it" >&2
fi

ticks=0
rss_max=0
for pid in "${worker_pids[@]}"; do
    ticks=$((ticks + $(cpu_ticks "$pid")))
    rss="$(peak_rss_kb "$pid")"
    ((rss > rss_max)) && rss_max=$rss
done
hz="$(getconf CLK_TCK)"
stats="$(curl -s "http://127.0.0.1:$admin_port/stats")"
accepted="$(sed -n 's/.*"accepted":\([0-9]*\).*/\1/p' <<<"$stats")"
distinct="$(sed -n 's/.*"distinct_tokens":\([0-9]*\).*/\1/p' <<<"$stats")"
status_json="$("$bin" status "$id" --json)"
status_field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$status_json"; }
rejected_json="$(sed -n 's/.*"rejected":{\([^}]*\)}.*/\1/p' <<<"$status_json")"
rejected_by() { local count; count="$(sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$rejected_json")"; echo "${count:-0}"; }
if [[ "$protocol" == http2 ]]; then
    expected_reasons="BadDeviceToken $invalid_count Unregistered $unregistered_count"
    got_reasons="BadDeviceToken $(rejected_by BadDeviceToken) Unregistered $(rejected_by Unregistered)"
else
    expected_reasons="InvalidToken $invalid_count"
    got_reasons="InvalidToken $(rejected_by InvalidToken)"
fi

# The simulator never accepts a stale token, so the ledger's distinct tokens are the valid tokens
# delivered: lost = valid - distinct.
awk -v n="$tokens" -v s="$start" -v l="$launched" -v d="$done_at" -v mb="$memory_before" -v ma="$memory_after" \
    -v t="$ticks" -v hz="$hz" -v sim="$((sim1 - sim0))" -v coord="$((coord1 - coord0))" -v redis="$((redis1 - redis0))" -v pg="$((pg1 - pg0))" -v rss="$rss_max" -v acc="$accepted" -v dis="$distinct" -v state="$state" \
    -v total="$(status_field total)" -v pacc="$(status_field accepted)" -v resent="$(status_field resent)" -v retried="$(status_field retried)" \
    -v rej="$(tr ',' '\n' <<<"$rejected_json" | awk -F: '{ r += $2 } END { print r + 0 }')" -v rejected_json="$rejected_json" \
    -v stale="$((invalid_count + unregistered_count))" -v expected="$expected_reasons" -v got="$got_reasons" 'BEGIN {
    valid = n - stale
    lost = valid - dis
    exact = state == "completed" && total == n && pacc == valid && rej == stale && got == expected && pacc + rej == total \
        && lost == 0 && dis == valid && acc - dis <= resent
    printf "state                          %s\n", state
    printf "launch                         %.1f s, %.0f tokens/s\n", l - s, n / (l - s)
    printf "Redis memory per million       %.1f MB\n", (ma - mb) / 1e6 / (n / 1e6)
    printf "launch -> completed            %.2f s\n", d - s
    printf "delivery (workers start -> completed)  %.2f s, %.0f notifications/s\n", d - l, n / (d - l)
    printf "worker CPU per notification    %.2f us (all workers, user+system)\n", t / hz * 1e6 / n
    printf "other CPU per notification     simulator %.2f us, coordinator %.2f us, Redis %.2f us, Postgres %.2f us\n", \
        sim / hz * 1e6 / n, coord / hz * 1e6 / n, redis / hz * 1e6 / n, pg / hz * 1e6 / n
    printf "peak RSS per worker            %.0f MB\n", rss / 1024
    printf "resent / retried               %d / %d\n", resent, retried
    printf "Postgres                       total %d, accepted %d of %d valid, rejected %d of %d stale {%s}, accepted + rejected %d\n", total, pacc, valid, rej, stale, rejected_json, pacc + rej
    printf "expected rejections            %s\n", expected
    printf "ledger                         accepted %d, distinct %d, lost %d, duplicates %d\n", acc, dis, lost, acc - dis
    printf "reconciliation                 %s\n", exact ? "exact: every valid token delivered once or counted as resent, every stale token rejected with its reason" : "NOT EXACT: see the counts above"
}'
"$bin" status "$id"
