#if canImport(Glibc)
import Glibc
#endif
import PushFleetServices

/// A progress bar for reading a token file, on standard error when it is a terminal: tokens read,
/// of as many as the file's size suggests at the bytes per line seen so far.
struct FileProgress: AudienceReadProgress {
    private let reader: TokenFileReader
    private let size: Int
    private var bar: ProgressBar
    private var tokens = 0
    private var drawnAt = 0.0

    /// Nil unless standard error is a terminal and the reader reads a regular file.
    init?(_ reader: TokenFileReader) {
        guard isatty(STDERR_FILENO) == 1, let size = reader.size, size > 0 else { return nil }
        self.reader = reader
        self.size = size
        self.bar = ProgressBar(total: 0)
    }

    mutating func advance(by count: Int, ended: Bool) {
        self.tokens += count
        let now = monotonicSeconds()
        guard ended || now - self.drawnAt >= 0.2 else { return }
        self.drawnAt = now
        let read = max(1, self.reader.bytesRead)
        self.bar.total = ended ? self.tokens : max(self.tokens, Int(Double(self.tokens) * Double(self.size) / Double(read)))
        self.bar.draw(done: self.tokens, detail: "read from \(self.reader.path)")
        if ended { self.bar.finish() }
    }
}
