#!/usr/bin/env bash
# Builds PushFleet's libFuzzer harnesses (the separate package in Fuzz/) and runs each for a while.
#
#   scripts/fuzz.sh [--seconds N] [--release] [target...]
#
# Targets (default: all): FuzzBinaryErrorResponse FuzzFeedbackTuple FuzzBinaryInbound
# FuzzJSONParser FuzzPayload FuzzDeviceTokenHex FuzzHTTP2Answer FuzzHTTP2Request FuzzAPIRequest.
# Every module, PushFleet's and its dependencies', is built with `-sanitize=fuzzer,address` (as
# swift-protobuf's FuzzTesting does), in .build-fuzz/ so that the main .build/ is never touched.
# Each target runs N seconds (default 60) from the seed corpus Fuzz/Corpus/<Target>/ (read only);
# new corpus entries go to a temporary directory that is deleted afterwards, crash artifacts and
# logs to a directory of this run's own, /tmp/pushfleet-fuzz-artifacts.XXXXXX (printed, and kept),
# so that two runs at once do not write into each other's logs.
# Exits non-zero if any target crashed or failed to build.
#
# Environment: FUZZ_ARGS, extra libFuzzer flags (e.g. "-jobs=2 -workers=2" or "-detect_leaks=1").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

all_targets=(FuzzBinaryErrorResponse FuzzFeedbackTuple FuzzBinaryInbound FuzzJSONParser FuzzPayload FuzzDeviceTokenHex FuzzHTTP2Answer FuzzHTTP2Request FuzzAPIRequest)
seconds=60
configuration=debug
targets=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
        --seconds=*) seconds="${1#--seconds=}"; shift ;;
        --release) configuration=release; shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds wants a whole number, not '$seconds'" >&2; exit 2; }
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
    [[ " ${all_targets[*]} " == *" $target "* ]] || { echo "fuzz.sh: unknown target $target (known: ${all_targets[*]})" >&2; exit 2; }
done

scratch="$root/.build-fuzz"
artifacts="$(mktemp -d /tmp/pushfleet-fuzz-artifacts.XXXXXX)"
echo "== crash artifacts and logs: $artifacts"
build=(swift build --package-path "$root/Fuzz" --scratch-path "$scratch" -c "$configuration"
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)

work=$(mktemp -d /tmp/pushfleet-fuzz-corpus.XXXXXX)
trap 'rm -rf "$work"' EXIT

declare -A result executions
failed=0
build_start=$SECONDS
for target in "${targets[@]}"; do
    echo "== building $target ($configuration)"
    # ld.gold's "Cannot export local symbol __asan_..." warnings are harmless; keep them out of the way.
    if ! "${build[@]}" --product "$target" > "$artifacts/$target.build.log" 2>&1; then
        grep -v 'Cannot export local symbol' "$artifacts/$target.build.log" | tail -40 >&2
        result[$target]="build failed (log: $artifacts/$target.build.log)"
        failed=1
    fi
done
echo "== build took $((SECONDS - build_start)) s"
bin=$("${build[@]}" --show-bin-path)

for target in "${targets[@]}"; do
    [[ -z "${result[$target]:-}" ]] || continue
    corpus="$work/$target"
    mkdir -p "$corpus"
    log="$artifacts/$target.log"
    echo "== running $target for ${seconds}s (log: $log)"
    status=0
    # shellcheck disable=SC2086
    "$bin/$target" "$corpus" "$root/Fuzz/Corpus/$target" \
        -max_total_time="$seconds" -print_final_stats=1 -max_len=4096 -detect_leaks=0 \
        -artifact_prefix="$artifacts/$target-" ${FUZZ_ARGS:-} > "$log" 2>&1 || status=$?
    executions[$target]=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo "?")
    if [[ $status -eq 0 ]]; then
        result[$target]="ok"
    else
        artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //' || true)
        result[$target]="CRASHED (exit $status) ${artifact:+artifact: $artifact}"
        grep -m1 -E 'PROPERTY VIOLATED|Fatal error|ERROR: (AddressSanitizer|libFuzzer)' "$log" >&2 || tail -20 "$log" >&2
        failed=1
    fi
done

echo
echo "== summary (${seconds}s per target, $configuration)"
for target in "${targets[@]}"; do
    printf '%-26s executions: %-10s %s\n' "$target" "${executions[$target]:--}" "${result[$target]}"
done
exit "$failed"
