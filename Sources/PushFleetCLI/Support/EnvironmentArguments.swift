import ArgumentParser
import Foundation

/// Flags from the environment, for containers and units: every long option or flag of the
/// command being run can be given as `PUSHFLEET_<NAME>` (`--metrics-port` → `PUSHFLEET_METRICS_PORT`),
/// or as `PUSHFLEET_<NAME>_FILE` naming a file that holds the value (a secret an orchestrator
/// mounts, such as a URL with a password). The command line wins over both; the variable wins
/// over its `_FILE`. A repeatable option takes a comma-separated list; a flag takes `true`/`false`
/// (also `1`/`0`, `yes`/`no`, `on`/`off`).
enum EnvironmentArguments {
    static let prefix = "PUSHFLEET_"

    /// `arguments` (without the program name) with the options the environment sets added.
    static func merged(_ arguments: [String], environment: [String: String]) throws -> [String] {
        let tree = try JSONDecoder().decode(DumpedTool.self, from: Data(PushFleet._dumpHelp().utf8)).command
        // The command is named by the leading words that are subcommand names.
        var command = tree
        for word in arguments {
            guard let next = command.subcommands?.first(where: { $0.commandName == word }) else { break }
            command = next
        }
        let terminator = arguments.firstIndex(of: "--") ?? arguments.endIndex
        let given = arguments[..<terminator]
        var added: [String] = []
        for argument in command.arguments ?? [] where argument.kind != .positional {
            guard let name = argument.names?.first(where: { $0.kind == .long })?.name, name != "help", name != "version" else { continue }
            let flag = "--" + name
            if given.contains(where: { $0 == flag || $0.hasPrefix(flag + "=") }) { continue }
            let variable = Self.variable(for: name)
            guard let value = try Self.value(of: variable, in: environment) else { continue }
            switch argument.kind {
            case .flag:
                switch value.lowercased() {
                case "1", "true", "yes", "on": added.append(flag)
                case "0", "false", "no", "off", "": break
                default: throw ValidationError("\(variable)=\(value): \(flag) is a flag; give true or false")
                }
            case .option where argument.isRepeating:
                for item in value.split(separator: ",", omittingEmptySubsequences: true) { added += [flag, String(item)] }
            default:
                added += [flag, value]
            }
        }
        return Array(given) + added + arguments[terminator...]
    }

    /// `metrics-port` → `PUSHFLEET_METRICS_PORT`.
    static func variable(for name: String) -> String {
        Self.prefix + name.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    private static func value(of variable: String, in environment: [String: String]) throws -> String? {
        if let value = environment[variable] { return value }
        guard let path = environment[variable + "_FILE"] else { return nil }
        do {
            var text = try String(contentsOfFile: path, encoding: .utf8)
            // A file written by `echo` or an editor ends with a newline that is not part of the value.
            while text.last?.isNewline == true { text.removeLast() }
            guard !text.contains(where: \.isNewline) else {
                // Never echoed: a key file named here by mistake must not end up in an error message.
                throw FileValueError.severalLines
            }
            return text
        } catch FileValueError.severalLines {
            throw ValidationError(
                "\(variable)_FILE=\(path): the file holds several lines, not one value; for an option that takes a path (a key, a certificate), set \(variable) to the path instead"
            )
        } catch {
            throw ValidationError("\(variable)_FILE=\(path): cannot read the file: \((error as NSError).localizedDescription)")
        }
    }
}

private enum FileValueError: Error { case severalLines }

/// The part of ArgumentParser's `--experimental-dump-help` description this reads.
private struct DumpedTool: Decodable {
    var command: DumpedCommand
}

private struct DumpedCommand: Decodable {
    var commandName: String
    var subcommands: [DumpedCommand]?
    var arguments: [DumpedArgument]?
}

private struct DumpedArgument: Decodable {
    enum Kind: String, Decodable { case positional, option, flag }
    struct Name: Decodable {
        enum Kind: String, Decodable { case long, short, longWithSingleDash }
        var kind: Kind
        var name: String
    }

    var kind: Kind
    var names: [Name]?
    var isRepeating: Bool
}
