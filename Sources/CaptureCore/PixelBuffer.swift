import Foundation
import Synchronization

/// One frame's pixels in planes with strides, backed by memory drawn from a `PixelBufferPool`.
///
/// Mutable, then published: the producer writes the planes (`withMutablePlane`,
/// `mutableBaseAddress(ofPlane:)`, `setCompressedData`) until the buffer goes into a
/// `SampleBuffer`; from then on it is read-only, and every write call throws
/// `CaptureError.invalidState` instead of changing pixels another thread may be reading. Copy
/// it (`PixelConverter`, or a new buffer from a pool) to change a delivered frame.
/// That rule is why this is `@unchecked Sendable`: after publication every holder only reads.
/// When the last reference goes away the memory returns to its pool instead of being freed.
public final class PixelBuffer: @unchecked Sendable {  // unchecked: raw pixels, read-only once published
    public let format: PixelFormat
    public let width: Int
    public let height: Int
    /// Bytes per row of each plane (may exceed the visible width for alignment).
    public let bytesPerRow: [Int]
    /// Rows per plane.
    public let planeRows: [Int]
    /// Valid bytes for compressed formats (MJPEG); the whole allocation for raw ones.
    public private(set) var dataSize: Int
    private let planeOffsets: [Int]
    private let storage: PixelStorage
    /// The pool this buffer returns to when released (nil for standalone buffers).
    public let pool: PixelBufferPool?
    /// Set once, when a `SampleBuffer` takes the buffer; the write calls check it.
    private let published = Atomic<Bool>(false)

    init(format: PixelFormat, width: Int, height: Int, storage: PixelStorage, pool: PixelBufferPool?) {
        self.format = format
        self.width = width
        self.height = height
        self.storage = storage
        self.pool = pool
        let layout = PixelBuffer.layout(format: format, width: width, height: height)
        self.bytesPerRow = layout.bytesPerRow
        self.planeRows = layout.rows
        self.planeOffsets = layout.offsets
        self.dataSize = layout.totalBytes
    }

    /// A standalone buffer not tied to a pool (tests, one-off conversions).
    public convenience init(format: PixelFormat, width: Int, height: Int) {
        let bytes = PixelBuffer.layout(format: format, width: width, height: height).totalBytes
        self.init(format: format, width: width, height: height, storage: PixelStorage(capacity: bytes), pool: nil)
    }

    deinit { pool?.recycle(storage) }

    /// A buffer over memory a device lent (a V4L2 driver's mapped buffer), without a copy: only
    /// when the device laid the frame out as `layout` does (`bytesPerRow` and `planeOffsets`, the
    /// driver's pitch and plane starts, equal to it) within `length` bytes; nil otherwise, and for
    /// compressed formats. `giveBack` runs once, when the last reference goes, and hands the memory
    /// back to the device.
    package static func borrowing(_ pointer: UnsafeMutableRawPointer, length: Int, format: PixelFormat, width: Int, height: Int,
                                  bytesPerRow: [Int], planeOffsets: [Int],
                                  giveBack: @escaping @Sendable () -> Void) -> PixelBuffer? {
        let layout = PixelBuffer.layout(format: format, width: width, height: height)
        guard !layout.bytesPerRow.isEmpty, layout.bytesPerRow == bytesPerRow, layout.offsets == planeOffsets,
              length >= layout.totalBytes else { return nil }
        return PixelBuffer(format: format, width: width, height: height,
                           storage: PixelStorage(borrowing: pointer, capacity: layout.totalBytes, giveBack: giveBack), pool: nil)
    }

    /// True for a buffer over a device's own memory (`borrowing`): the device has one buffer fewer
    /// while it is held, so a holder that keeps frames for long copies them first (as
    /// `MovieFileOutput` does past two queued frames).
    package var isBorrowedFromDevice: Bool { storage.giveBack != nil }

    public var planeCount: Int { bytesPerRow.count }

    /// Bytes of the whole backing store (all planes with their padding).
    public var allocationSize: Int { storage.capacity }

    /// True once a `SampleBuffer` holds the buffer: its pixels can no longer change.
    public var isPublished: Bool { published.load(ordering: .acquiring) }

    /// What a producer last drew into this memory, for a producer that redraws only what changed
    /// when its pool hands the same memory back (the simulator's renderer). Every write call
    /// clears it, so memory written by anyone else is never taken for a known picture; the
    /// producer sets it after its last write.
    package var producerContent: AnyObject? {
        get { storage.producerContent }
        set { storage.producerContent = newValue }
    }

