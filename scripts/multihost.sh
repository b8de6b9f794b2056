#!/usr/bin/env bash
# scripts/multihost.sh [--tokens N] [--workers W] [--loss-permille L] [--delay-ms R,P,A]
#                      [--lease-s S] [--partition-s S] [--no-partition | --no-baseline]
#                      [--logs DIR] [--cleanup]
#
# Several hosts on one machine. Each of Redis, Postgres, the APNs simulator, the coordinator and W
# workers (default 3) runs in a network namespace of its own, with one veth link to a bridge in the
# namespace pfmh-net (the switch), on 10.88.0.0/24:
#
#     pfmh-redis 10.88.0.2   pfmh-pg 10.88.0.3   pfmh-apns 10.88.0.4 (name pfmh-apns)
#     pfmh-coord 10.88.0.5 (the coordinator; `launch` and `status` run there too)
#     pfmh-w1 .. pfmh-wW 10.88.0.11 ..  (one `pushfleet worker` each)
#
# Loss and delay on the links. This kernel has no netem (CONFIG_NET_SCH_NETEM is not set: `tc qdisc
# add ... netem` answers "Specified qdisc kind is unknown"), so:
#   - loss is real packet loss: nftables on the switch drops L per mille (default 5) of the packets
#     entering and, independently, of those leaving each link (numgen random), so a path between two
#     hosts loses about 2L per mille each way. Segmentation offloads are off on the veths, so a
#     dropped packet is one wire-sized packet, not a 64 KB GSO burst.
#   - delay is a userspace relay (scripts/lib/delay-relay.py): each server listens on its
#     namespace's loopback, and the relay on the host's address holds every chunk R, P or A ms
#     (default 2, 5 and 20 ms: Redis, Postgres, APNs) in each direction, in order, before passing it
#     on. Round trips grow by twice that; the relay's own hop is loopback, without loss.
#   - the ledger (the simulator's admin port) is read from inside pfmh-apns, off the lossy network.
#
# Runs: a baseline campaign (HTTP/2, N tokens, default 1,000,000, 1% stale: every 200th token
# Unregistered, every 200th from the 100th BadDeviceToken), then the same with a partition: once 30%
# of the audience is accepted, every packet to and from worker host pfmh-w2 is dropped on the switch
# for S seconds (default 20, twice the 10 s shard lease), then the link heals. The other workers
# take its shards over once the coordinator re-queues them (lease expired); what pfmh-w2 had sent
# before the partition but not checkpointed is sent again, which `resent` must cover. The default
# size keeps the campaign running past the heal, so pfmh-w2 is seen delivering again.
# After each run the fleet is stopped and, before the ledger is read, the script waits (up to 60 s)
# until no worker host still holds unacknowledged bytes for APNs in its sockets.
#
# Prints per run: a timeline, each host's counters (from its /metrics), the switch's counters, and
# the reconciliation. Exits 1 if a guarantee fails in any run: the campaign `completed`; Postgres
# has accepted = valid tokens, rejected = stale tokens, accepted + rejected = total; the ledger
# has every valid token at least once (lost 0); its duplicates <= `resent` from `status --json`.
#
# Needs root (namespaces, nft); installs nftables, ethtool, iproute2 (and python3) when missing.
# Release build, or PUSHFLEET_BIN. Traffic stays on this machine: the switch has no uplink, and the
# root namespace gets no address on it. Leaves no namespace, veth or process behind (trap on exit);
# after a SIGKILL of the script, --cleanup removes what a run left.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh
# shellcheck source=lib/harness.sh
source scripts/lib/harness.sh

