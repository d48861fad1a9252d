@_exported import CaptureALSA
@_exported import CaptureAnalysis
@_exported import CaptureCore
@_exported import CaptureMedia
@_exported import CaptureSimulator
@_exported import CaptureV4L2

/// Entry points that tie the backends together.
public enum CaptureKit {
    /// This release's version (`capture --version`, the Debian package's version): the `VERSION`
    /// file's, which is the one source (`VersionTests` keeps the two equal).
    public static let version = "0.9.0"

    /// A registry with every backend this build has: the simulator (seeded), the simulated
    /// speaker→microphone loopback (`loop:mic`), then real V4L2 cameras (`/dev/video*`) and ALSA
    /// capture PCMs (`hw:CARD,DEV,SUB`), and recorded fixtures (`fixture:PATH`). On a machine without
    /// devices the real backends discover nothing. The simulator compresses its MJPEG formats with
    /// libturbojpeg; `scenario` scripts its permissions, hot-plug and faults.
    public static func makeRegistry(seed: UInt64 = 0, scenario: SimulatorScenario = SimulatorScenario()) -> DeviceRegistry {
        DeviceRegistry(drivers: [SimulatorDriver(seed: seed, scenario: scenario, compressor: JPEGFrameCompressor()),
                                 LoopbackDriver(speaker: .shared), V4L2Driver(), ALSADriver(), FixtureDriver()])
    }
}

extension CaptureKit {
    /// The process-wide registry behind `AudioSession.shared` (made on first use).
    public static let sharedRegistry: DeviceRegistry = makeRegistry()
}

extension AudioSession {
    /// The process-wide audio session (AVAudioSession.sharedInstance()), over `CaptureKit.sharedRegistry`.
    public static let shared = AudioSession(registry: CaptureKit.sharedRegistry)
}
