#ifndef PUSHFLEET_CFUZZDRIVER_H
#define PUSHFLEET_CFUZZDRIVER_H
#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt FuzzerInterface.h), in the fuzzer runtime that
/// `-sanitize=fuzzer` links. The harnesses call it from the `<Target>_main` entry point that
/// SwiftPM's debug builds on Linux substitute for `main` (`--defsym main=<Target>_main`, for
/// testable executables), since `-parse-as-library` leaves no `main` of Swift's to rename.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