tokens=1000000
workers=3
loss_permille=5
delays="2,5,20"
lease_s=10
partition_s=20
runs="baseline partition"
logs=""
cleanup_only=0
while (($#)); do
    case "$1" in
        --tokens) tokens="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        --loss-permille) loss_permille="$2"; shift 2 ;;
        --delay-ms) delays="$2"; shift 2 ;;
        --lease-s) lease_s="$2"; shift 2 ;;
        --partition-s) partition_s="$2"; shift 2 ;;
        --no-partition) runs="baseline"; shift ;;
        --no-baseline) runs="partition"; shift ;;
        --logs) logs="$2"; shift 2 ;;
        --cleanup) cleanup_only=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[[ "$tokens" =~ ^[1-9][0-9]*$ ]] || { echo "--tokens is a positive number" >&2; exit 2; }
[[ "$workers" =~ ^[1-9][0-9]?$ ]] && ((workers <= 50)) || { echo "--workers is 1 to 50" >&2; exit 2; }
[[ "$loss_permille" =~ ^[0-9]+$ ]] && ((loss_permille < 1000)) || { echo "--loss-permille is 0 to 999" >&2; exit 2; }
[[ "$delays" =~ ^[0-9]+,[0-9]+,[0-9]+$ ]] || { echo "--delay-ms is REDIS,POSTGRES,APNS in ms, e.g. 2,5,20" >&2; exit 2; }
IFS=, read -r delay_redis delay_pg delay_apns <<<"$delays"
[[ "$lease_s" =~ ^[1-9][0-9]*$ ]] || { echo "--lease-s is a positive number" >&2; exit 2; }
[[ "$partition_s" =~ ^[1-9][0-9]*$ ]] || { echo "--partition-s is a positive number" >&2; exit 2; }
[[ "$runs" != *partition* ]] || ((workers >= 2)) || { echo "a partition needs --workers 2 or more" >&2; exit 2; }

net=pfmh-net                  # the switch's namespace
hosts=(redis pg apns coord)   # host names; the namespace is pfmh-NAME, its veth on the switch v-NAME
declare -A ip_of=([redis]=10.88.0.2 [pg]=10.88.0.3 [apns]=10.88.0.4 [coord]=10.88.0.5)
for i in $(seq "$workers"); do hosts+=("w$i"); ip_of["w$i"]="10.88.0.$((10 + i))"; done
cut_host=w2                   # the worker host the partition cuts off
topic="com.example.multihost"

# Everything of ours is named pfmh-*: namespaces, and their /etc/netns/ files (the per-namespace
# /etc/hosts that `ip netns exec` mounts).
our_namespaces() { ip netns list 2>/dev/null | awk '$1 ~ /^pfmh-/ { print $1 }'; }
teardown_network() {
    local ns
    for ns in $(our_namespaces); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    done
    for ns in $(our_namespaces); do
        ip netns del "$ns" 2>/dev/null || echo "multihost: cannot delete namespace $ns" >&2
    done
    rm -rf /etc/netns/pfmh-*
    # /etc/netns itself, if this script made it and nothing else is in it.
    ((${made_etc_netns:-0} == 0)) || rmdir /etc/netns 2>/dev/null || true
}

pf_is_root || { echo "multihost: needs root (network namespaces, nft, veths)" >&2; exit 1; }
if ((cleanup_only)); then
    teardown_network
    echo "multihost: removed namespaces pfmh-* and /etc/netns/pfmh-*"
    exit 0
fi
if [[ -n "$(our_namespaces)" || -n "$(compgen -G '/etc/netns/pfmh-*' || true)" ]]; then
    echo "multihost: namespaces pfmh-* (or /etc/netns/pfmh-*) exist already: another run, or one killed" \
        "with SIGKILL; scripts/multihost.sh --cleanup removes them" >&2
    exit 1
fi

extra_packages=(iproute2 nftables ethtool)
command -v python3 >/dev/null 2>&1 || extra_packages+=(python3)
pf_install_missing "${extra_packages[@]}"
for tool in ip nft ethtool ss python3; do
    command -v "$tool" >/dev/null 2>&1 || { echo "multihost: $tool not found after installing" >&2; exit 1; }
done

