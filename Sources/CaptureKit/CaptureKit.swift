@_exported import CaptureAnalysis
@_exported import CaptureCore
@_exported import CaptureMedia
@_exported import CaptureSimulator

/// Entry points that tie the backends together.
public enum CaptureKit {
    /// A registry with every backend this build has: today the simulator (seeded), with real
    /// V4L2/ALSA devices to follow behind the same driver SPI.
    public static func makeRegistry(seed: UInt64 = 0) -> DeviceRegistry {
        DeviceRegistry(drivers: [SimulatorDriver(seed: seed), LoopbackDriver(speaker: .shared)])
    }
}
