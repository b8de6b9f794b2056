#!/usr/bin/env bash
# scripts/demo.sh [pushfleet demo args...]: the whole system on this machine.
#
# Same setup as scripts/test.sh (private Redis and Postgres on free ports),
# test certificates kept in .pushfleet/certs between runs, then a release
# build of `pushfleet demo`. Extra arguments go to `pushfleet demo`, e.g.
# --tokens 100000 --protocol http2.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=lib/services.sh
source scripts/lib/services.sh

pf_install_missing

tmp="$(mktemp -d /tmp/pushfleet-demo.XXXXXX)"
# mktemp makes 0700; Postgres runs as another user and must reach tmp/pg.
chmod 755 "$tmp"
# shellcheck disable=SC2317 # reached through the trap
cleanup() {
    pf_stop_services
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

pf_start_redis "$tmp/redis"
pf_start_postgres "$tmp/pg"
pf_make_certs .pushfleet/certs

echo "pushfleet demo: PUSHFLEET_REDIS_URL=$PUSHFLEET_REDIS_URL PUSHFLEET_POSTGRES_URL=$PUSHFLEET_POSTGRES_URL"

swift build -c release --product pushfleet

# Not exec: the EXIT trap must still stop Redis and Postgres afterwards.
status=0
.build/release/pushfleet demo --certs .pushfleet/certs "$@" || status=$?
exit "$status"