pf_harness_start multihost --no-services
fleet=()
redis_port=""   # Redis's and Postgres's ports on their namespaces' loopback
pg_port=""
stop_fleet() {
    local pid
    for pid in "${fleet[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${fleet[@]}"; do pf_wait_or_kill "$pid"; wait "$pid" 2>/dev/null || true; done
    fleet=()
}
# shellcheck disable=SC2016 # the $1 and $2 of `bash -c` are the inner shell's
on_exit() {
    local status=$?
    trap - EXIT INT TERM
    stop_fleet
    if [[ -n "$logs" && -d "${tmp:-}" ]]; then
        mkdir -p "$logs" || true
        cp -r "$tmp"/run-* "$tmp"/*.log "$logs"/ 2>/dev/null || true
    fi
    if [[ -n "$redis_port" ]]; then
        ip netns exec pfmh-redis bash -c 'source scripts/lib/services.sh; PF_REDIS_DIR=$1; PF_REDIS_PORT=$2; pf_stop_services' \
            _ "$tmp/redis" "$redis_port" || true
    fi
    if [[ -n "$pg_port" ]]; then
        ip netns exec pfmh-pg bash -c 'source scripts/lib/services.sh; PF_PG_DIR=$1; pf_stop_services' _ "$tmp/pg" || true
    fi
    pf_harness_stop
    teardown_network
    exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
field() { local value; value="$(sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" <<<"$2" | head -n 1)"; echo "${value:-0}"; }
state_of() { sed -n 's/.*"state":"\([a-z]*\)".*/\1/p' <<<"$1"; }
# The sum of a JSON object of counts, e.g. "rejected":{"BadDeviceToken":1500,"Unregistered":1500}.
object_sum() { sed -n "s/.*\"$1\":{\([^}]*\)}.*/\1/p" <<<"$2" | tr ',' '\n' | awk -F: '{ s += $2 } END { print s + 0 }'; }
# Runs a command on a host. Not for `&`: a backgrounded function is a subshell, and $! its PID; the
# background starts below call `ip netns exec` themselves, which execs the command (same PID).
in_host() { local host="$1"; shift; ip netns exec "pfmh-$host" "$@"; }

# --- The network ------------------------------------------------------------------------------
echo "multihost: setting up the switch and ${#hosts[@]} hosts" >&2
ip netns add "$net"
ip -n "$net" link set lo up
ip -n "$net" link add br0 type bridge
ip -n "$net" link set br0 up
[[ -d /etc/netns ]] || { mkdir /etc/netns && made_etc_netns=1; }
{
    echo "127.0.0.1 localhost"
    echo "::1 localhost"
    for host in "${hosts[@]}"; do echo "${ip_of[$host]} pfmh-$host"; done
} >"$tmp/hosts"
for host in "${hosts[@]}"; do
    ns="pfmh-$host"
    ip netns add "$ns"
    mkdir -p "/etc/netns/$ns"
    cp "$tmp/hosts" "/etc/netns/$ns/hosts"
    ip -n "$ns" link set lo up
    ip -n "$net" link add "v-$host" type veth peer name eth0 netns "$ns"
    ip -n "$net" link set "v-$host" master br0 up
    ip -n "$ns" addr add "${ip_of[$host]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    # One dropped packet is one wire-sized packet: no 64 KB segments through the switch.
    ip netns exec "$net" ethtool -K "v-$host" tso off gso off gro off >/dev/null 2>&1 || true
    ip netns exec "$ns" ethtool -K eth0 tso off gso off gro off >/dev/null 2>&1 || true
done
# The switch: a counter of what it forwards, the partition chain (empty but during a partition),
# then loss on each link, each direction on its own.
{
    echo "table bridge pfmh {"
    echo "  counter forwarded {}"
    echo "  counter lost {}"
    echo "  counter partitioned {}"
    echo "  chain partition {}"
    echo "  chain forward {"
    echo "    type filter hook forward priority 0; policy accept;"
    echo "    counter name forwarded"
    echo "    jump partition"
    if ((loss_permille > 0)); then
        for host in "${hosts[@]}"; do
            echo "    iifname \"v-$host\" numgen random mod 1000 < $loss_permille counter name lost drop"
            echo "    oifname \"v-$host\" numgen random mod 1000 < $loss_permille counter name lost drop"
        done
    fi
    echo "  }"
    echo "}"
} >"$tmp/switch.nft"
ip netns exec "$net" nft -f "$tmp/switch.nft"
switch_counter() { ip netns exec "$net" nft list counter bridge pfmh "$1" | awk '$1 == "packets" { print $2 }'; }
partition() {
    ip netns exec "$net" nft add rule bridge pfmh partition iifname "v-$1" counter name partitioned drop
    ip netns exec "$net" nft add rule bridge pfmh partition oifname "v-$1" counter name partitioned drop
}
heal() { ip netns exec "$net" nft flush chain bridge pfmh partition; }

# --- The servers, each on its namespace's loopback behind a delaying relay on the host's address ---
declare -A relay_pid=()
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo "?"; }
# start_relay HOST PORT LOCAL_PORT DELAY_MS
start_relay() {
    ip netns exec "pfmh-$1" python3 scripts/lib/delay-relay.py "${ip_of[$1]}:$2" "127.0.0.1:$3" "$4" >"$tmp/relay-$1.log" 2>&1 &
    pids+=($!)
    relay_pid[$1]=$!
    for _ in $(seq 100); do grep -q '^delay-relay ready' "$tmp/relay-$1.log" && return 0; sleep 0.1; done
    echo "multihost: the relay on pfmh-$1 (${ip_of[$1]}:$2 -> 127.0.0.1:$3) did not start:" >&2
    cat "$tmp/relay-$1.log" >&2
    return 1
}

