#!/usr/bin/env bash
# scripts/test.sh [swift test args...]: the one test command, locally and in CI.
#
# Installs what is missing (Debian), starts a private Redis, a private 3-master
# Redis Cluster and Postgres on free loopback ports, makes throwaway test
# certificates, builds, runs
# `swift test` (extra arguments are passed on, e.g. --filter X; without any, the pipeline suite
# runs after the other suites, then every fuzz target for 10 s with scripts/fuzz.sh), and stops
# everything again. Exits with the status of `swift test` (and of the fuzz run).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh

# chromium: the dashboard is tested in a real headless browser.
pf_install_missing chromium

tmp="$(mktemp -d /tmp/pushfleet-test.XXXXXX)"
# mktemp makes 0700; Postgres runs as another user and must reach tmp/pg.
chmod 755 "$tmp"
# shellcheck disable=SC2317 # reached through the trap
cleanup() {
    pf_stop_services
    rm -rf "$tmp"
}
trap cleanup EXIT
# Interrupted: exit, which runs the EXIT trap (cleanup is idempotent).
trap 'exit 130' INT
trap 'exit 143' TERM

pf_start_redis "$tmp/redis"
pf_start_redis_cluster "$tmp/redis-cluster"
pf_start_postgres "$tmp/pg"
pf_make_certs "$tmp/certs" >/dev/null
pf_deploy_python "$tmp/venv"
# Phase 1 starts dozens of suites at once on two cores, each opening Postgres connections (a
# backend process each): allow a connection a minute rather than the default 10 s.
export PUSHFLEET_POSTGRES_URL="$PUSHFLEET_POSTGRES_URL?connect_timeout=60"

echo "pushfleet test: PUSHFLEET_REDIS_URL=$PUSHFLEET_REDIS_URL PUSHFLEET_REDIS_CLUSTER_URL=$PUSHFLEET_REDIS_CLUSTER_URL PUSHFLEET_POSTGRES_URL=$PUSHFLEET_POSTGRES_URL PUSHFLEET_TEST_CERTS=$PUSHFLEET_TEST_CERTS PUSHFLEET_DEPLOY_PYTHON=$PUSHFLEET_DEPLOY_PYTHON"

swift build --build-tests

status=0
# The tests run the pushfleet the image ships: the Swift runtime linked statically (only relinks).
if scripts/build-static.sh; then
    export PUSHFLEET_STATIC_BINARY="$(swift build --show-bin-path)/pushfleet"
else
    pf_err "scripts/build-static.sh failed; the tests run a dynamically linked pushfleet"
    status=1
    swift build --product pushfleet
fi
if (($#)); then
    swift test --skip-build "$@" || status=$?
else
    # Two phases: the pipeline suite (whole fleets of pushfleet processes, each test using both
    # cores for minutes) runs after the others, not beside them, so that it does not starve
    # their deadlines (binary proofs, leases, idle timers) and they do not starve its leases.
    swift test --skip-build --skip PipelineTests || status=$?
    # The queue suites again, on the Redis Cluster: every script and command of CampaignQueue,
    # routed by slot (the pipeline suite runs a campaign per protocol on it too).
    PUSHFLEET_REDIS_URL="$PUSHFLEET_REDIS_CLUSTER_URL" swift test --skip-build --filter RedisCampaignQueue || status=$?
    swift test --skip-build --filter PipelineTests || status=$?
    # The decoders under libFuzzer, briefly: each target's properties against random and mutated
    # input for 10 s (scripts/fuzz.sh builds them instrumented in .build-fuzz; docs/reliability.md).
    scripts/fuzz.sh --seconds 10 || status=$?
fi

pf_stop_services
exit "$status"
