#!/usr/bin/env bash
# scripts/test.sh [swift test args...]: the one test command, locally and in CI.
#
# Installs what is missing (Debian), starts a private Redis and Postgres on
# free loopback ports, makes throwaway test certificates, builds, runs
# `swift test` (extra arguments are passed on, e.g. --filter X), and stops
# everything again. Exits with the status of `swift test`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh

pf_install_missing

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
pf_start_postgres "$tmp/pg"
pf_make_certs "$tmp/certs" >/dev/null

echo "pushfleet test: PUSHFLEET_REDIS_URL=$PUSHFLEET_REDIS_URL PUSHFLEET_POSTGRES_URL=$PUSHFLEET_POSTGRES_URL PUSHFLEET_TEST_CERTS=$PUSHFLEET_TEST_CERTS"

swift build --build-tests

status=0
swift test --skip-build "$@" || status=$?

pf_stop_services
exit "$status"
