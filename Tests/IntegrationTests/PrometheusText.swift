import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A scrape of a `/metrics` page: each series' value, by name and labels.
struct PrometheusText {
    struct Series: Hashable {
        var name: String
        var labels: [String: String]
    }

    var values: [Series: Double] = [:]

    init(_ text: String) {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let key = line[..<space]
            var labels: [String: String] = [:]
            let name: Substring
            if let brace = key.firstIndex(of: "{") {
                name = key[..<brace]
                // Label values here never hold `,` or `"`: topics, reasons, states.
                for pair in key[key.index(after: brace)..<key.index(before: key.endIndex)].split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    guard parts.count == 2 else { continue }
                    labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
                }
            } else {
                name = key
            }
            self.values[Series(name: String(name), labels: labels)] = value
        }
    }

    /// The value of the series `name` with exactly `labels`, if scraped.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        self.values[Series(name: name, labels: labels)]
    }

    /// The sum over every series `name` whose labels include `matching`.
    func sum(_ name: String, matching: [String: String] = [:]) -> Double {
        self.values.filter { series, _ in series.name == name && matching.allSatisfy { series.labels[$0.key] == $0.value } }.values.reduce(0, +)
    }

    /// GET `http://127.0.0.1:port/path`: the status and the body.
    static func get(_ path: String, port: Int) async throws -> (status: Int, body: String) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.timeoutInterval = 60
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    static func scrape(port: Int) async throws -> PrometheusText {
        let (status, body) = try await Self.get("/metrics", port: port)
        try #require(status == 200, "GET /metrics on 127.0.0.1:\(port) answered \(status): \(body)")
        return PrometheusText(body)
    }

    /// Polls `path` until it answers `status`; fails the test after `limit` (only so that a broken
    /// run does not hang; no timing is asserted).
    static func waitFor(_ path: String, port: Int, status expected: Int, limit: Duration = .seconds(120)) async throws -> String {
        let start = ContinuousClock.now
        var last = "(no answer)"
        while ContinuousClock.now - start < limit {
            if let (status, body) = try? await Self.get(path, port: port) {
                if status == expected { return body }
                last = "\(status) \(body)"
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        Issue.record("GET \(path) on 127.0.0.1:\(port) never answered \(expected); last: \(last)")
        return last
    }
}
