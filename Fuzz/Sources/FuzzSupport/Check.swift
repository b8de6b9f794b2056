/// Stops the fuzz run when a target's property does not hold; libFuzzer keeps the input as a
/// crash artifact.
public func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("PROPERTY VIOLATED: \(message())") }
}
