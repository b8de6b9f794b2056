import Foundation

/// Deliveries per second as the simulator's ledger saw them, for `demo --rate` and
/// `scripts/bench.sh --rate`: one line per second with a bar, then the spread of the full seconds
/// (the first and last are partial).
struct DeliveryHistogram {
    let seconds: [(second: Int, accepted: Int)]
    /// The campaign's rate limit, drawn as the bar's mark.
    let limit: Int?

    var text: String {
        guard let first = self.seconds.first, let last = self.seconds.last else { return "deliveries per second: none" }
        let counts = Dictionary(uniqueKeysWithValues: self.seconds.map { ($0.second, $0.accepted) })
        let all = (first.second...last.second).map { counts[$0] ?? 0 }
        let scale = max(all.max() ?? 1, self.limit ?? 0, 1)
        let width = 50
        var lines = ["deliveries per second (simulator's clock)" + (self.limit.map { ", limit \($0)/s marked |" } ?? "") + ":"]
        for (offset, count) in all.enumerated() {
            var bar = Array(repeating: Character(" "), count: width + 1)
            for index in 0..<(count * width / scale) { bar[index] = "#" }
            if let limit = self.limit { bar[limit * width / scale] = "|" }
            lines.append(String(format: "  %4d s %8d  ", offset, count) + String(bar).replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression))
        }
        let full = all.count > 2 ? Array(all.dropFirst().dropLast()).sorted() : []
        if let low = full.first, let high = full.last {
            lines.append(
                "  full seconds: \(full.count), min \(low), median \(full[full.count / 2]), max \(high)"
                    + (self.limit.map { String(format: ", max/limit %.3f", Double(high) / Double($0)) } ?? "")
            )
        }
        return lines.joined(separator: "\n")
    }
}
