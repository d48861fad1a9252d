import Synchronization

/// Sample buffers from an output as an AsyncSequence that tells its output how many are still
/// unread, so a virtual-time session can wait for a slow reader instead of dropping.
public struct SampleBufferSequence: AsyncSequence, Sendable {
    public typealias Element = SampleBuffer

    let stream: AsyncStream<SampleBuffer>
    let feed: Feed

    /// The producer's side: yields samples and counts those not yet read.
    public final class Feed: Sendable {
        let continuation: AsyncStream<SampleBuffer>.Continuation
        private let unread = Atomic<Int>(0)
        let onRead: @Sendable () -> Void

        init(continuation: AsyncStream<SampleBuffer>.Continuation, onRead: @escaping @Sendable () -> Void) {
            self.continuation = continuation
            self.onRead = onRead
        }

        /// Samples yielded but not yet read.
        public var unreadCount: Int { unread.load(ordering: .relaxed) }

        /// False when the sequence's buffer was full and the sample was discarded.
        @discardableResult
        public func yield(_ sample: SampleBuffer) -> Bool {
            switch continuation.yield(sample) {
            case .enqueued:
                unread.wrappingAdd(1, ordering: .relaxed)
                return true
            case .dropped, .terminated:
                return false
            @unknown default:
                return false
            }
        }

        public func finish() { continuation.finish() }

        func didRead() {
            unread.wrappingSubtract(1, ordering: .relaxed)
            onRead()
        }
    }

    /// A sequence keeping at most `limit` unread samples (older ones are discarded beyond that);
    /// `onRead` runs after each read, `onTermination` when the reader goes away.
    public static func make(limit: Int, onRead: @escaping @Sendable () -> Void,
                            onTermination: @escaping @Sendable () -> Void) -> (SampleBufferSequence, Feed) {
        let (stream, continuation) = AsyncStream<SampleBuffer>.makeStream(bufferingPolicy: .bufferingOldest(limit))
        continuation.onTermination = { _ in onTermination() }
        let feed = Feed(continuation: continuation, onRead: onRead)
        return (SampleBufferSequence(stream: stream, feed: feed), feed)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<SampleBuffer>.Iterator
        let feed: Feed

        public mutating func next() async -> SampleBuffer? {
            let sample = await base.next()
            if sample != nil { feed.didRead() }
            return sample
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), feed: feed)
    }
}

/// The live AsyncSequence readers of one output: hands out sequences and forgets them when their
/// reader goes away. Shared by the data outputs.
public final class SampleBufferFeeds: Sendable {
    private let state = Locked<(next: Int, feeds: [Int: SampleBufferSequence.Feed])>((0, [:]))

    public init() {}

    /// A new sequence keeping at most `limit` unread samples; `onChange` runs after each read and
    /// when the reader goes away (outputs use it to tell a virtual-time session their demand changed).
    public func makeSequence(limit: Int, onChange: @escaping @Sendable () -> Void) -> SampleBufferSequence {
        let id = state.withLock { s -> Int in
            s.next += 1
            return s.next
        }
        let (sequence, feed) = SampleBufferSequence.make(limit: limit, onRead: onChange, onTermination: { [weak self] in
            _ = self?.state.withLock { $0.feeds.removeValue(forKey: id) }
            onChange()
        })
        state.withLock { $0.feeds[id] = feed }
        onChange()
        return sequence
    }

    public var isEmpty: Bool { state.withLock { $0.feeds.isEmpty } }

    public var all: [SampleBufferSequence.Feed] { state.withLock { Array($0.feeds.values) } }

    /// True when every reader has fewer than `limit` samples waiting.
    public func allUnread(below limit: Int) -> Bool {
        state.withLock { $0.feeds.values.allSatisfy { $0.unreadCount < limit } }
    }
}
