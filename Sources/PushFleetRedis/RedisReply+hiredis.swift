import CHiredis

extension RedisReply {
    /// Copies a hiredis reply, recursively, into Swift values. Strings are read with their length,
    /// so embedded NUL bytes survive. The caller still owns `reply` and frees the top-level object.
    init(copying reply: UnsafePointer<redisReply>) {
        let value = reply.pointee
        switch value.type {
        case REDIS_REPLY_STRING:
            self = .bulk(Self.bytes(value))
        case REDIS_REPLY_STATUS:
            self = .status(String(decoding: Self.bytes(value), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            self = .error(String(decoding: Self.bytes(value), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int(value.integer))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            elements.reserveCapacity(value.elements)
            for index in 0..<value.elements {
                if let element = value.element?[index] {
                    elements.append(RedisReply(copying: element))
                } else {
                    elements.append(.null)
                }
            }
            self = .array(elements)
        case REDIS_REPLY_NIL:
            self = .null
        default:
            self = .error("PushFleet: hiredis returned a reply of unknown type \(value.type)")
        }
    }

    private static func bytes(_ value: redisReply) -> [UInt8] {
        guard let start = value.str, value.len > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: start, count: value.len))
    }
}
