import Synchronization

/// The link between one input's media and one output (AVCaptureConnection). Sessions create
/// connections automatically between compatible inputs and outputs.
public final class CaptureConnection: Sendable {
    public let input: CaptureDeviceInput
    public let output: any CaptureOutput
    public let mediaType: MediaType
    private let enabled = Mutex(true)

    init(input: CaptureDeviceInput, output: any CaptureOutput) {
        self.input = input
        self.output = output
        self.mediaType = input.mediaType
    }

    /// A disabled connection delivers nothing.
    public var isEnabled: Bool {
        get { enabled.withLock { $0 } }
        set { enabled.withLock { $0 = newValue } }
    }

    /// Active while enabled and its device is connected.
    public var isActive: Bool { isEnabled && input.device.isConnected }

    /// The format samples on this connection arrive in (the device's active format).
    public var formatDescription: FormatDescription { input.device.activeFormat.formatDescription }

    /// The video frame duration in force (invalid for audio).
    public var videoFrameDuration: MediaTime {
        mediaType == .video ? input.device.activeVideoMinFrameDuration : .invalid
    }
}

/// What a session gives each output it holds: its connections and a way to ask for samples.
public final class OutputAttachment: Sendable {
    private struct State {
        var connections: [CaptureConnection] = []
        var onDemandChange: (@Sendable () -> Void)?
        var pace: CapturePace = .virtual
        var isRunning = false
    }
    private let state = Mutex(State())

    public init() {}

    /// The output's connections (empty while it is in no session).
    public var connections: [CaptureConnection] { state.withLock { $0.connections } }

    public var pace: CapturePace { state.withLock { $0.pace } }

    /// True while the owning session runs.
    public var isSessionRunning: Bool { state.withLock { $0.isRunning } }

    /// Outputs call this when `wantsSamples` changes so a virtual-time session can advance or wait.
    public func demandChanged() {
        state.withLock { $0.onDemandChange }?()
    }

    func attach(connections: [CaptureConnection], pace: CapturePace, onDemandChange: @escaping @Sendable () -> Void) {
        state.withLock {
            $0.connections = connections
            $0.pace = pace
            $0.onDemandChange = onDemandChange
        }
    }

    func setRunning(_ running: Bool) { state.withLock { $0.isRunning = running } }

    func detach() {
        state.withLock {
            $0.connections = []
            $0.onDemandChange = nil
            $0.isRunning = false
        }
    }
}

/// An output a session can feed (AVCaptureOutput). Implementations must be thread-safe:
/// in real-time pace each input delivers from its own thread.
public protocol CaptureOutput: AnyObject, Sendable {
    /// Set up by the session; holds the output's connections.
    var attachment: OutputAttachment { get }
    /// Which media this output takes.
    func accepts(_ mediaType: MediaType) -> Bool
    /// Whether the output wants samples now. A virtual-time session advances only while some output does.
    var wantsSamples: Bool { get }
    /// One sample from one of the output's connections. Must not call `stopRunning` synchronously.
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection)
    /// The session stopped (or the output was removed): finish whatever is in progress.
    func sessionDidStop()
}
