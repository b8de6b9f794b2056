public import PushFleetCore

/// A recipient's values for a payload template, packed as its shard keeps them, with the size of
/// its rendering checked: what every audience of a personalized launch does per recipient.
public enum RecipientValues {
    /// Packs the values `value` gives for each of `template`'s fields.
    /// - Throws: ``LaunchPlanError`` when the payload rendered from them is over `format`'s limit
    ///   (its reader prefixes the recipient's place: file and line, body index).
    public static func pack(_ template: PayloadTemplate, format: PayloadFormat, value: (String) throws -> String?) throws -> [UInt8] {
        let packed = template.pack(try template.fields.map(value))
        let size = template.renderedSize(packed: packed)!
        let limit = format.maximumByteCount
        guard size <= limit else {
            throw LaunchPlanError("the payload rendered for this recipient is \(size) bytes, \(size - limit) over the \(limit)-byte limit of the \(format)")
        }
        return packed
    }
}
