public import DequeModule

/// The frames written on one binary-protocol connection whose fate is not yet known, and the rule
/// that settles them. Performs no I/O and reads no clock.
///
/// The gateway answers only failures, late, and then discards everything after the failed frame.
/// A frame therefore counts as processed only on proof: an error response naming a *later*
/// identifier. The sender makes that proof on purpose by writing a frame the gateway must reject
/// (a sentinel); its error response confirms every frame before it.
///
/// An error response settles the window exactly: frames before its identifier are accepted, the
/// one it names is rejected (status 10 *Shutdown* instead names the last accepted frame), and the
/// tail after it must be sent again. A connection that closes without an error response leaves
/// every frame in the window unknown; they are all sent again, so re-sends are bounded by the window.
public struct BinarySendWindow<Element> {
    @usableFromInline
    struct Entry {
        @usableFromInline var identifier: UInt32
        @usableFromInline var element: Element

        @inlinable
        init(identifier: UInt32, element: Element) {
            self.identifier = identifier
            self.element = element
        }
    }

    /// How the window ends after an error response.
    public struct Resolution {
        /// Frames before the failed one, in write order: the gateway accepted them.
        public var accepted: [Element]
        /// The frame the error names; `nil` for status 10 or an identifier not in the window.
        public var rejected: Element?
        /// Frames after the failed one, in write order: discarded by the gateway, to be sent again.
        public var resend: [Element]
        /// `false` if no frame in the window had the identifier: then nothing is known, and
        /// everything in the window is to be sent again.
        public var identifierMatched: Bool

        @inlinable
        init(accepted: [Element], rejected: Element?, resend: [Element], identifierMatched: Bool) {
            self.accepted = accepted
            self.rejected = rejected
            self.resend = resend
            self.identifierMatched = identifierMatched
        }
    }

    @usableFromInline var entries: Deque<Entry> = []

    public init() {}

    /// Frames written and not yet settled.
    public var count: Int { self.entries.count }
    public var isEmpty: Bool { self.entries.isEmpty }

    /// Records a frame written with `identifier`.
    @inlinable
    public mutating func written(_ element: Element, identifier: UInt32) {
        self.entries.append(Entry(identifier: identifier, element: element))
    }

    /// Settles the whole window with the gateway's error response. The window is empty afterwards:
    /// the gateway closes the connection after an error.
    ///
    /// Inlinable so that it is specialised for the sender's element type: this runs once per proof
    /// round over every frame of the round.
    @inlinable
    public mutating func resolve(_ response: BinaryErrorResponse) -> Resolution {
        defer { self.entries.removeAll() }
        guard let position = self.entries.firstIndex(where: { $0.identifier == response.identifier }) else {
            return Resolution(accepted: [], rejected: nil, resend: self.elements(0..<self.entries.count), identifierMatched: false)
        }
        let acceptedEnd = response.status.identifiesLastAccepted ? position + 1 : position
        return Resolution(
            accepted: self.elements(0..<acceptedEnd),
            rejected: response.status.identifiesLastAccepted ? nil : self.entries[position].element,
            resend: self.elements((position + 1)..<self.entries.count),
            identifierMatched: true
        )
    }

    /// Empties the window after the connection closed without an error response: nothing in it is
    /// known, so every frame is returned, in write order, to be sent again.
    @inlinable
    public mutating func connectionLost() -> [Element] {
        defer { self.entries.removeAll() }
        return self.elements(0..<self.entries.count)
    }

    @inlinable
    func elements(_ range: Range<Int>) -> [Element] {
        var elements: [Element] = []
        elements.reserveCapacity(range.count)
        for index in range { elements.append(self.entries[index].element) }
        return elements
    }
}

extension BinarySendWindow: Sendable where Element: Sendable {}
extension BinarySendWindow.Entry: Sendable where Element: Sendable {}
extension BinarySendWindow.Resolution: Sendable where Element: Sendable {}
extension BinarySendWindow.Resolution: Equatable where Element: Equatable {}
