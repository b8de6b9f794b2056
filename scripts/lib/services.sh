#!/usr/bin/env bash
# Helpers for the test and demo scripts: install what we need, run a private
# Redis and Postgres on free loopback ports, make throwaway test certificates.
#
# Source this file (it defines functions only, and sets no shell options):
#     source "$(dirname "$0")/lib/services.sh"
#
# Exports, once the services are up:
#     PUSHFLEET_REDIS_URL          redis://127.0.0.1:PORT
#     PUSHFLEET_REDIS_CLUSTER_URL  redis://127.0.0.1:PORT (node 1 of a 3-master Redis Cluster)
#     PUSHFLEET_POSTGRES_URL       postgres://postgres@127.0.0.1:PORT/pushfleet
#     PUSHFLEET_TEST_CERTS         directory written by scripts/make-test-certs.sh
#
# Everything we start lives in a directory the caller chooses and is stopped by
# pf_stop_services. We never touch a system-wide Redis or Postgres cluster that
# the Debian packages may have created (e.g. the "main" cluster on 5432).

# Repository root, from this file's location (scripts/lib/services.sh).
PF_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Postgres server binaries (Debian 12 ships major version 15). Overridable.
PF_PG_BIN="${PF_PG_BIN:-/usr/lib/postgresql/15/bin}"

# State of the services started by this shell, for pf_stop_services.
PF_REDIS_DIR=""
PF_REDIS_PORT=""
PF_REDIS_CLUSTER_DIR=""
PF_REDIS_CLUSTER_PORTS=""   # node 1's port first, space-separated; node N lives in DIR/nodeN
PF_PG_DIR=""

pf_log() { printf 'pushfleet: %s\n' "$*" >&2; }
pf_err() { printf 'pushfleet: error: %s\n' "$*" >&2; }

pf_is_root() { [[ "$(id -u)" -eq 0 ]]; }

# Run a command as root: directly if we are root, otherwise through sudo.
pf_as_root() {
    if pf_is_root; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        pf_err "need root for: $* (not root, and sudo is not installed)"
        return 1
    fi
}

# Run a Postgres server command. Postgres refuses to run as root, so as root we
# switch to the "postgres" user (created by the Debian package). As any other
# user we simply run it as ourselves: that needs no sudo, and the data directory
# stays owned by us, so the caller can delete it afterwards.
# Runs from the target directory: the caller's cwd (e.g. /root) may not be
# readable by the postgres user, which makes pg_ctl and initdb complain.
pf_as_pg() {
    local dir="$1"; shift
    if pf_is_root; then
        (cd "$dir" && runuser -u postgres -- "$@")
    else
        (cd "$dir" && "$@")
    fi
}

pf_deb_installed() {
    command -v dpkg-query >/dev/null 2>&1 &&
        dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# Python with kubernetes-validate (pinned) in a virtual environment at DIR, for the check of
# deploy/ (scripts/check-deploy.py); installs python3 and python3-venv with apt if missing.
# Exports PUSHFLEET_DEPLOY_PYTHON.
pf_deploy_python() {
    local dir="$1"
    if ! { command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }; then
        pf_log "installing: python3 python3-venv"
        pf_as_root apt-get update -q || return 1
        pf_as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends python3 python3-venv || return 1
    fi
    python3 -m venv "$dir" || return 1
    "$dir/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate==1.31.0 || {
        pf_err "cannot install kubernetes-validate 1.31.0 from PyPI into $dir"
        return 1
    }
    export PUSHFLEET_DEPLOY_PYTHON="$dir/bin/python"
}

