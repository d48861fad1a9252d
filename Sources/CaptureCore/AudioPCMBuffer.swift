import Synchronization

/// The layout of PCM samples.
public struct AudioStreamFormat: Sendable, Hashable, Codable, CustomStringConvertible {
    public enum SampleFormat: String, Sendable, Hashable, Codable {
        case int16 = "s16"
        case float32 = "f32"

        public var bytesPerSample: Int { self == .int16 ? 2 : 4 }
    }

    public var sampleRate: Int
    public var channelCount: Int
    public var sampleFormat: SampleFormat
    /// Samples of all channels interleaved frame by frame (the only layout devices deliver).
    public var isInterleaved: Bool { true }

    public init(sampleRate: Int, channelCount: Int, sampleFormat: SampleFormat) {
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.sampleFormat = sampleFormat
    }

    public var bytesPerFrame: Int { channelCount * sampleFormat.bytesPerSample }

    public var description: String { "\(sampleRate) Hz \(channelCount) ch \(sampleFormat.rawValue)" }
}

/// Interleaved PCM samples. Same ownership rule as `PixelBuffer` (and why it is
/// `@unchecked Sendable`): filled by the producer, then read-only once a `SampleBuffer` holds it —
/// `withMutableBytes` and `setFrameLength` then throw `CaptureError.invalidState`.
public final class AudioPCMBuffer: @unchecked Sendable {  // unchecked: raw samples, read-only once published
    public let format: AudioStreamFormat
    public let frameCapacity: Int
    public private(set) var frameLength: Int
    private let storage: UnsafeMutableRawPointer
    private let published = Atomic<Bool>(false)

    /// True once a `SampleBuffer` holds the buffer: its samples can no longer change.
    public var isPublished: Bool { published.load(ordering: .acquiring) }

    /// Called by `SampleBuffer` when it takes the buffer.
    func markPublished() { published.store(true, ordering: .releasing) }

    private func checkWritable(_ operation: String) throws(CaptureError) {
        guard !isPublished else {
            throw .invalidState("\(operation) on an audio buffer (\(format)) that a SampleBuffer already holds: delivered samples are read-only; copy them into a buffer of your own to change them")
        }
    }

    public init(format: AudioStreamFormat, frameCapacity: Int) {
        self.format = format
        self.frameCapacity = frameCapacity
        self.frameLength = frameCapacity
        storage = UnsafeMutableRawPointer.allocate(byteCount: max(1, frameCapacity * format.bytesPerFrame), alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: max(1, frameCapacity * format.bytesPerFrame))
    }

    deinit { storage.deallocate() }

    /// Shortens the valid region (e.g. a device read returned fewer frames); clamped to
    /// 0…`frameCapacity`, since a buffer cannot hold more than it has room for.
    public func setFrameLength(_ length: Int) throws(CaptureError) {
        try checkWritable("setting the frame length")
        frameLength = min(max(length, 0), frameCapacity)
    }

    public var byteCount: Int { frameLength * format.bytesPerFrame }

    public func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: storage, count: byteCount))
    }

    public func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws(CaptureError) -> R) throws(CaptureError) -> R {
        try checkWritable("writing samples")
        return try body(UnsafeMutableRawBufferPointer(start: storage, count: frameCapacity * format.bytesPerFrame))
    }

    /// The whole capacity for CaptureKit's own producers (device reads, generators, decoders),
    /// which fill a buffer they just made, before publishing it.
    package func withProducerBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: storage, count: frameCapacity * format.bytesPerFrame))
    }

    /// Sets the valid length for CaptureKit's own producers (see `withProducerBytes`).
    package func setProducerFrameLength(_ length: Int) {
        frameLength = min(max(length, 0), frameCapacity)
    }

    /// Float samples (interleaved) for float32 buffers; other formats see an empty buffer (as
    /// AVAudioPCMBuffer's `floatChannelData` is nil for them) — `floatSamples()` converts any format.
    public func withFloatSamples<R, E: Error>(_ body: (UnsafeBufferPointer<Float>) throws(E) -> R) throws(E) -> R {
        guard format.sampleFormat == .float32 else { return try body(UnsafeBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeBufferPointer(start: storage.assumingMemoryBound(to: Float.self),
                                            count: frameLength * format.channelCount))
    }

    /// The largest |sample| in −1…1 over every fourth sample (a level meter's reading, without
    /// converting or copying the buffer).
    public var peakMagnitude: Float {
        let count = frameLength * format.channelCount
        switch format.sampleFormat {
        case .float32:
            let p = storage.assumingMemoryBound(to: Float.self)
            // Sixteen samples a step, as vectors (lanes 0, 4, 8 and 12 are the ones read); a NaN is
            // passed over as `max` passes it over; the rest one by one.
            var peaks = SIMD4<Float>(repeating: 0), i = 0
            while i + 16 <= count {
                let v = UnsafeRawPointer(p + i).loadUnaligned(as: SIMD16<Float>.self).evenHalf.evenHalf
                let magnitude = v.replacing(with: -v, where: v .< 0)
                peaks.replace(with: magnitude, where: peaks .< magnitude)
                i += 16
            }
            var peak = max(max(peaks[0], peaks[1]), max(peaks[2], peaks[3]))
            while i < count { peak = max(peak, abs(p[i])); i += 4 }
            return peak
        case .int16:
            let p = storage.assumingMemoryBound(to: Int16.self)
            var peak: Int32 = 0
            for i in stride(from: 0, to: count, by: 4) { peak = max(peak, abs(Int32(p[i]))) }
            return Float(peak) / 32768
        }
    }

    /// Samples converted to Float in −1…1, one array, interleaved.
    public func floatSamples() -> [Float] {
        switch format.sampleFormat {
        case .float32: return withFloatSamples { Array($0) }
        case .int16:
            let p = storage.assumingMemoryBound(to: Int16.self)
            return (0..<(frameLength * format.channelCount)).map { Float(p[$0]) / 32768 }
        }
    }
}
