import Foundation
import Testing

/// The README's layout table names the targets as Package.swift declares them: each target has
/// its row, and each row names targets that exist (or the separate `Fuzz/` package).
@Suite struct LayoutTableTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Names of the targets Package.swift declares, test targets left out.
    static func targets() throws -> Set<String> {
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declaration = /\.(target|executableTarget|systemLibrary)\(\s*name:\s*"([A-Za-z0-9]+)"/
        return Set(manifest.matches(of: declaration).map { String($0.output.2) })
    }

    /// The names in backticks in the first cell of each row of the README's "## Layout" table.
    static func tableNames() throws -> Set<String> {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "\n## Layout\n").dropFirst().first)
        var names: Set<String> = []
        for line in section.split(separator: "\n").prefix(while: { !$0.hasPrefix("## ") }) where line.hasPrefix("| `") {
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            names.formUnion(cell.matches(of: /`([^`]+)`/).map { String($0.output.1) })
        }
        return names
    }

    @Test func everyTargetHasItsRowAndEveryRowATarget() throws {
        let targets = try Self.targets()
        let names = try Self.tableNames()
        #expect(targets.count >= 10, "Package.swift read: \(targets.sorted())")
        #expect(targets.subtracting(names).isEmpty, "targets without a row in the README's layout table: \(targets.subtracting(names).sorted())")
        #expect(names.subtracting(targets).subtracting(["Fuzz/"]).isEmpty, "rows naming no target: \(names.subtracting(targets).sorted())")
    }
}
