# shellcheck shell=bash
# The set-up shared by the whole-system scripts (bench.sh, bench-launch.sh, bench-http2-sender.sh,
# chaos.sh, multihost.sh): a temporary directory, a release build, Redis, Postgres, test
# certificates and the simulator, all stopped on exit.
# Source after scripts/lib/services.sh.

# pf_harness_start NAME [--no-services]: installs what is missing, makes $tmp
# (/tmp/pushfleet-NAME.*), sets $bin, makes the test certificates and starts Redis and Postgres
# (not with --no-services). Processes added to $pids are stopped, and everything removed, when the
# script exits (pf_harness_stop).
# PUSHFLEET_BIN runs an already built pushfleet binary instead of building one; PUSHFLEET_BUILD_PATH
# picks another build folder (e.g. .build-release, to build beside a test run);
# PUSHFLEET_SIMULATOR_BIN runs the simulator from another binary (an older client against today's
# simulator options).
pf_harness_start() {
    pf_install_missing
    tmp="$(mktemp -d "/tmp/pushfleet-$1.XXXXXX")"
    chmod 755 "$tmp"
    pids=()
    # A caller's own EXIT trap, set before, is kept: it calls pf_harness_stop itself (bench.sh
    # restores what it changed on the machine even when the build below fails).
    [[ -n "$(trap -p EXIT)" ]] || trap pf_harness_stop EXIT
    if [[ -n "${PUSHFLEET_BIN:-}" ]]; then
        bin="$PUSHFLEET_BIN"
    else
        local build_path="${PUSHFLEET_BUILD_PATH:-.build}"
        swift build -c release --product pushfleet --scratch-path "$build_path" >&2
        bin="$PWD/$build_path/release/pushfleet"
    fi
    if [[ "${2:-}" != --no-services ]]; then
        pf_start_redis "$tmp/redis"
        pf_start_postgres "$tmp/pg"
    fi
    bash scripts/make-test-certs.sh "$tmp/certs" >/dev/null
}

# cpu_ticks PID: a process's user and system CPU in clock ticks. tree_ticks PID: the same with its
# children's, the ended ones (waited for) and the live ones (Postgres runs a process per connection).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tree_ticks() {
    local total child
    total="$(awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat")"
    for child in $(pgrep -P "$1"); do total=$((total + $(cpu_ticks "$child" 2>/dev/null || echo 0))); done
    echo "$total"
}

# pf_make_tokens N: N random 32-byte tokens in hex, one per line.
pf_make_tokens() { head -c $(($1 * 32)) /dev/urandom | od -An -v -tx1 -w32 | tr -d ' '; }

# shellcheck disable=SC2317 # reached through the trap
pf_harness_stop() {
    # SIGCONT first: a process stopped with SIGSTOP does not act on SIGTERM until it runs again.
    for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pf_stop_services
    rm -rf "$tmp"
}

# pf_start_simulator ARGS...: `pushfleet mock-apns` on free ports with the test certificates and
# ARGS; sets binary_port, http2_port and admin_port.
pf_start_simulator() {
    "${PUSHFLEET_SIMULATOR_BIN:-$bin}" mock-apns --certs "$tmp/certs" --binary-port 0 --feedback-port 0 --admin-port 0 --http2-port 0 "$@" >"$tmp/mock.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^mock-apns binary=' "$tmp/mock.log" && break; sleep 0.1; done
    binary_port="$(sed -n 's/^mock-apns binary=\([0-9]*\).*/\1/p' "$tmp/mock.log")"
    http2_port="$(sed -n 's/^mock-apns .*http2=\([0-9]*\).*/\1/p' "$tmp/mock.log")"
    admin_port="$(sed -n 's/.* admin=\([0-9]*\).*/\1/p' "$tmp/mock.log")"
}
