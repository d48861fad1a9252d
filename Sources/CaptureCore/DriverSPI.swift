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
    /// The device with this unique ID, or nil. Default: searched in `discoverDevices()`; drivers
    /// whose IDs name something to open (fixture files) answer for IDs discovery does not list.
    func lookUpDevice(uniqueID: String) throws(CaptureError) -> DeviceDescription?
    /// Whether a unique ID is this driver's to answer. Default: it starts with `scheme`; drivers
    /// whose devices also carry other names (ALSA PCMs from a private configuration) say so here.
    func owns(uniqueID: String) -> Bool
    /// This driver as an `EventReportingDriver`, `HotPlugDriver`, `AvailabilityReportingDriver`, or
    /// nil. Defaults: `self` for drivers adopting the protocol, nil otherwise — never implement
    /// them. A `DeviceRegistry` asks these instead of casting: the first `as? any P` of a type
    /// searches every conformance record in the process (about 0.3 M instructions each).
    var asEventReporting: (any EventReportingDriver)? { get }
    var asHotPlug: (any HotPlugDriver)? { get }
    var asAvailabilityReporting: (any AvailabilityReportingDriver)? { get }
}

extension CaptureDriver {
    public func lookUpDevice(uniqueID: String) throws(CaptureError) -> DeviceDescription? {
        try discoverDevices().first { $0.uniqueID == uniqueID }
    }

    public func owns(uniqueID: String) -> Bool { uniqueID.hasPrefix(scheme) }

    public var asEventReporting: (any EventReportingDriver)? { nil }
    public var asHotPlug: (any HotPlugDriver)? { nil }
    public var asAvailabilityReporting: (any AvailabilityReportingDriver)? { nil }
}

// The more specific defaults, chosen for the drivers that adopt these protocols.
extension EventReportingDriver {
    public var asEventReporting: (any EventReportingDriver)? { self }
}

extension HotPlugDriver {
    public var asHotPlug: (any HotPlugDriver)? { self }
}

extension AvailabilityReportingDriver {
    public var asAvailabilityReporting: (any AvailabilityReportingDriver)? { self }
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
    /// What kind of device this is (discovery sessions filter on it).
    public var deviceType: DeviceType

    public init(uniqueID: String, localizedName: String, modelID: String, mediaType: MediaType,
                position: Position, formats: [DeviceFormat], defaultFormatIndex: Int = 0, deviceType: DeviceType? = nil) {
        self.uniqueID = uniqueID
        self.localizedName = localizedName
        self.modelID = modelID
        self.mediaType = mediaType
        self.position = position
        self.formats = formats
        self.defaultFormatIndex = defaultFormatIndex
        self.deviceType = deviceType ?? (mediaType == .audio ? .microphone : position == .external ? .external : .builtInWideAngleCamera)
    }
}

/// The kind of a capture device (AVCaptureDevice.DeviceType).
public enum DeviceType: String, Sendable, Hashable, Codable, CaseIterable {
    case builtInWideAngleCamera, builtInUltraWideCamera, builtInTelephotoCamera
    /// A camera plugged in from outside (USB/UVC webcams).
    case external
    case microphone
}

/// Video stabilization modes (AVCaptureVideoStabilizationMode). Formats support some of the
/// concrete ones; `auto` is only a connection's preference, never an active mode.
public enum VideoStabilizationMode: String, Sendable, Hashable, Codable, CaseIterable {
    case off, standard, cinematic, cinematicExtended, auto
}

/// How a format's autofocus works (AVCaptureDevice.Format.AutoFocusSystem).
public enum AutoFocusSystem: String, Sendable, Hashable, Codable {
    case none, contrastDetection, phaseDetection
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
    /// Video only: the camera's properties in this format (AVCaptureDevice.Format). Defaults describe
    /// a plain camera with no manual exposure limits known.
    public var properties: VideoFormatProperties

    public init(formatDescription: FormatDescription, frameRateRanges: [FrameRateRange] = [],
                properties: VideoFormatProperties = VideoFormatProperties()) {
        self.formatDescription = formatDescription
        self.frameRateRanges = frameRateRanges
        self.properties = properties
    }

