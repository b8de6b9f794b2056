import ArgumentParser

/// An error for the operator: one sentence that says what is wrong and where. Exits with status 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
