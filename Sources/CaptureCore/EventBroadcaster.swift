import Synchronization

/// Fans events out to any number of AsyncStream subscribers (notifications as AsyncSequence).
public final class EventBroadcaster<Event: Sendable>: Sendable {
    private let continuations = Locked<[Int: AsyncStream<Event>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)

    public init() {}

    /// A new stream that receives every event sent from now on.
    public func subscribe() -> AsyncStream<Event> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(256))
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        continuations.withLock { $0[id] = continuation }
        return stream
    }

    public func send(_ event: Event) {
        for continuation in continuations.withLock({ Array($0.values) }) {
            continuation.yield(event)
        }
    }
}
