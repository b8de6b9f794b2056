public import PushFleetCore

/// A recipient's values for a payload template, packed as its shard keeps them, with the size of
/// its rendering checked: what every audience of a personalized launch does per recipient.
public enum RecipientValues {
    /// Appends the recipient's values, `valueAt(i)` for field `i` of the template, to `list`.
    /// - Throws: ``LaunchPlanError`` when the payload rendered from them is over `format`'s limit
    ///   (its reader prefixes the recipient's place: file and line, body index).
    public static func append(
        to list: inout RecipientValueList, _ template: PayloadTemplate, format: PayloadFormat, valueAt: (Int) throws -> String?
    ) throws {
        try self.check(try list.append(template, valueAt), format: format)
    }

    /// ``append(to:_:format:valueAt:)`` from each field's value as UTF-8, `utf8(i)` (nil or empty:
    /// none), without making strings: an audience file's recipients (``TokenFileReader/BatchValues``).
    public static func append(
        to list: inout RecipientValueList, _ template: PayloadTemplate, format: PayloadFormat, utf8: (Int) -> UnsafeBufferPointer<UInt8>?
    ) throws {
        try self.check(list.append(template, utf8: utf8), format: format)
    }

    private static func check(_ size: Int, format: PayloadFormat) throws {
        let limit = format.maximumByteCount
        guard size <= limit else {
            throw LaunchPlanError("the payload rendered for this recipient is \(size) bytes, \(size - limit) over the \(limit)-byte limit of the \(format)")
        }
    }
}