# shellcheck disable=SC2016 # the $1 of `bash -c` is the inner shell's
redis_port="$(in_host redis bash -c 'source scripts/lib/services.sh && pf_start_redis "$1" && echo "$PF_REDIS_PORT"' _ "$tmp/redis")" ||
    { echo "multihost: Redis did not start on pfmh-redis (${ip_of[redis]})" >&2; exit 1; }
# shellcheck disable=SC2016
pg_url="$(in_host pg bash -c 'source scripts/lib/services.sh && pf_start_postgres "$1" && echo "$PUSHFLEET_POSTGRES_URL"' _ "$tmp/pg")" ||
    { echo "multihost: Postgres did not start on pfmh-pg (${ip_of[pg]})" >&2; exit 1; }
pg_port="${pg_url##*:}"
pg_port="${pg_port%%/*}"
start_relay redis 6379 "$redis_port" "$delay_redis"
start_relay pg 5432 "$pg_port" "$delay_pg"
export PUSHFLEET_REDIS_URL="redis://${ip_of[redis]}:6379"
export PUSHFLEET_POSTGRES_URL="postgres://postgres@${ip_of[pg]}:5432/pushfleet?connect_timeout=60"

# Tokens, one file per run so that the second launch does not meet tokens the first one already
# found stale; the simulator knows every run's stale tokens.
read -ra run_list <<<"$runs"
: >"$tmp/unregistered.txt"
: >"$tmp/invalid.txt"
for run in "${run_list[@]}"; do
    pf_make_tokens "$tokens" >"$tmp/tokens-$run.txt"
    awk -v u="$tmp/unregistered.txt" -v b="$tmp/invalid.txt" 'NR % 200 == 0 { print >> u } NR % 200 == 100 { print >> b }' "$tmp/tokens-$run.txt"
done
stale=$(((tokens / 200) + (tokens + 100) / 200))
valid=$((tokens - stale))