    /// Called by `SampleBuffer` when it takes the buffer.
    func markPublished() { published.store(true, ordering: .releasing) }

    private func checkWritable(_ operation: String) throws(CaptureError) {
        guard !isPublished else {
            throw .invalidState("\(operation) on a \(format) \(width)x\(height) buffer that a SampleBuffer already holds: delivered frames are read-only; copy the frame into a buffer of your own to change it")
        }
    }

    /// Base address of plane `index`, for reading; valid while the buffer is alive.
    public func baseAddress(ofPlane index: Int) -> UnsafeRawPointer {
        UnsafeRawPointer(storage.pointer + planeOffsets[index])
    }

    /// Base address of plane `index`, for the producer writing the frame before it is published.
    public func mutableBaseAddress(ofPlane index: Int) throws(CaptureError) -> UnsafeMutableRawPointer {
        try checkWritable("writing plane \(index)")
        storage.producerContent = nil
        return storage.pointer + planeOffsets[index]
    }

    /// Base address of plane `index` for CaptureKit's own producers (renderers, decoders,
    /// converters), which write a buffer they just took from a pool, before publishing it.
    package func producerBaseAddress(ofPlane index: Int) -> UnsafeMutableRawPointer {
        storage.producerContent = nil
        return storage.pointer + planeOffsets[index]
    }

    /// Write access for CaptureKit's own producers (see `producerBaseAddress(ofPlane:)`).
    package func withProducerPlane<R, E: Error>(_ index: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: producerBaseAddress(ofPlane: index), count: bytesPerRow[index] * planeRows[index]))
    }

    /// Read access to one plane's bytes (rows × bytesPerRow).
    public func withPlane<R, E: Error>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: baseAddress(ofPlane: index), count: bytesPerRow[index] * planeRows[index]))
    }

    /// Write access for the producer, before the buffer is published.
    public func withMutablePlane<R>(_ index: Int, _ body: (UnsafeMutableRawBufferPointer) throws(CaptureError) -> R) throws(CaptureError) -> R {
        try checkWritable("writing plane \(index)")
        storage.producerContent = nil
        return try body(UnsafeMutableRawBufferPointer(start: storage.pointer + planeOffsets[index], count: bytesPerRow[index] * planeRows[index]))
    }

    /// For compressed formats: copies `bytes` in (must fit the pool's capacity) and records the size.
    public func setCompressedData(_ bytes: UnsafeRawBufferPointer) throws(CaptureError) {
        try checkWritable("setting compressed data")
        guard bytes.count <= storage.capacity else {
            throw .invalidArgument("compressed frame of \(bytes.count) bytes exceeds the buffer capacity \(storage.capacity)")
        }
        storage.producerContent = nil
        if let base = bytes.baseAddress { storage.pointer.copyMemory(from: base, byteCount: bytes.count) }
        dataSize = bytes.count
    }

    /// The bytes of a compressed buffer.
    public func withCompressedData<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage.pointer, count: dataSize))
    }

    struct Layout {
        var bytesPerRow: [Int] = []
        var rows: [Int] = []
        var offsets: [Int] = []
        var totalBytes = 0
    }

    /// Rows padded to 64 bytes so SIMD code and libswscale get aligned rows.
    static func layout(format: PixelFormat, width: Int, height: Int) -> Layout {
        var layout = Layout()
        let planes = format.planes(width: width, height: height)
        if planes.isEmpty {
            // Compressed: a generous upper bound for one JPEG frame.
            layout.totalBytes = max(width * height * 2, 4096)
            return layout
        }
        for plane in planes {
            let stride = (plane.bytesPerRow + 63) & ~63
            layout.offsets.append(layout.totalBytes)
            layout.bytesPerRow.append(stride)
            layout.rows.append(plane.rows)
            layout.totalBytes += stride * plane.rows
        }
        return layout
    }
}

/// Raw aligned memory; freed exactly once when the pool (or a standalone buffer) lets it go.
/// Borrowed memory (a device's) is not freed but given back, once.
final class PixelStorage: @unchecked Sendable {  // unchecked: raw memory, freed once; used under PixelBuffer's rule
    let pointer: UnsafeMutableRawPointer
    let capacity: Int
    let giveBack: (@Sendable () -> Void)?
    /// `PixelBuffer.producerContent`: travels with the memory through the pool. Touched only by
    /// the buffer's holder, under the same rules as the pixels.
    var producerContent: AnyObject?

