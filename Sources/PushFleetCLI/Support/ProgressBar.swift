#if canImport(Glibc)
import Glibc
#endif

/// A one-line progress bar with rate and ETA, redrawn in place on a terminal.
struct ProgressBar {
    var total: Int
    var width = 30
    private let startedAt = monotonicSeconds()
    private let interactive = isatty(STDERR_FILENO) == 1

    init(total: Int) {
        self.total = total
    }

    /// The bar for `done` of ``total``, with `detail` after it.
    func line(done: Int, detail: String = "") -> String {
        let fraction = self.total > 0 ? min(1, Double(done) / Double(self.total)) : 1
        let filled = Int(fraction * Double(self.width))
        let elapsed = monotonicSeconds() - self.startedAt
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 && done < self.total ? Double(self.total - done) / rate : 0
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: self.width - filled)
        let percent = String(Int(fraction * 100)).leftPadded(to: 3)
        return "\(bar) \(percent)%  \(done)/\(self.total)  \(Int(rate))/s  ETA \(Int(eta.rounded()))s \(detail)"
    }

    /// Draws the bar on standard error: in place on a terminal, one line per call otherwise.
    func draw(done: Int, detail: String = "") {
        let text = self.line(done: done, detail: detail)
        if self.interactive {
            writeStandardError("\r\u{1B}[2K" + text)
        } else {
            writeStandardError(text + "\n")
        }
    }

    /// Writes a line of its own above the bar (the bar is drawn again at its next ``draw(done:detail:)``).
    func interrupt(_ text: String) {
        writeStandardError((self.interactive ? "\r\u{1B}[2K" : "") + text + "\n")
    }

    /// Ends the bar's line on a terminal.
    func finish() {
        if self.interactive { writeStandardError("\n") }
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: " ", count: width - self.count) + self
    }
}

/// Writes `text` to standard error, unbuffered.
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}