# The simulator in pfmh-apns: the harness starts it through a wrapper that enters the namespace.
# Its certificate names pfmh-apns, which each host's /etc/hosts resolves to 10.88.0.4.
bash scripts/make-test-certs.sh "$tmp/certs" pfmh-apns >/dev/null
printf '#!/bin/sh\nexec ip netns exec pfmh-apns %q "$@"\n' "${PUSHFLEET_SIMULATOR_BIN:-$bin}" >"$tmp/simulator-in-pfmh-apns"
chmod +x "$tmp/simulator-in-pfmh-apns"
PUSHFLEET_SIMULATOR_BIN="$tmp/simulator-in-pfmh-apns" pf_start_simulator \
    --provider-key "PFMULTIKEY:PFMULTITEA:$tmp/certs/auth-key-public.pem" \
    --invalid-tokens "$tmp/invalid.txt" --unregistered-tokens "$tmp/unregistered.txt"
simulator_pid="${pids[-1]}"
[[ -n "$http2_port" && -n "$admin_port" ]] || { echo "multihost: the simulator did not start on pfmh-apns:" >&2; cat "$tmp/mock.log" >&2; exit 1; }
start_relay apns 2197 "$http2_port" "$delay_apns"
ledger() { in_host apns curl -s --max-time 10 "http://127.0.0.1:$admin_port/$1" "${@:2}"; }
sender=(--protocol http2 --endpoint pfmh-apns:2197 --ca "$tmp/certs/ca.pem" --auth-key "$tmp/certs/auth-key.p8"
    --key-id PFMULTIKEY --team-id PFMULTITEA --connection-spacing-s 0.2)

