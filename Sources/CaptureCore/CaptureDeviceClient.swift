import Foundation

/// Who holds a device's configuration lock.
///
/// AVFoundation's "client" is an app; inside one process CaptureKit makes it explicit: a client is
/// an object identity. Code that does not care uses `CaptureDeviceClient.shared` (the default of
/// every lock call), so a whole process behaves as one client, like an app. Code that wants two
/// independent parties in one process (two sessions driven by unrelated components, tests) gives
/// each its own client; then `lockForConfiguration(client:)` from one while the other holds the
/// lock throws `lockedByAnotherClient`. Other processes are kept out by the driver
/// (`acquireConfigurationPriority`, V4L2's S_PRIORITY).
public final class CaptureDeviceClient: Sendable, CustomStringConvertible {
    public let name: String
    public init(name: String) { self.name = name }
    /// The process's default client.
    public static let shared = CaptureDeviceClient(name: "this process")
    public var description: String { name }
}
