/// Why a video output node — a v4l2loopback device that other programs read as a camera — cannot
/// take frames (`CaptureError.videoOutputFailed`). Each description says what to do.
public enum VideoOutputProblem: Sendable, Hashable, CustomStringConvertible {
    /// No such node.
    case notFound
    /// The node exists but this user may not open it.
    case accessDenied
    /// The node is not a video output (e.g. a camera's capture node); `what` says what it is.
    case notAVideoOutput(what: String)
    /// Another program is writing to the node (v4l2loopback with exclusive_caps has one writer).
    case busy(detail: String)
    /// The driver answered the format request with another format.
    case formatRefused(requested: String, granted: String)
    /// The node went away while frames were being written.
    case disconnected
    /// write() failed or took fewer bytes than one frame.
    case writeFailed(String)

    public var description: String {
        switch self {
        case .notFound:
            return "no such device node; load v4l2loopback (`modprobe v4l2loopback devices=1 video_nr=10 exclusive_caps=1`) and pass its node, e.g. /dev/video10"
        case .accessDenied:
            return "permission denied; add the user to the `video` group (or run as root) and log in again"
        case .notAVideoOutput(let what):
            return "it is not a video output node (\(what)); pass a v4l2loopback node (`v4l2-ctl --list-devices` shows them)"
        case .busy(let detail):
            return "the node is busy: \(detail); stop the other writer first"
        case .formatRefused(let requested, let granted):
            return "the driver refused \(requested) and offered \(granted); v4l2loopback keeps the format of a running stream until every reader and writer has closed it — close them or ask for that format"
        case .disconnected:
            return "the node went away (module unloaded or device removed); reload v4l2loopback and start again"
        case .writeFailed(let reason):
            return "writing a frame failed: \(reason)"
        }
    }
}
