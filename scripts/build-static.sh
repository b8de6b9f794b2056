#!/usr/bin/env bash
# scripts/build-static.sh [swift build args...]: builds the pushfleet executable with the Swift
# runtime and Foundation linked statically, as deploy/Dockerfile ships it (e.g. `-c release`).
# The binary then needs only libc, libstdc++, libgcc and libhiredis at run time
# (scripts/check-deploy.py --image checks that).
#
# swiftc's -static-stdlib links the Swift runtime but, with this toolchain, not Foundation's own
# static libraries (CoreFoundation, the ICU data): they are named here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
foundation=(Foundation CoreFoundation _FoundationICU _FoundationCShims _FoundationCollections FoundationEssentials)
linker=()
for library in "${foundation[@]}"; do linker+=(-Xlinker "-l$library"); done
exec swift build --product pushfleet --static-swift-stdlib "${linker[@]}" "$@"
