
/// The legacy orientation enum (AVCaptureVideoOrientation), mapped onto rotation angles.
public enum VideoOrientation: String, Sendable, Hashable, CaseIterable {
    case portrait, portraitUpsideDown, landscapeRight, landscapeLeft

    /// The rotation angle this orientation stands for (landscapeRight is the sensor's native 0°).
    public var rotationAngle: Int {
        switch self {
        case .landscapeRight: return 0
        case .portrait: return 90
        case .landscapeLeft: return 180
        case .portraitUpsideDown: return 270
        }
    }

    public init?(rotationAngle: Int) {
        guard let match = Self.allCases.first(where: { $0.rotationAngle == rotationAngle }) else { return nil }
        self = match
    }
}

/// The link between one input's media and one output (AVCaptureConnection). Sessions create
/// connections automatically between compatible inputs and outputs.
///
/// Rotation and mirroring: a movie output writes them as the track's display matrix (players
/// rotate); data and photo outputs rotate and mirror the pixels they deliver.
public final class CaptureConnection: Sendable {
    public let input: CaptureDeviceInput
    public let output: any CaptureOutput
    public let mediaType: MediaType
    private let settings = Locked(Settings())

    struct Settings {
        var isEnabled = true
        var rotationAngle = 0
        var isMirrored = false
        var preferredStabilization = VideoStabilizationMode.off
    }

    init(input: CaptureDeviceInput, output: any CaptureOutput) {
        self.input = input
        self.output = output
        self.mediaType = input.mediaType
    }

    /// A disabled connection delivers nothing.
    public var isEnabled: Bool {
        get { settings.withLock { $0.isEnabled } }
        set { settings.withLock { $0.isEnabled = newValue } }
    }

    /// Active while enabled and its device is connected.
    public var isActive: Bool { isEnabled && input.device.isConnected }

    /// The format samples on this connection arrive in (the device's active format).
    public var formatDescription: FormatDescription { input.device.activeFormat.formatDescription }

    /// The video frame duration in force (invalid for audio).
    public var videoFrameDuration: MediaTime {
        mediaType == .video ? input.device.activeVideoMinFrameDuration : .invalid
    }

    // MARK: Rotation and mirroring (video only)

    /// Right angles only, on video connections.
    public func isVideoRotationAngleSupported(_ angle: Int) -> Bool {
        mediaType == .video && [0, 90, 180, 270].contains(angle)
    }

    /// Clockwise rotation in degrees applied to delivered video.
    public var videoRotationAngle: Int { settings.withLock { $0.rotationAngle } }

    public func setVideoRotationAngle(_ angle: Int) throws(CaptureError) {
        guard isVideoRotationAngleSupported(angle) else {
            throw .invalidArgument("rotation angle \(angle)° is not supported on this \(mediaType.rawValue) connection (use 0, 90, 180 or 270 on video)")
        }
        settings.withLock { $0.rotationAngle = angle }
    }

    /// The legacy orientation view of `videoRotationAngle`.
    public var videoOrientation: VideoOrientation {
        get { VideoOrientation(rotationAngle: videoRotationAngle) ?? .landscapeRight }
        set { settings.withLock { $0.rotationAngle = newValue.rotationAngle } }
    }

    public var isVideoMirroringSupported: Bool { mediaType == .video }

    public var isVideoMirrored: Bool { settings.withLock { $0.isMirrored } }

    public func setVideoMirrored(_ mirrored: Bool) throws(CaptureError) {
        guard isVideoMirroringSupported else { throw .invalidArgument("mirroring is only supported on video connections") }
        settings.withLock { $0.isMirrored = mirrored }
    }

    // MARK: Stabilization

    public var isVideoStabilizationSupported: Bool {
        mediaType == .video && !input.device.activeFormat.supportedStabilizationModes.filter { $0 != .off }.isEmpty
    }

    /// What the app asks for (default off).
    public var preferredVideoStabilizationMode: VideoStabilizationMode {
        get { settings.withLock { $0.preferredStabilization } }
        set {
            settings.withLock { $0.preferredStabilization = newValue }
            // The stream is the device's: it stabilizes the pixels (`stabilization.mode`).
            if mediaType == .video { input.device.requestStabilization(newValue, by: ObjectIdentifier(self)) }
        }
    }

