/// What a stream of samples looks like: the CMFormatDescription of CaptureKit.
public enum FormatDescription: Sendable, Hashable, CustomStringConvertible {
    case video(pixelFormat: PixelFormat, dimensions: Dimensions)
    case audio(AudioStreamFormat)

    public var mediaType: MediaType {
        switch self {
        case .video: return .video
        case .audio: return .audio
        }
    }

    public var description: String {
        switch self {
        case .video(let pf, let d): return "video \(pf) \(d)"
        case .audio(let a): return "audio \(a)"
        }
    }
}

/// One unit of captured media with its timing: a video frame or a run of audio frames.
public struct SampleBuffer: Sendable {
    public enum Payload: Sendable {
        case pixels(PixelBuffer)
        case audio(AudioPCMBuffer)
    }

    public let payload: Payload
    public let formatDescription: FormatDescription
    /// Presentation time on the session's clock.
    public let presentationTime: MediaTime
    /// For video the frame duration; for audio `frameLength / sampleRate`.
    public let duration: MediaTime
    /// The device's own running count (frame number for video, first sample index for audio).
    public let sequenceNumber: Int64
    /// Samples the device lost just before this one, and why (nil when none were lost).
    public let discontinuity: Discontinuity?

    public init(payload: Payload, formatDescription: FormatDescription,
                presentationTime: MediaTime, duration: MediaTime, sequenceNumber: Int64,
                discontinuity: Discontinuity? = nil) {
        // From here on the samples are shared read-only (PixelBuffer's and AudioPCMBuffer's rule).
        switch payload {
        case .pixels(let pixels): pixels.markPublished()
        case .audio(let audio): audio.markPublished()
        }
        self.discontinuity = discontinuity
        self.payload = payload
        self.formatDescription = formatDescription
        self.presentationTime = presentationTime
        self.duration = duration
        self.sequenceNumber = sequenceNumber
    }

    public var mediaType: MediaType { formatDescription.mediaType }

    public var pixelBuffer: PixelBuffer? {
        if case .pixels(let p) = payload { return p }
        return nil
    }

    public var audioBuffer: AudioPCMBuffer? {
        if case .audio(let a) = payload { return a }
        return nil
    }
}

/// Why samples were lost (AVCaptureOutput's dropped-sample reasons).
public enum DropReason: String, Sendable, Hashable, Codable {
    /// The consumer was still busy with an earlier sample.
    case lateData
    /// No buffer was free: consumers held on to too many.
    case outOfBuffers
    /// The device skipped samples (sequence gap, driver drop).
    case discontinuity
}

/// A run of samples a device lost before a delivered one.
public struct Discontinuity: Sendable, Hashable {
    public var count: Int
    public var reason: DropReason
    public init(count: Int, reason: DropReason) {
        self.count = count
        self.reason = reason
    }
}
