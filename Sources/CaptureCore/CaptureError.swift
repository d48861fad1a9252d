/// Every failure CaptureKit reports. Each case says what went wrong and, in `description`, what to do.
public enum CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    // Devices
    case deviceNotFound(String)
    case deviceDisconnected(String)
    /// The device already streams to another running session.
    case deviceInUse(String)
    case formatNotSupported(String)
    case unsupportedPace(String)
    // Programmer errors (AVFoundation raises; CaptureKit throws so the process survives)
    case invalidArgument(String)
    case invalidState(String)
    // Sessions
    case noInputs
    case sessionNotRunning
    // Files
    case outputDirectoryMissing(path: String)
    case outputFileExists(path: String)
    case fileOperationFailed(path: String, reason: String)
    case alreadyRecording
    /// The recording stopped at a limit; the file is finished and playable (AVErrorRecordingSuccessfullyFinishedKey).
    case recordingLimitReached(RecordingLimit)
    /// The recording was stopped before any sample arrived, so no file was written.
    case noDataRecorded
    // Codecs and containers (libavcodec/libavformat/libturbojpeg report through these)
    case encoderUnavailable(String)
    case codecFailure(operation: String, code: Int32, message: String)
    case streamEnded
    /// Another client (process or file descriptor) holds the device's configuration priority.
    case lockedByAnotherClient(String)
    /// The device refused to start streaming (V4L2 STREAMON, REQBUFS, mmap, ALSA prepare/start).
    case deviceStartFailed(device: String, reason: String)
    /// The process may not open the device node (EACCES/EPERM).
    case deviceAccessDenied(String)

    /// True when the error still leaves a complete, playable file (a limit was reached).
    public var recordingFinishedSuccessfully: Bool {
        if case .recordingLimitReached = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .deviceNotFound(let id):
            return "no capture device '\(id)'; run `capture devices` to list the available ones"
        case .deviceDisconnected(let id):
            return "device '\(id)' was disconnected; choose another device or reconnect it (a reconnected device is a new device)"
        case .deviceInUse(let id):
            return "device '\(id)' is already streaming to another running session; stop that session or use another device"
        case .formatNotSupported(let what):
            return "format not supported: \(what); run `capture devices` to see each device's formats"
        case .unsupportedPace(let what):
            return "pace not supported: \(what)"
        case .invalidArgument(let what):
            return "invalid argument: \(what)"
        case .invalidState(let what):
            return "invalid state: \(what)"
        case .noInputs:
            return "the output has no active connection to an input; add a device input to the session before recording"
        case .sessionNotRunning:
            return "the session is not running; call startRunning() first"
        case .outputDirectoryMissing(let path):
            return "cannot record to \(path): its folder does not exist; create the folder first"
        case .outputFileExists(let path):
            return "cannot record to \(path): a file already exists there; remove it or choose another name"
        case .fileOperationFailed(let path, let reason):
            return "file operation on \(path) failed: \(reason)"
        case .recordingLimitReached(let limit):
            return "the recording stopped at its \(limit.rawValue) limit; the file is complete"
        case .noDataRecorded:
            return "the recording stopped before any sample arrived; no file was written"
        case .alreadyRecording:
            return "this output is already recording; stop the current recording first"
        case .encoderUnavailable(let name):
            return "encoder '\(name)' is not available in this FFmpeg build; install Debian's libavcodec with libx264"
        case .codecFailure(let op, let code, let message):
            return "\(op) failed (\(code)): \(message)"
        case .streamEnded:
            return "the device's stream ended"
        case .lockedByAnotherClient(let id):
            return "device '\(id)' is locked for configuration by another client; wait until it unlocks or stop the other process"
        case .deviceStartFailed(let id, let reason):
            return "device '\(id)' could not start streaming: \(reason)"
        case .deviceAccessDenied(let id):
            return "access to '\(id)' was denied; add the user to the device's group (`video` for cameras, `audio` for microphones) and log in again"
        }
    }
}

/// Why a recording stopped on its own.
public enum RecordingLimit: String, Sendable, Equatable {
    case maximumDuration = "maximum duration"
    case maximumFileSize = "maximum file size"
    case diskFull = "minimum free disk space"
}