    public var fieldOfView: Double { properties.fieldOfView }
    public var minExposureDuration: MediaTime { properties.minExposureDuration }
    public var maxExposureDuration: MediaTime { properties.maxExposureDuration }
    public var minISO: Double { properties.minISO }
    public var maxISO: Double { properties.maxISO }
    public var videoMaxZoomFactor: Double { properties.maxZoomFactor }
    public var isVideoHDRSupported: Bool { properties.isVideoHDRSupported }
    public var highResolutionStillImageDimensions: Dimensions? { properties.highResolutionStillDimensions }
    public var isFullRange: Bool { properties.isFullRange }
    /// The concrete stabilization modes this format supports, `off` always among them.
    public var supportedStabilizationModes: [VideoStabilizationMode] {
        [.off] + properties.stabilizationModes.filter { $0 != .off && $0 != .auto }
    }

    public func isVideoStabilizationModeSupported(_ mode: VideoStabilizationMode) -> Bool {
        mode == .off || properties.stabilizationModes.contains(mode)
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

/// A video format's camera properties (the rest of AVCaptureDevice.Format).
public struct VideoFormatProperties: Sendable, Hashable {
    /// Horizontal field of view in degrees.
    public var fieldOfView: Double
    public var minExposureDuration: MediaTime
    public var maxExposureDuration: MediaTime
    public var minISO: Double
    public var maxISO: Double
    public var maxZoomFactor: Double
    public var stabilizationModes: [VideoStabilizationMode]
    public var highResolutionStillDimensions: Dimensions?
    public var isVideoHDRSupported: Bool
    /// NV12 "420f" (full range) rather than "420v" (video range).
    public var isFullRange: Bool
    public var autoFocusSystem: AutoFocusSystem

    public init(fieldOfView: Double = 60, minExposureDuration: MediaTime = MediaTime(value: 1, timescale: 10_000),
                maxExposureDuration: MediaTime = MediaTime(value: 1, timescale: 5), minISO: Double = 100, maxISO: Double = 800,
                maxZoomFactor: Double = 1, stabilizationModes: [VideoStabilizationMode] = [.off],
                highResolutionStillDimensions: Dimensions? = nil, isVideoHDRSupported: Bool = false,
                isFullRange: Bool = false, autoFocusSystem: AutoFocusSystem = .none) {
        self.fieldOfView = fieldOfView
        self.minExposureDuration = minExposureDuration
        self.maxExposureDuration = maxExposureDuration
        self.minISO = minISO
        self.maxISO = maxISO
        self.maxZoomFactor = maxZoomFactor
        self.stabilizationModes = stabilizationModes
        self.highResolutionStillDimensions = highResolutionStillDimensions
        self.isVideoHDRSupported = isVideoHDRSupported
        self.isFullRange = isFullRange
        self.autoFocusSystem = autoFocusSystem
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

/// A change of a running stream's format or frame duration (`CaptureDevice` sends it when an app
/// changes `activeFormat` or the active frame durations, or a session preset re-picks the format,
/// while the device streams).
public struct StreamReconfiguration: Sendable {
    public var format: DeviceFormat
    public var frameDuration: MediaTime
    /// Called once, with the PTS of the first frame delivered with the change.
    public var applied: @Sendable (MediaTime) -> Void

    public init(format: DeviceFormat, frameDuration: MediaTime, applied: @escaping @Sendable (MediaTime) -> Void) {
        self.format = format
        self.frameDuration = frameDuration
        self.applied = applied
    }
}

/// A stream that takes a new format or frame duration while it runs, from its next frame boundary
/// (AVFoundation's live reconfiguration). Streams that do not adopt it are restarted by the session
/// with the new configuration (a gap in the samples, reported as a discontinuity by their backend).
public protocol ReconfigurableStream: DriverStream {
    /// Checks the change now (throws for a format or duration the stream cannot take) and applies it
    /// at the next frame boundary; a later call before that boundary replaces an earlier one (both
    /// `applied` handlers then fire with the same PTS).
    func reconfigure(_ change: StreamReconfiguration) throws(CaptureError)
}
