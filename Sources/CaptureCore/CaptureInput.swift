/// A device feeding a session (AVCaptureDeviceInput).
public final class CaptureDeviceInput: Sendable, Hashable {
    public let device: CaptureDevice

    /// Fails when the device is gone, as AVCaptureDeviceInput(device:) does.
    public init(device: CaptureDevice) throws(CaptureError) {
        guard device.isConnected else { throw .deviceDisconnected(device.uniqueID) }
        self.device = device
    }

    public var mediaType: MediaType { device.mediaType }

    public static func == (lhs: CaptureDeviceInput, rhs: CaptureDeviceInput) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