# Installs, with apt, whichever of our build/test dependencies are missing.
pf_install_missing() {
    local missing=()
    # Extra packages a script needs besides the services' own (by Debian name, checked with dpkg).
    local extra
    for extra in "$@"; do
        pf_deb_installed "$extra" || missing+=("$extra")
    done

    pf_deb_installed libhiredis-dev || missing+=(libhiredis-dev)
    # redis-cli comes from redis-tools, a dependency of redis-server.
    { command -v redis-server && command -v redis-cli; } >/dev/null 2>&1 || missing+=(redis-server)
    { [[ -x "$PF_PG_BIN/postgres" && -x "$PF_PG_BIN/initdb" && -x "$PF_PG_BIN/psql" ]]; } || missing+=(postgresql)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    pf_deb_installed ca-certificates || missing+=(ca-certificates)
    { command -v ps && command -v pkill; } >/dev/null 2>&1 || missing+=(procps)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    # readelf: the check of the image's runtime stage reads the binary's libraries.
    command -v readelf >/dev/null 2>&1 || missing+=(binutils)

    if ((${#missing[@]} == 0)); then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        pf_err "missing ${missing[*]}, and apt-get is not available to install them"
        return 1
    fi

    pf_log "installing: ${missing[*]}"
    # Installing "postgresql" may create and start a "main" cluster on 5432
    # (pg_createcluster / invoke-rc.d). Harmless: we run our own server on
    # another port from our own data directory and never connect to it.
    pf_as_root apt-get update -q || return 1
    pf_as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}" || return 1

    if [[ ! -x "$PF_PG_BIN/postgres" ]]; then
        pf_err "postgresql installed, but $PF_PG_BIN/postgres is missing (set PF_PG_BIN?)"
        return 1
    fi
}

# Prints a TCP port on 127.0.0.1 that nothing listens on right now.
pf_free_port() {
    if command -v python3 >/dev/null 2>&1; then
        # Let the kernel choose: bind port 0 and report what we got.
        if python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])' 2>/dev/null; then
            return 0
        fi
    fi
    # Fallback without python: probe random ports below Linux's ephemeral
    # range (32768+), so outgoing connections do not grab the port meanwhile.
    # A refused connection means nobody is listening there.
    local port
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 12000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    pf_err "could not find a free TCP port"
    return 1
}

# pf_redis_server DIR PORT: starts redis-server in the background on PORT, data in DIR.
pf_redis_server() {
    # No persistence: test data is disposable. noeviction as in production:
    # an evicted queue key would silently lose work.
    redis-server --bind 127.0.0.1 --port "$2" \
        --save '' --appendonly no --maxmemory-policy noeviction \
        --daemonize yes --dir "$1" \
        --pidfile "$1/redis.pid" --logfile "$1/redis.log" || true
}