    init(capacity: Int) {
        self.capacity = capacity
        pointer = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 64)
        giveBack = nil
    }

    init(borrowing pointer: UnsafeMutableRawPointer, capacity: Int, giveBack: @escaping @Sendable () -> Void) {
        self.pointer = pointer
        self.capacity = capacity
        self.giveBack = giveBack
    }

    deinit {
        if let giveBack { giveBack() } else { pointer.deallocate() }
    }
}

/// A reusable set of pixel buffers of one format and size. Buffers come back when released, so
/// steady-state capture allocates nothing; a pool with a limit reports exhaustion instead of growing.
public final class PixelBufferPool: Sendable {
    public let format: PixelFormat
    public let width: Int
    public let height: Int
    /// At most this many buffers may be outstanding at once (nil = unbounded).
    public let maximumBufferCount: Int?
    private let byteCount: Int
    private let state = Locked(State())
    /// Signalled when a buffer of a bounded pool returns (or `wakeWaiters` is called), for
    /// `waitForBuffer`; it guards no state of its own.
    private let returned = NSCondition()

    struct State {
        var free: [PixelStorage] = []
        var outstanding = 0
        var allocations = 0
    }

    public init(format: PixelFormat, width: Int, height: Int, maximumBufferCount: Int? = nil) {
        self.format = format
        self.width = width
        self.height = height
        self.maximumBufferCount = maximumBufferCount
        self.byteCount = PixelBuffer.layout(format: format, width: width, height: height).totalBytes
    }

    private enum Grant { case reuse(PixelStorage), allocate, exhausted }

    /// A buffer from the pool, or nil when `maximumBufferCount` buffers are already out.
    public func makeBuffer() -> PixelBuffer? {
        let grant: Grant = state.withLock { state in
            if let limit = maximumBufferCount, state.outstanding >= limit { return .exhausted }
            state.outstanding += 1
            if let reused = state.free.popLast() { return .reuse(reused) }
            state.allocations += 1
            return .allocate
        }
        let storage: PixelStorage
        switch grant {
        case .exhausted: return nil
        case .reuse(let reused): storage = reused
        case .allocate: storage = PixelStorage(capacity: byteCount)
        }
        return PixelBuffer(format: format, width: width, height: height, storage: storage, pool: self)
    }

    func recycle(_ storage: PixelStorage) {
        state.withLock { state in
            state.outstanding -= 1
            state.free.append(storage)
        }
        if maximumBufferCount != nil { wakeWaiters() }
    }

    /// How `waitForBuffer` ended.
    public enum WaitOutcome: Sendable {
        case buffer(PixelBuffer)
        /// `isCancelled` became true (the waiter was woken by `wakeWaiters`).
        case cancelled
        /// No buffer came back within the timeout.
        case timedOut
    }

    /// A buffer from the pool, waiting for one to be returned when all are out. Wakes on each
    /// return (no polling); `timeout` is wall time and only bounds a wait that would otherwise
    /// never end. Call `wakeWaiters()` after making `isCancelled` true.
    public func waitForBuffer(timeout: Duration, isCancelled: () -> Bool) -> WaitOutcome {
        if let buffer = makeBuffer() { return .buffer(buffer) }
        let deadline = Date(timeIntervalSinceNow: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        returned.lock()
        defer { returned.unlock() }
        // A return between a failed `makeBuffer` and `wait` cannot be missed: `recycle` signals
        // under `returned`'s lock, which this thread holds until `wait` releases it.
        while true {
            if let buffer = makeBuffer() { return .buffer(buffer) }
            if isCancelled() { return .cancelled }
            if !returned.wait(until: deadline) {
                if let buffer = makeBuffer() { return .buffer(buffer) }
                return isCancelled() ? .cancelled : .timedOut
            }
        }
    }

    /// Wakes every `waitForBuffer` so it re-checks its cancellation.
    public func wakeWaiters() {
        returned.lock()
        returned.broadcast()
        returned.unlock()
    }

    /// How many buffers were ever allocated; constant in steady state.
    public var allocationCount: Int { state.withLock { $0.allocations } }
    /// Buffers currently held by someone.
    public var outstandingCount: Int { state.withLock { $0.outstanding } }
}
