import Foundation
import PushFleetCore

/// Reads `--payload JSON` or `--payload @FILE` and checks it for `format`.
enum PayloadOption {
    static func load(_ argument: String, format: PayloadFormat, option: String = "--payload") throws -> Payload {
        let bytes: [UInt8]
        let source: String
        if argument.hasPrefix("@") {
            let path = String(argument.dropFirst())
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CLIError("cannot read the payload file \(path)")
            }
            bytes = Array(data)
            source = path
        } else {
            bytes = Array(argument.utf8)
            source = option
        }
        do {
            return try Payload(jsonText: bytes, format: format)
        } catch {
            throw CLIError("\(source): \(error)")
        }
    }
}
