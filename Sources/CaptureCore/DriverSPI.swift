import Foundation

/// The driver SPI: the one protocol family a capture backend implements.
///
/// Everything above it (devices, sessions, outputs) is backend-agnostic: the simulator, V4L2/ALSA
/// and fixture replay all plug in here, and nothing above knows which one it talks to.
public protocol CaptureDriver: Sendable {
    /// Prefix of the unique IDs this driver owns, e.g. `sim` for `sim:back`.
    var scheme: String { get }
    /// The devices present now.
    func discoverDevices() throws(CaptureError) -> [DeviceDescription]
    /// Opens a device by unique ID; the handle stays valid until the device disconnects.
    func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice
}

/// A device as its driver describes it: static facts plus its formats.
public struct DeviceDescription: Sendable, Hashable {
    public enum Position: String, Sendable, Hashable, Codable { case unspecified, front, back, external }

    public var uniqueID: String
    public var localizedName: String
    public var modelID: String
    public var mediaType: MediaType
    public var position: Position
    public var formats: [DeviceFormat]
    /// Index into `formats` of the format a fresh device starts with.
    public var defaultFormatIndex: Int

    public init(uniqueID: String, localizedName: String, modelID: String, mediaType: MediaType,
                position: Position, formats: [DeviceFormat], defaultFormatIndex: Int = 0) {
        self.uniqueID = uniqueID
        self.localizedName = localizedName
        self.modelID = modelID
        self.mediaType = mediaType
        self.position = position
        self.formats = formats
        self.defaultFormatIndex = defaultFormatIndex
    }
}

/// A supported range of frame rates (AVFrameRateRange). `minFrameDuration = 1 / maxFrameRate`.
public struct FrameRateRange: Sendable, Hashable, CustomStringConvertible {
    public var minFrameDuration: MediaTime
    public var maxFrameDuration: MediaTime

    public init(minFrameDuration: MediaTime, maxFrameDuration: MediaTime) {
        self.minFrameDuration = minFrameDuration
        self.maxFrameDuration = maxFrameDuration
    }

    /// A range for whole frame rates, e.g. `FrameRateRange(minRate: 1, maxRate: 30)`.
    public init(minRate: Int, maxRate: Int) {
        self.init(minFrameDuration: MediaTime(value: 1, timescale: Int32(maxRate)),
                  maxFrameDuration: MediaTime(value: 1, timescale: Int32(minRate)))
    }

    public var maxFrameRate: Double { 1 / minFrameDuration.seconds }
    public var minFrameRate: Double { 1 / maxFrameDuration.seconds }

    public func contains(frameDuration d: MediaTime) -> Bool {
        d >= minFrameDuration && d <= maxFrameDuration
    }

    public var description: String {
        minFrameRate == maxFrameRate ? "\(Self.format(maxFrameRate)) fps"
            : "\(Self.format(minFrameRate))-\(Self.format(maxFrameRate)) fps"
    }

    static func format(_ rate: Double) -> String {
        rate == rate.rounded() ? String(Int(rate)) : String(format: "%.3g", rate)
    }
}

/// One format a device can deliver (AVCaptureDevice.Format).
public struct DeviceFormat: Sendable, Hashable {
    public var formatDescription: FormatDescription
    /// Video only: the supported frame-rate ranges.
    public var frameRateRanges: [FrameRateRange]
    /// Video only: stabilization modes this format can apply (never `auto`; `off` always).
    public var supportedStabilizationModes: [VideoStabilizationMode]

    public init(formatDescription: FormatDescription, frameRateRanges: [FrameRateRange] = [],
                supportedStabilizationModes: [VideoStabilizationMode] = [.off]) {
        self.formatDescription = formatDescription
        self.frameRateRanges = frameRateRanges
        self.supportedStabilizationModes = supportedStabilizationModes
    }

    public var mediaType: MediaType { formatDescription.mediaType }

    public var dimensions: Dimensions? {
        if case .video(_, let d) = formatDescription { return d }
        return nil
    }

    public var pixelFormat: PixelFormat? {
        if case .video(let p, _) = formatDescription { return p }
        return nil
    }

    public var audioFormat: AudioStreamFormat? {
        if case .audio(let a) = formatDescription { return a }
        return nil
    }

    /// The frame duration a fresh device uses: 30 fps where the format allows it (as AVFoundation
    /// does), otherwise the fastest rate it has.
    public var defaultFrameDuration: MediaTime? {
        let thirty = MediaTime(value: 1, timescale: 30)
        if supports(frameDuration: thirty) { return thirty }
        return frameRateRanges.map(\.minFrameDuration).min()
    }

    public func supports(frameDuration: MediaTime) -> Bool {
        frameRateRanges.contains { $0.contains(frameDuration: frameDuration) }
    }
}

/// What a stream should deliver.
public struct StreamConfiguration: Sendable, Hashable {
    public var format: DeviceFormat
    /// Video: the time between frames. Ignored for audio.
    public var frameDuration: MediaTime
    public var pace: CapturePace
    /// Audio: frames per delivered buffer.
    public var audioFramesPerBuffer: Int

    public init(format: DeviceFormat, frameDuration: MediaTime, pace: CapturePace, audioFramesPerBuffer: Int = 1024) {
        self.format = format
        self.frameDuration = frameDuration
        self.pace = pace
        self.audioFramesPerBuffer = audioFramesPerBuffer
    }
}

/// An opened device.
public protocol DriverDevice: AnyObject, Sendable {
    var description: DeviceDescription { get }
    /// Prepares a stream; nothing flows until `start`.
    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream
    /// The controls this device has (see DriverControls.swift; default: none).
    var controls: [ControlDescription] { get }
    func value(of control: ControlID) throws(CaptureError) -> ControlValue
    /// Applies a control; a stream picks the new value up from its next frame.
    func setValue(_ value: ControlValue, for control: ControlID) throws(CaptureError)
    func acquireConfigurationPriority() throws(CaptureError)
    func releaseConfigurationPriority()
}

/// A running flow of samples, pulled one at a time by the session.
///
/// `nextSample` blocks until the next sample is due (real time) or returns at once (virtual
/// time); nil means the stream ended or was stopped. PTS are on the host monotonic clock for
/// real-time streams and start at zero for virtual ones.
public protocol DriverStream: AnyObject, Sendable {
    func start(at hostTime: MediaTime) throws(CaptureError)
    func nextSample() throws(CaptureError) -> SampleBuffer?
    /// Unblocks `nextSample` and stops delivery; safe to call from any thread, more than once.
    func stop()
}
