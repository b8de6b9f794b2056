#if canImport(Glibc)
import Glibc
#endif

/// CPU time and peak memory of this process, from getrusage(2).
struct ProcessUsage {
    var userSeconds: Double
    var systemSeconds: Double
    /// Peak resident set size in bytes.
    var maxResidentBytes: Int

    static func now() -> ProcessUsage {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return ProcessUsage(
            userSeconds: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6,
            systemSeconds: Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6,
            maxResidentBytes: Int(usage.ru_maxrss) * 1024
        )
    }

    var cpuSeconds: Double { self.userSeconds + self.systemSeconds }
}

/// Monotonic seconds, for wall times.
func monotonicSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}