    /// What is in effect: never `auto`; `auto` picks the best mode the format has (cinematic, then
    /// standard); a mode the active format lacks falls back to off.
    public var activeVideoStabilizationMode: VideoStabilizationMode {
        guard mediaType == .video else { return .off }
        let supported = input.device.activeFormat.supportedStabilizationModes
        switch preferredVideoStabilizationMode {
        case .off: return .off
        case .auto:
            if supported.contains(.cinematicExtended) { return .cinematicExtended }
            if supported.contains(.cinematic) { return .cinematic }
            return supported.contains(.standard) ? .standard : .off
        case let mode: return supported.contains(mode) ? mode : .off
        }
    }
}

/// What a session gives each output it holds: its connections and a way to ask for samples.
public final class OutputAttachment: Sendable {
    private struct State {
        var connections: [CaptureConnection] = []
        var onDemandChange: (@Sendable () -> Void)?
        var pace: CapturePace = .virtual
        var preset: SessionPreset = .high
        var isRunning = false
    }
    private let state = Locked(State())

    public init() {}

    /// The output's connections (empty while it is in no session).
    public var connections: [CaptureConnection] { state.withLock { $0.connections } }

    public var pace: CapturePace { state.withLock { $0.pace } }

    /// True while the owning session runs.
    public var isSessionRunning: Bool { state.withLock { $0.isRunning } }

    /// Outputs call this when `demand` changes so a virtual-time session can advance or wait.
    public func demandChanged() {
        state.withLock { $0.onDemandChange }?()
    }

    func attach(connections: [CaptureConnection], pace: CapturePace, preset: SessionPreset,
                onDemandChange: @escaping @Sendable () -> Void) {
        state.withLock {
            $0.connections = connections
            $0.pace = pace
            $0.preset = preset
            $0.onDemandChange = onDemandChange
        }
    }

    /// The owning session's preset (outputs adapt: iFrame presets record every frame as a keyframe).
    public var sessionPreset: SessionPreset { state.withLock { $0.preset } }

    func setRunning(_ running: Bool) { state.withLock { $0.isRunning = running } }

    func detach() {
        state.withLock {
            $0.connections = []
            $0.onDemandChange = nil
            $0.isRunning = false
        }
    }
}

/// What an output tells a virtual-time session about its appetite.
public enum OutputDemand: Sendable, Hashable {
    /// Nothing to do (e.g. a movie output that is not recording): do not wait for it.
    case idle
    /// Can take a sample now.
    case ready
    /// Still working on earlier samples: wait before producing more.
    case busy
}

/// An output a session can feed (AVCaptureOutput). Implementations must be thread-safe:
/// in real-time pace each input delivers from its own thread.
public protocol CaptureOutput: AnyObject, Sendable {
    /// Set up by the session; holds the output's connections.
    var attachment: OutputAttachment { get }
    /// Which media this output takes.
    func accepts(_ mediaType: MediaType) -> Bool
    /// Whether the output takes samples now. A virtual-time session advances while some output is
    /// `ready` and none is `busy`; `idle` outputs (nothing to do) never hold it back. Call
    /// `attachment.demandChanged()` whenever it may have become `ready` or stopped being `busy`:
    /// a waiting virtual-time session re-checks only then.
    var demand: OutputDemand { get }
    /// One sample from one of the output's connections, on the session's delivery thread. Calling
    /// `stopRunning` here stops the session just after the call returns (not before it returns);
    /// `startRunning` here throws.
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection)
    /// The session stopped (or the output was removed): finish whatever is in progress.
    func sessionDidStop()
    /// The device lost samples just before `sample` (called right before `receive`).
    func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection)
}

extension CaptureOutput {
    public func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection) {}
}

extension CaptureOutput {
    /// The output's first connection carrying `mediaType` (AVCaptureOutput.connection(with:)).
    public func connection(with mediaType: MediaType) -> CaptureConnection? {
        attachment.connections.first { $0.mediaType == mediaType }
    }
}
