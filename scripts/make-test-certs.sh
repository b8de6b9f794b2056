#!/usr/bin/env bash
# make-test-certs.sh OUTDIR [HOSTNAME...]: a fresh, throwaway test PKI for
# PushFleet's tests and demo. Never check these files in; they are regenerated
# on demand. HOSTNAMEs are added to the server certificate (e.g. mock-apns, the
# simulator's name in deploy/compose.yaml).
#
#   ca.pem, ca-key.pem                 test CA (EC P-256, CA:TRUE)
#   server.pem, server-key.pem         CN=localhost, SAN localhost/127.0.0.1/::1, serverAuth
#   server-chain.pem                   server.pem + ca.pem
#   client.pem, client-key.pem         CN="PushFleet Test Client", clientAuth
#   client.p12, client.p12.password    client cert + key + CA, PKCS#12
#   rogue-ca.pem, rogue-ca-key.pem     a different CA, for negative tests
#   rogue-client.pem, rogue-client-key.pem  client cert issued by the rogue CA
#   auth-key.p8, auth-key-public.pem   provider-token signing key (P-256, PKCS#8
#                                      like Apple's .p8) and its public key
#   other-auth-key.p8, other-auth-key-public.pem  a second one, for negative tests
#
# Idempotent: if OUTDIR already holds a complete set that is valid for at
# least another day, nothing is done.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 OUTDIR [HOSTNAME...]" >&2
    exit 2
fi
out="$1"
shift
extra_hosts=("$@")
extra_san=""
for host in "${extra_hosts[@]}"; do
    [[ "$host" =~ ^[A-Za-z0-9.-]+$ ]] || { echo "make-test-certs: '$host' is not a host name" >&2; exit 2; }
    extra_san+=", DNS:$host"
done

DAYS=30
P12_PASSWORD="pushfleet-test"
FILES=(ca.pem ca-key.pem server.pem server-key.pem server-chain.pem
    client.pem client-key.pem client.p12 client.p12.password
    rogue-ca.pem rogue-ca-key.pem rogue-client.pem rogue-client-key.pem
    auth-key.p8 auth-key-public.pem other-auth-key.p8 other-auth-key-public.pem)

command -v openssl >/dev/null 2>&1 || { echo "make-test-certs: openssl not found" >&2; exit 1; }

complete_and_fresh() {
    local f
    for f in "${FILES[@]}"; do
        [[ -s "$out/$f" ]] || return 1
    done
    # A kept directory (the demo's .pushfleet/certs) outlives the 30 days.
    for f in ca.pem server.pem client.pem rogue-ca.pem rogue-client.pem; do
        openssl x509 -noout -checkend 86400 -in "$out/$f" >/dev/null 2>&1 || return 1
    done
    for host in "${extra_hosts[@]}"; do
        openssl x509 -noout -ext subjectAltName -in "$out/server.pem" 2>/dev/null | grep -q "DNS:$host\b" || return 1
    done
}

mkdir -p "$out"
if complete_and_fresh; then
    echo "test certificates already in $out"
    exit 0
fi

# Build everything in a scratch directory next to OUTDIR and move it in only
# when complete, so an interrupted run never leaves a half-made set behind.
work="$(mktemp -d "$out/.make-test-certs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
umask 077 # keys (and everything else while we work) start out private

# quiet CMD...: run CMD, showing its chatter only if it fails (openssl prints
# progress lines such as "Certificate request self-signature ok" to stderr).
quiet() {
    if ! "$@" >"$work/last.log" 2>&1; then
        echo "make-test-certs: failed: $*" >&2
        cat "$work/last.log" >&2
        exit 1
    fi
}
newkey() { quiet openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
serial() { echo "0x$(openssl rand -hex 16)"; }

# Our own config, so the system openssl.cnf does not matter; one extension
# section per kind of certificate.
cat >"$work/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no

[dn]

[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash

[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid

[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF
if [[ -n "$extra_san" ]]; then
    sed -i "s/^subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1\$/&${extra_san}/" "$work/openssl.cnf"
fi

# make_ca NAME CN: self-signed CA certificate NAME.pem with key NAME-key.pem.
make_ca() {
    newkey "$work/$1-key.pem"
    quiet openssl req -new -x509 -config "$work/openssl.cnf" -extensions ca \
        -key "$work/$1-key.pem" -subj "/O=PushFleet Test/CN=$2" \
        -days "$DAYS" -sha256 -set_serial "$(serial)" -out "$work/$1.pem"
}

# make_leaf NAME CN KIND CA: certificate NAME.pem (key NAME-key.pem) with the
# extension section KIND, issued by CA.pem / CA-key.pem.
make_leaf() {
    newkey "$work/$1-key.pem"
    quiet openssl req -new -config "$work/openssl.cnf" \
        -key "$work/$1-key.pem" -subj "/O=PushFleet Test/CN=$2" -out "$work/$1.csr"
    quiet openssl x509 -req -in "$work/$1.csr" -CA "$work/$4.pem" -CAkey "$work/$4-key.pem" \
        -set_serial "$(serial)" -days "$DAYS" -sha256 \
        -extfile "$work/openssl.cnf" -extensions "$3" -out "$work/$1.pem"
}

make_ca ca "PushFleet Test CA"
make_leaf server localhost server ca
make_leaf client "PushFleet Test Client" client ca
cat "$work/server.pem" "$work/ca.pem" >"$work/server-chain.pem"

make_ca rogue-ca "PushFleet Rogue CA"
make_leaf rogue-client "PushFleet Test Client" client rogue-ca

# Provider-token keys: Apple's .p8 files are PKCS#8 PEM ("BEGIN PRIVATE KEY").
for name in auth-key other-auth-key; do
    newkey "$work/$name.p8"
    quiet openssl pkey -in "$work/$name.p8" -pubout -out "$work/$name-public.pem"
done

# No trailing newline: the password is the file's exact content, whether the
# reader trims whitespace or not.
printf '%s' "$P12_PASSWORD" >"$work/client.p12.password"
# Modern PBES2 (AES-256-CBC, PBKDF2 with hmacWithSHA256) and a SHA-256 MAC,
# no -legacy algorithms. BoringSSL (inside swift-nio-ssl) parses exactly this
# form; stated explicitly so a different openssl default cannot change it.
quiet openssl pkcs12 -export -name "PushFleet Test Client" \
    -inkey "$work/client-key.pem" -in "$work/client.pem" -certfile "$work/ca.pem" \
    -keypbe AES-256-CBC -certpbe AES-256-CBC -macalg sha256 \
    -passout "file:$work/client.p12.password" -out "$work/client.p12"
quiet openssl pkcs12 -info -noout -passin "file:$work/client.p12.password" -in "$work/client.p12"

# Sanity: the good certificates chain to the CA, the rogue one does not.
quiet openssl verify -CAfile "$work/ca.pem" "$work/server.pem" "$work/client.pem"
if openssl verify -CAfile "$work/ca.pem" "$work/rogue-client.pem" >/dev/null 2>&1; then
    echo "make-test-certs: rogue client unexpectedly verifies against the CA" >&2
    exit 1
fi

# Keys and the password stay 600; certificates may be world-readable.
for f in "${FILES[@]}"; do
    case "$f" in
        *-key.pem | *.p8 | client.p12 | client.p12.password) chmod 600 "$work/$f" ;;
        *) chmod 644 "$work/$f" ;;
    esac
    mv -f "$work/$f" "$out/$f"
done
echo "test certificates written to $out"
