@_exported import CaptureALSA
@_exported import CaptureAnalysis
@_exported import CaptureCore
@_exported import CaptureMedia
@_exported import CaptureSimulator
@_exported import CaptureV4L2

/// Entry points that tie the backends together.
public enum CaptureKit {
    /// A registry with every backend this build has: the simulator (seeded), the simulated
    /// speaker→microphone loopback (`loop:mic`), then real V4L2 cameras (`/dev/video*`) and ALSA
    /// capture PCMs (`hw:CARD,DEV,SUB`). On a machine without devices the real backends discover nothing.
    public static func makeRegistry(seed: UInt64 = 0) -> DeviceRegistry {
        DeviceRegistry(drivers: [SimulatorDriver(seed: seed), LoopbackDriver(speaker: .shared), V4L2Driver(), ALSADriver()])
    }
}