# --- The fleet -------------------------------------------------------------------------------
# Every process of the fleet serves /metrics on 127.0.0.1 of its own namespace, on a port of its
# run (9101, 9102, ...), so that a scrape never reaches a process of an earlier run.
start_coordinator() {
    ip netns exec pfmh-coord "$bin" coordinator --interval-ms 500 --metrics-port "$metrics_port" --metrics-host 127.0.0.1 \
        >>"$rundir/coord.log" 2>&1 &
    fleet+=($!)
}
start_worker() {
    ip netns exec "pfmh-$1" "$bin" worker --topic "$topic" --connections 2 --lease-ms $((lease_s * 1000)) --worker-id "pfmh-$1" \
        --metrics-port "$metrics_port" --metrics-host 127.0.0.1 "${sender[@]}" >>"$rundir/$1.log" 2>&1 &
    fleet+=($!)
}
metrics() { in_host "$1" curl -s --max-time 5 "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null || true; }
# metric TEXT NAME [LABEL_PATTERN]: a counter's value from Prometheus text (0 when absent).
metric() { awk -v name="$2" -v labels="${3:-}" 'index($1, name) == 1 && (labels == "" || index($0, labels)) { v += $NF } END { printf "%d", v }' <<<"$1"; }
host_accepted() { metric "$(metrics "$1")" pushfleet_notifications_total 'outcome="accepted"'; }
status_json() { in_host coord "$bin" status "$1" --json 2>/dev/null || echo '{}'; }
# Bytes the worker hosts' sockets to APNs still hold unacknowledged (Send-Q), over every worker host.
apns_send_queues() {
    local host total=0 q
    for host in "${hosts[@]}"; do
        [[ "$host" == w* ]] || continue
        q="$(in_host "$host" ss -Htn state all dst "${ip_of[apns]}" dport = :2197 2>/dev/null | awk '{ s += $3 } END { print s + 0 }')"
        total=$((total + q))
    done
    echo "$total"
}

declare -A result=()
metrics_port=9100
failures=0

# run_campaign NAME: one campaign through the fleet; NAME "partition" cuts pfmh-w2 off at 30%.
run_campaign() {
    local run="$1" id start report state accepted last=-1 idle_since=$SECONDS next_print=0
    local cut_at="" healed_at="" back_at="" cut_accepted=0 healed_accepted=0 reaped_seen=0 t lost0 part0 fwd0 late_wait=0 q
    rundir="$tmp/run-$run"
    metrics_port=$((metrics_port + 1))
    mkdir -p "$rundir"
    echo
    if [[ "$run" == partition ]]; then
        echo "== run: partition: pfmh-$cut_host (${ip_of[$cut_host]}) cut off at 30% accepted for $partition_s s"
    else
        echo "== run: baseline: no partition"
    fi
    ledger reset -X POST >/dev/null
    lost0="$(switch_counter lost)"; part0="$(switch_counter partitioned)"; fwd0="$(switch_counter forwarded)"
    start=$(now)
    id="$(in_host coord "$bin" launch --topic "$topic" --protocol http2 --tokens "$tmp/tokens-$run.txt" \
        --payload '{"aps":{"alert":"multihost"}}' 2>>"$rundir/launch.log" | tail -n 1)" ||
        { echo "multihost: launch from pfmh-coord failed (Redis ${ip_of[redis]}:6379, Postgres ${ip_of[pg]}:5432):" >&2; tail -n 20 "$rundir/launch.log" >&2; return 1; }
    printf '  t=%5.1f s  launched %s from pfmh-coord (%d tokens)\n' "$(since "$start")" "$id" "$tokens"
    start_coordinator
    for host in "${hosts[@]}"; do [[ "$host" != w* ]] || start_worker "$host"; done

    while :; do
        report="$(status_json "$id")"
        state="$(state_of "$report")"
        accepted="$(field accepted "$report")"
        t="$(since "$start")"
        if [[ "$run" == partition && -z "$cut_at" ]] && ((accepted >= tokens * 3 / 10)); then
            partition "$cut_host"
            cut_at=$(now)
            # Read after the cut: answers the host had received by then still count as its own.
            cut_accepted="$(host_accepted "$cut_host")"
            printf '  t=%5.1f s  accepted %d: partition: every packet to and from pfmh-%s dropped on the switch (it had accepted %d)\n' \
                "$t" "$accepted" "$cut_host" "$cut_accepted"
        fi
        if [[ -n "$cut_at" && -z "$healed_at" ]] && awk -v a="$(now)" -v b="$cut_at" -v s="$partition_s" 'BEGIN { exit !(a - b >= s) }'; then
            heal
            healed_at=$(now)
            healed_accepted="$(host_accepted "$cut_host")"
            printf '  t=%5.1f s  accepted %d: partition healed after %s s (pfmh-%s accepted %d meanwhile)\n' "$t" "$accepted" \
                "$(awk -v a="$healed_at" -v b="$cut_at" 'BEGIN { printf "%.1f", a - b }')" "$cut_host" $((healed_accepted - cut_accepted))
        elif [[ -n "$healed_at" && -z "$back_at" ]] && (($(host_accepted "$cut_host") > healed_accepted)); then
            back_at=$(now)
            printf '  t=%5.1f s  pfmh-%s delivers again, %s s after the heal\n' "$t" "$cut_host" \
                "$(awk -v a="$back_at" -v b="$healed_at" 'BEGIN { printf "%.1f", a - b }')"
        fi
        # Shards the coordinator re-queued because their lease expired, as it logs them.
        while IFS= read -r line; do
            printf '  t=%5.1f s  coordinator: re-queued %s shard(s) whose lease expired\n' "$t" "$(sed -n 's/.*shards=\([0-9]*\).*/\1/p' <<<"$line")"
        done < <(grep 're-queued shards whose lease expired' "$rundir/coord.log" 2>/dev/null | tail -n +$((reaped_seen + 1)))
        reaped_seen="$(grep -c 're-queued shards whose lease expired' "$rundir/coord.log" 2>/dev/null || true)"
        if [[ "$state" == completed || "$state" == failed || "$state" == cancelled ]]; then
            if [[ -z "${result[$run.wall]:-}" ]]; then
                result[$run.wall]="$t"
                printf '  t=%5.1f s  %s: accepted %d, rejected %d, resent %d\n' "$t" "$state" "$accepted" "$(object_sum rejected "$report")" "$(field resent "$report")"
            fi
            # A partition still under way runs its course: its end is part of the run.
            [[ -n "$cut_at" && -z "$healed_at" ]] || break
        elif ((SECONDS >= next_print)); then
            printf '  t=%5.1f s  %s, accepted %d of %d\n' "$t" "${state:-?}" "$accepted" "$valid"
            next_print=$((SECONDS + 5))
        fi
        if [[ "$accepted" != "$last" ]]; then last="$accepted" idle_since=$SECONDS; fi
        if ((SECONDS - idle_since >= 180)); then
            printf '  t=%5.1f s  no progress for 180 s: giving up (state %s)\n' "$t" "${state:-?}"
            [[ -z "$cut_at" || -n "$healed_at" ]] || heal
            break
        fi
        sleep 1
    done

    # Each host's own counters, before its process stops.
    local -A host_metrics=()
    for host in "${hosts[@]}"; do [[ "$host" != w* && "$host" != coord ]] || host_metrics[$host]="$(metrics "$host")"; done
    stop_fleet
    # What the fleet wrote and the network still holds (e.g. what the cut-off host queued before the
    # partition) reaches the simulator before the ledger is read.
    while q="$(apns_send_queues)"; ((q > 0 && late_wait < 60)); do sleep 1; late_wait=$((late_wait + 1)); done
    ((late_wait == 0)) || printf '  waited %d s after the fleet stopped for %d bytes still unacknowledged to APNs\n' "$late_wait" "$q"

    report="$(status_json "$id")"
    local stats total p_accepted p_rejected resent delivered distinct twice lost duplicates ok=1 checks=()
    stats="$(ledger stats)"
    total="$(field total "$report")"
    p_accepted="$(field accepted "$report")"
    p_rejected="$(object_sum rejected "$report")"
    resent="$(field resent "$report")"
    delivered="$(field accepted "$stats")"
    distinct="$(field distinct_tokens "$stats")"
    twice="$(field duplicated_tokens "$stats")"
    lost=$((valid - distinct))
    duplicates=$((delivered - distinct))
    state="$(state_of "$report")"

    echo "  hosts (each from its own /metrics):"
    printf '    %-12s %9s %8s %10s %10s %9s %9s %9s\n' host accepted rejected "shards" completed lease_lost abandoned released
    for host in "${hosts[@]}"; do
        [[ "$host" == w* ]] || continue
        local m="${host_metrics[$host]}"
        printf '    %-12s %9d %8d %10d %10d %9d %9d %9d\n' "pfmh-$host" \
            "$(metric "$m" pushfleet_notifications_total 'outcome="accepted"')" "$(metric "$m" pushfleet_notifications_total 'outcome="rejected"')" \
            "$(metric "$m" pushfleet_shards_claimed_total)" "$(metric "$m" pushfleet_shard_runs_ended_total 'ending="completed"')" \
            "$(metric "$m" pushfleet_shard_runs_ended_total 'ending="lease_lost"')" "$(metric "$m" pushfleet_shard_runs_ended_total 'ending="abandoned"')" \
            "$(metric "$m" pushfleet_shard_runs_ended_total 'ending="released"')"
    done
    printf '    %-12s shards re-queued after their lease expired: %d\n' pfmh-coord "$(metric "${host_metrics[coord]}" pushfleet_shards_reaped_total)"
    if [[ "$run" == partition ]]; then
        echo "  pfmh-$cut_host's log, warnings and errors by message (count):"
        grep -E '^[^ ]+ (warning|error) ' "$rundir/$cut_host.log" | sed -E 's/^[^ ]+ ([a-z]+) .*\] /\1: /' |
            sort | uniq -c | sort -rn | sed 's/^/    /' || echo "    (none)"
    fi
    local forwarded dropped cut
    forwarded=$(($(switch_counter forwarded) - fwd0))
    dropped=$(($(switch_counter lost) - lost0))
    cut=$(($(switch_counter partitioned) - part0))
    printf '  switch: %d packets forwarded, %d dropped as loss (%s%%), %d dropped by the partition\n' "$forwarded" "$dropped" \
        "$(awk -v d="$dropped" -v f="$forwarded" 'BEGIN { printf "%.2f", f ? 100 * d / f : 0 }')" "$cut"

    [[ "$state" == completed ]] || { ok=0; checks+=("state is ${state:-unknown}, not completed"); }
    ((total == tokens)) || { ok=0; checks+=("total $total != $tokens tokens"); }
    ((p_accepted == valid)) || { ok=0; checks+=("Postgres accepted $p_accepted != $valid valid tokens"); }
    ((p_rejected == stale)) || { ok=0; checks+=("Postgres rejected $p_rejected != $stale stale tokens"); }
    ((p_accepted + p_rejected == total)) || { ok=0; checks+=("accepted + rejected $((p_accepted + p_rejected)) != total $total"); }
    ((lost == 0)) || { ok=0; checks+=("$lost valid tokens never reached the simulator"); }
    ((duplicates <= resent)) || { ok=0; checks+=("duplicates $duplicates > resent $resent"); }
    echo "  reconciliation: Postgres total $total, accepted $p_accepted of $valid valid, rejected $p_rejected of $stale stale;" \
        "ledger delivered $delivered, distinct $distinct, lost $lost, duplicates $duplicates (of $twice tokens); resent $resent"
    if ((ok)); then
        echo "  guarantees hold: completed, accepted + rejected = total, nothing lost, duplicates <= resent"
    else
        failures=$((failures + 1))
        for check in "${checks[@]}"; do echo "  FAILED: $check"; done
        echo "  last lines of the coordinator's log:"
        tail -n 10 "$rundir/coord.log" | sed 's/^/    /'
    fi
    result[$run]="$(printf '%-10s %-10s %7d %9d %8d %5d %10d %7d %7s %5s' "$run" "${state:-unknown}" "$total" "$p_accepted" "$p_rejected" \
        "$lost" "$duplicates" "$resent" "${result[$run.wall]:-?}" "$( ((ok)) && echo yes || echo NO)")"
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "hosts: switch $net (bridge br0, 10.88.0.0/24); $(for host in "${hosts[@]}"; do printf 'pfmh-%s %s, ' "$host" "${ip_of[$host]}"; done | sed 's/, $//')"
echo "links: loss $loss_permille per mille each way on every link (nft on the switch; ~$((2 * loss_permille)) per mille a path);" \
    "delay each way (relay, no netem in this kernel): Redis $delay_redis ms, Postgres $delay_pg ms, APNs $delay_apns ms"
echo "campaign: $tokens tokens ($stale stale), HTTP/2, $workers workers x 2 connections, lease $lease_s s$([[ "$runs" != *partition* ]] || echo "; partition of pfmh-$cut_host $partition_s s at 30% accepted")"
for run in "${run_list[@]}"; do
    run_campaign "$run" || { failures=$((failures + 1)); result[$run]="$(printf '%-10s did not run to the end' "$run")"; }
done

echo
echo "== summary"
printf '%-10s %-10s %7s %9s %8s %5s %10s %7s %7s %5s\n' run state total accepted rejected lost duplicates resent "wall s" ok
for run in "${run_list[@]}"; do echo "${result[$run]}"; done
echo "CPU of the delaying relays over all runs: APNs $(cpu_seconds "${relay_pid[apns]}") s, Redis $(cpu_seconds "${relay_pid[redis]}") s," \
    "Postgres $(cpu_seconds "${relay_pid[pg]}") s; the simulator $(cpu_seconds "$simulator_pid") s"
echo "whole script: $SECONDS s"
((failures == 0)) || { echo "multihost: $failures run(s) broke a guarantee" >&2; exit 1; }
