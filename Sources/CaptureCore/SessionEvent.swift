/// Something that happened to a session (AVCaptureSession's notifications).
public enum SessionEvent: Sendable {
    case started
    case stopped
    case runtimeError(CaptureError)
    case interrupted(InterruptionReason)
    case interruptionEnded
    case streamEnded(deviceID: String)
}