# pf_redis_pong PORT: whether a Redis answers PING on PORT (timeout: something else on the port
# may never reply).
pf_redis_pong() {
    [[ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" == "PONG" ]]
}

# pf_restart_redis: the Redis of pf_start_redis stopped without saving and started again, empty,
# on the same port: what clients see when a Redis without persistence crashes and comes back.
pf_restart_redis() {
    local deadline
    timeout 5 redis-cli -h 127.0.0.1 -p "$PF_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    deadline=$((SECONDS + 20))
    while pf_redis_pong "$PF_REDIS_PORT"; do
        ((SECONDS < deadline)) || { pf_log "redis on port $PF_REDIS_PORT did not stop"; return 1; }
        sleep 0.1
    done
    pf_redis_server "$PF_REDIS_DIR" "$PF_REDIS_PORT"
    deadline=$((SECONDS + 20))
    until pf_redis_pong "$PF_REDIS_PORT"; do
        ((SECONDS < deadline)) || { pf_log "redis did not start again on port $PF_REDIS_PORT"; return 1; }
        sleep 0.1
    done
}

# pf_start_redis DIR: a throwaway redis-server on a free port, data in DIR.
pf_start_redis() {
    local dir="$1" port attempt deadline
    mkdir -p "$dir"
    for attempt in 1 2 3; do
        port="$(pf_free_port)" || return 1
        rm -f "$dir/redis.pid"
        pf_redis_server "$dir" "$port"
        PF_REDIS_DIR="$dir"
        PF_REDIS_PORT="$port"
        deadline=$((SECONDS + 20))
        while ((SECONDS < deadline)); do
            if pf_redis_pong "$port"; then
                export PUSHFLEET_REDIS_URL="redis://127.0.0.1:$port"
                return 0
            fi
            # Lost a race for the port: try another one instead of waiting.
            if grep -q 'Address already in use' "$dir/redis.log" 2>/dev/null; then
                pf_log "redis: port $port taken meanwhile, retrying"
                mv -f "$dir/redis.log" "$dir/redis.log.$attempt"
                continue 2
            fi
            sleep 0.2
        done
        break
    done
    pf_log "redis-server did not answer PING on 127.0.0.1:${port}; log tail:"
    tail -n 30 "$dir"/redis.log* >&2 2>/dev/null || true
    return 1
}

# pf_port_unused PORT: whether nothing on 127.0.0.1 uses PORT: we can bind it (python3), or,
# without python, nobody accepts a connection there.
pf_port_unused() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
        return
    fi
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pf_free_cluster_port [PORT...]: prints a port P for a Redis Cluster node such that P and its
# cluster bus port P+10000 are both unused on 127.0.0.1, and neither clashes with the given
# nodes' ports or bus ports. P is in 10000-22767, so the bus port stays below 65536 and below
# Linux's ephemeral range (32768+), where outgoing connections could grab it meanwhile.
pf_free_cluster_port() {
    local port q clash
    for _ in $(seq 1 200); do
        port=$((10000 + RANDOM % 12768))
        clash=0
        for q in "$@"; do
            if ((port == q || port == q + 10000 || port + 10000 == q)); then clash=1; fi
        done
        ((clash == 0)) || continue
        if pf_port_unused "$port" && pf_port_unused $((port + 10000)); then
            echo "$port"
            return 0
        fi
    done
    pf_err "could not find a free pair of TCP ports P, P+10000 for a redis cluster node"
    return 1
}

# pf_redis_cluster_node DIR PORT: starts a cluster-enabled redis-server in the background on
# PORT (bus on PORT+10000), data, pidfile, log and cluster config in DIR.
pf_redis_cluster_node() {
    # As pf_redis_server: no persistence, noeviction.
    redis-server --bind 127.0.0.1 --port "$2" \
        --cluster-enabled yes --cluster-config-file "$1/nodes.conf" --cluster-node-timeout 5000 \
        --save '' --appendonly no --maxmemory-policy noeviction \
        --daemonize yes --dir "$1" \
        --pidfile "$1/redis.pid" --logfile "$1/redis.log" || true
}

# pf_redis_is PORT PIDFILE: whether the Redis answering on PORT is the process of PIDFILE, not
# someone else's Redis that got the port first.
pf_redis_is() {
    local pid info
    pid="$(cat "$2" 2>/dev/null || true)"
    [[ -n "$pid" ]] || return 1
    info="$(timeout 2 redis-cli -h 127.0.0.1 -p "$1" info server 2>/dev/null | tr -d '\r')" || return 1
    [[ $'\n'"$info"$'\n' == *$'\n'"process_id:$pid"$'\n'* ]]
}

# pf_redis_cluster_ok PORT...: whether every node says cluster_state:ok, and a key written
# through each node (redirected to the key's master: redis-cli -c) reads back.
pf_redis_cluster_ok() {
    local port info
    for port in "$@"; do
        info="$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | tr -d '\r')" ||
            return 1
        [[ $'\n'"$info"$'\n' == *$'\n'"cluster_state:ok"$'\n'* ]] || return 1
    done
    for port in "$@"; do
        [[ "$(timeout 5 redis-cli -c -h 127.0.0.1 -p "$port" \
            set "pushfleet:cluster-check:$port" ok 2>/dev/null)" == "OK" ]] || return 1
        [[ "$(timeout 5 redis-cli -c -h 127.0.0.1 -p "$port" \
            get "pushfleet:cluster-check:$port" 2>/dev/null)" == "ok" ]] || return 1
        timeout 5 redis-cli -c -h 127.0.0.1 -p "$port" \
            del "pushfleet:cluster-check:$port" >/dev/null 2>&1 || true
    done
}

# pf_start_redis_cluster DIR: a throwaway Redis Cluster of three masters (no replicas) on free
# loopback ports, node N in DIR/nodeN. Exports PUSHFLEET_REDIS_CLUSTER_URL, node 1's address (a
# cluster client learns the other nodes from it). On failure, stops the nodes it started.
pf_start_redis_cluster() {
    local dir="$1" attempt i port ports up taken deadline addrs=()
    mkdir -p "$dir"
    for attempt in 1 2 3; do
        ports=""
        for i in 1 2 3; do
            # shellcheck disable=SC2086 # the ports chosen so far, one argument each
            port="$(pf_free_cluster_port $ports)" || return 1
            ports="${ports:+$ports }$port"
        done
        PF_REDIS_CLUSTER_DIR="$dir"
        PF_REDIS_CLUSTER_PORTS="$ports"
        i=0
        for port in $ports; do
            i=$((i + 1))
            mkdir -p "$dir/node$i"
            # A stale pidfile would name another process; a stale nodes.conf another cluster.
            rm -f "$dir/node$i/redis.pid" "$dir/node$i/nodes.conf"
            pf_redis_cluster_node "$dir/node$i" "$port"
        done
        # Wait for every node to answer as itself, or for one to lose a race for its ports.
        up=0
        taken=""
        deadline=$((SECONDS + 20))
        while ((SECONDS < deadline)); do
            up=0
            i=0
            for port in $ports; do
                i=$((i + 1))
                if pf_redis_is "$port" "$dir/node$i/redis.pid"; then
                    up=$((up + 1))
                elif grep -q 'Address already in use' "$dir/node$i/redis.log" 2>/dev/null; then
                    taken="${taken:+$taken }$port"
                fi
            done
            [[ $up -lt 3 && -z "$taken" ]] || break
            sleep 0.2
        done
        if ((up == 3)); then
            break
        fi
        pf_stop_redis_cluster
        if [[ -z "$taken" ]]; then
            pf_log "redis cluster: the nodes on 127.0.0.1 ports $ports did not all answer; log tails:"
            tail -n 30 "$dir"/node*/redis.log* >&2 2>/dev/null || true
            return 1
        fi
        pf_log "redis cluster: port $taken (or its bus port +10000) taken meanwhile, retrying"
        for i in 1 2 3; do
            if [[ -e "$dir/node$i/redis.log" ]]; then
                mv -f "$dir/node$i/redis.log" "$dir/node$i/redis.log.$attempt"
            fi
        done
    done
    if ((up < 3)); then
        pf_log "redis cluster: no free ports after $attempt attempts; log tails:"
        tail -n 30 "$dir"/node*/redis.log* >&2 2>/dev/null || true
        return 1
    fi

    for port in $ports; do
        addrs+=("127.0.0.1:$port")
    done
    pf_log "redis cluster: creating a cluster of ${addrs[*]}"
    if ! TERM=dumb timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
        >"$dir/cluster-create.log" 2>&1; then
        pf_log "redis cluster: redis-cli --cluster create failed; its output and the node logs:"
        tail -n 30 "$dir/cluster-create.log" "$dir"/node*/redis.log >&2 2>/dev/null || true
        pf_stop_redis_cluster
        return 1
    fi
    deadline=$((SECONDS + 60))
    # shellcheck disable=SC2086 # one argument per port
    until pf_redis_cluster_ok $ports; do
        if ((SECONDS >= deadline)); then
            pf_log "redis cluster: not cluster_state:ok with working writes on every node" \
                "(${addrs[*]}) within 60 s; cluster create output and node logs:"
            tail -n 30 "$dir/cluster-create.log" "$dir"/node*/redis.log >&2 2>/dev/null || true
            pf_stop_redis_cluster
            return 1
        fi
        sleep 0.5
    done
    export PUSHFLEET_REDIS_CLUSTER_URL="redis://127.0.0.1:${ports%% *}"
}

# Stops the nodes of pf_start_redis_cluster: SHUTDOWN NOSAVE to each node that is still ours,
# SIGTERM to a node that does not answer, then SIGKILL after ~10 s. Idempotent, never fails.
pf_stop_redis_cluster() {
    local i=0 port node pid
    [[ -n "$PF_REDIS_CLUSTER_DIR" ]] || return 0
    for port in $PF_REDIS_CLUSTER_PORTS; do
        i=$((i + 1))
        node="$PF_REDIS_CLUSTER_DIR/node$i"
        pid="$(cat "$node/redis.pid" 2>/dev/null || true)"
        # No pidfile: this node never came up (its ports were taken), nothing of ours to stop.
        [[ -n "$pid" ]] || continue
        if pf_redis_is "$port" "$node/redis.pid"; then
            timeout 5 redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
        elif [[ "$(ps -o comm= -p "$pid" 2>/dev/null || true)" == redis-server* ]]; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
        pf_wait_or_kill "$pid"
        rm -f "$node/redis.pid"
    done
    PF_REDIS_CLUSTER_DIR=""
    PF_REDIS_CLUSTER_PORTS=""
    return 0
}

# pf_start_postgres DIR: a throwaway Postgres cluster on a free port, in DIR,
# with a database "pushfleet" for the superuser "postgres" (trust auth).
pf_start_postgres() {
    local dir="$1" port attempt
    if [[ ! -x "$PF_PG_BIN/initdb" ]]; then
        pf_err "no $PF_PG_BIN/initdb (run pf_install_missing)"
        return 1
    fi
    mkdir -p "$dir"
    # mktemp directories are 0700; the postgres user must be able to reach DIR.
    chmod 755 "$dir"
    mkdir -p "$dir/pgdata" "$dir/sock"
    touch "$dir/postgres.log"
    if pf_is_root; then
        if ! id postgres >/dev/null 2>&1; then
            pf_err "no 'postgres' user (is the postgresql package installed?)"
            return 1
        fi
        chown postgres: "$dir/pgdata" "$dir/sock" "$dir/postgres.log"
        if ! runuser -u postgres -- test -x "$dir"; then
            pf_err "user postgres cannot reach $dir: make its parent directories searchable (chmod 755)"
            return 1
        fi
    fi
    chmod 700 "$dir/pgdata"
    PF_PG_DIR="$dir"

    # C locale: the host's locale may not exist in a minimal container.
    pf_as_pg "$dir" "$PF_PG_BIN/initdb" -D "$dir/pgdata" -U postgres --auth=trust \
        -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; pf_err "initdb failed"; return 1; }

    for attempt in 1 2 3; do
        port="$(pf_free_port)" || return 1
        # Durability settings off: a test database is disposable, and fsync
        # dominates schema setup time on slow disks.
        if pf_as_pg "$dir" "$PF_PG_BIN/pg_ctl" -D "$dir/pgdata" -l "$dir/postgres.log" -w \
            -o "-p $port -k '$dir/sock' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
            start >/dev/null; then
            "$PF_PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres pushfleet ||
                { pf_err "createdb pushfleet failed"; return 1; }
            # The pipeline tests run coordinators, which serve every campaign of their database;
            # they get a database of their own so that they leave other tests' campaigns alone.
            "$PF_PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres pushfleet_pipeline ||
                { pf_err "createdb pushfleet_pipeline failed"; return 1; }
            export PUSHFLEET_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/pushfleet"
            return 0
        fi
        if grep -q 'could not bind' "$dir/postgres.log" 2>/dev/null; then
            pf_log "postgres: port $port taken meanwhile, retrying"
            continue
        fi
        break
    done
    pf_log "postgres did not start; log tail:"
    tail -n 30 "$dir/postgres.log" >&2 || true
    return 1
}

# Waits up to ~10 s for a process we started to exit after being asked to,
# then kills it.
pf_wait_or_kill() {
    local pid="$1"
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# Stops whatever pf_start_redis / pf_start_redis_cluster / pf_start_postgres
# started. Idempotent and never fails, so it is safe in traps.
pf_stop_services() {
    local pid
    pf_stop_redis_cluster
    if [[ -n "$PF_REDIS_DIR" ]]; then
        pid="$(cat "$PF_REDIS_DIR/redis.pid" 2>/dev/null || true)"
        timeout 5 redis-cli -h 127.0.0.1 -p "$PF_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
        [[ -z "$pid" ]] || pf_wait_or_kill "$pid"
        PF_REDIS_DIR=""
        PF_REDIS_PORT=""
    fi
    if [[ -n "$PF_PG_DIR" ]]; then
        # First line of postmaster.pid is the server's pid.
        pid="$(head -n 1 "$PF_PG_DIR/pgdata/postmaster.pid" 2>/dev/null || true)"
        if [[ -n "$pid" ]]; then
            pf_as_pg "$PF_PG_DIR" "$PF_PG_BIN/pg_ctl" -D "$PF_PG_DIR/pgdata" -m fast -w stop \
                >/dev/null 2>&1 || true
            pf_wait_or_kill "$pid"
        fi
        PF_PG_DIR=""
    fi
    return 0
}

# pf_make_certs DIR: throwaway test PKI (see scripts/make-test-certs.sh).
pf_make_certs() {
    local dir="$1"
    bash "$PF_REPO_ROOT/scripts/make-test-certs.sh" "$dir" || return 1
    PUSHFLEET_TEST_CERTS="$(cd "$dir" && pwd)"
    export PUSHFLEET_TEST_CERTS
}
