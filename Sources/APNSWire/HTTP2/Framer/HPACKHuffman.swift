/// HPACK's Huffman code (RFC 7541 Appendix B), for reading: APNs may Huffman-code any string of an
/// answer's header block. This client writes its own strings raw and never needs the encoder.
enum HPACKHuffman {
    /// Symbol `i`'s code, right-aligned, and its length in bits; symbol 256 is EOS.
    static let codes: [(code: UInt32, length: UInt8)] = HPACKHuffmanTable.codes

    /// The code as a binary tree, two children per node: a value ≥ 0 is a node, a value < 0 is the
    /// leaf of symbol `-(value + 1)`. Node 0 is the root.
    private static let tree: [Int16] = {
        var children: [Int16] = [0, 0]
        for (symbol, (code, length)) in codes.enumerated() {
            var node = 0
            for bit in stride(from: Int(length) - 1, through: 0, by: -1) {
                let slot = 2 * node + Int((code >> UInt32(bit)) & 1)
                if bit == 0 {
                    children[slot] = -Int16(symbol + 1)
                } else {
                    if children[slot] == 0 {
                        children[slot] = Int16(children.count / 2)
                        children += [0, 0]
                    }
                    node = Int(children[slot])
                }
            }
        }
        return children
    }()

    enum DecodingError: Error {
        /// The string ends inside a symbol longer than 7 bits, or its padding is not EOS's leading ones.
        case badPadding
        /// The string contains EOS.
        case endOfString
    }

    /// Decodes `bytes`, handing each symbol to `body` in order.
    static func decode(_ bytes: UnsafeRawBufferPointer, _ body: (UInt8) -> Void) throws(DecodingError) {
        try self.tree.withUnsafeBufferPointer { tree throws(DecodingError) in
            var node = 0
            /// Bits read since the last symbol, and whether all were ones.
            var pending = 0
            var allOnes = true
            for byte in bytes {
                var bit = 7
                while bit >= 0 {
                    let one = (byte >> UInt8(bit)) & 1
                    let next = tree[2 * node + Int(one)]
                    pending += 1
                    allOnes = allOnes && one == 1
                    if next < 0 {
                        let symbol = Int(-(next + 1))
                        guard symbol < 256 else { throw .endOfString }
                        body(UInt8(symbol))
                        node = 0
                        pending = 0
                        allOnes = true
                    } else {
                        node = Int(next)
                    }
                    bit -= 1
                }
            }
            guard pending <= 7, allOnes else { throw .badPadding }
        }
    }
}
