import Synchronization

/// Per-control subscribers of `CaptureDevice.observe(_:)`.
final class ControlObservers: Sendable {
    private let subscribers = Locked<[Int: (ControlID, AsyncStream<TimedControlValue>.Continuation)]>([:])
    private let nextID = Atomic<Int>(0)

    func subscribe(_ control: ControlID) -> AsyncStream<TimedControlValue> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let (stream, continuation) = AsyncStream<TimedControlValue>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        continuation.onTermination = { [weak self] _ in _ = self?.subscribers.withLock { $0.removeValue(forKey: id) } }
        subscribers.withLock { $0[id] = (control, continuation) }
        return stream
    }

    func send(_ change: TimedControlValue) {
        for (control, continuation) in subscribers.withLock({ Array($0.values) }) where control == change.control {
            continuation.yield(change)
        }
    }

    func finishAll() {
        for (_, continuation) in subscribers.withLock({ Array($0.values) }) { continuation.finish() }
    }
}
