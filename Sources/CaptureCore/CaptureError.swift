import Foundation

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
    /// Overwriting was asked, but the thing at the path is not a regular file (`kind`: a directory,
    /// a symbolic link, a FIFO, a device node, a socket): it is never replaced or removed.
    case outputNotReplaceable(path: String, kind: String)
    case fileOperationFailed(path: String, reason: String)
    /// The file's volume is full (ENOSPC, EDQUOT): writing stopped. `bytesKept` is what is left in
    /// the file; `secondsKept` how much of it plays (a fragmented movie keeps its complete fragments;
    /// 0 when nothing plays, e.g. an unfragmented movie, whose index was never written).
    case diskFull(path: String, bytesKept: Int64 = 0, secondsKept: Double = 0)
    /// The operating system refused a write (EIO, EROFS, EFBIG, …): `errno` says why; what is kept
    /// is as for `diskFull`.
    case writeFailed(path: String, errno: Int32, bytesKept: Int64 = 0, secondsKept: Double = 0)
    case alreadyRecording
    /// The recording stopped at a limit; the file is finished and playable (AVErrorRecordingSuccessfullyFinishedKey).
    case recordingLimitReached(RecordingLimit)
    /// The recording was stopped before any sample arrived, so no file was written.
    case noDataRecorded
    // Codecs and containers (libavcodec/libavformat/libturbojpeg report through these)
    case encoderUnavailable(String)
    case codecFailure(operation: String, code: Int32, message: String)
    case streamEnded
    /// Compressed frames cannot be copied into this file as they are (raw frames, MP4, a format change).
    case passthroughUnavailable(String)
    /// A compressed frame is damaged (e.g. no JPEG start or end marker); it was not written.
    case invalidCompressedFrame(String)
    // Device model (configuration lock, controls, authorization, profiles)
    /// Runtime error: another client holds the device's configuration lock (in this process or another).
    case lockedByAnotherClient(device: String, holder: String)
    /// Programmer error: a control, format or frame duration was changed without the configuration lock.
    case notLockedForConfiguration(device: String, operation: String)
    /// Programmer error: a value outside the allowed range.
    case valueOutOfRange(control: String, value: String, allowed: String)
    /// Programmer error: the device does not support this control, mode or value.
    case controlNotSupported(device: String, control: String, detail: String)
    /// A control key nobody knows.
    case unknownControl(key: String, known: String)
    /// Capture was attempted without the user's permission for this media type.
    case notAuthorized(mediaType: String, status: String)
    /// Runtime error: the torch cannot give this level now (thermal limit).
    case torchLevelUnavailable(requested: Double, available: Double)
    /// A device profile file is malformed.
    case invalidProfile(file: String, field: String, problem: String)
    /// A scenario file (`capture test`) is malformed: `field` is the JSON path (e.g. `faults[2].at`).
    case invalidScenario(file: String, field: String, problem: String)
    /// The device refused to start streaming (V4L2 STREAMON, REQBUFS, mmap, ALSA prepare/start).
    case deviceStartFailed(device: String, reason: String)
    /// The process may not open the device node (EACCES/EPERM).
    case deviceAccessDenied(String)
    /// A recorded fixture cannot be read: truncated, corrupted or not a fixture (the problem says which).
    case invalidFixture(path: String, problem: String)
    /// A fixture written in a format version this build does not read.
    case unsupportedFixtureVersion(path: String, version: String, supported: Int)
    /// A video output node (a v4l2loopback device) cannot take frames; `problem` says why.
    case videoOutputFailed(path: String, problem: VideoOutputProblem)
    /// Virtual pace: every buffer of the device's pool stayed out for `seconds` of wall time, so
    /// virtual time could not advance (a consumer keeps frames and never lets one go). The
    /// simulator waits this long (`SimulatorScenario.bufferStarvationTimeout`, default 10 s)
    /// instead of dropping a frame, so slow consumers never change what is captured.
    case buffersNotReturned(device: String, buffers: Int, seconds: Double)
    /// The audio session's category does not allow this (recording under a playback-only
    /// category, playing under `record`).
    case audioCategoryRefuses(category: String, operation: String, allowedBy: String)
    /// The audio session has no such input port or data source, or the port cannot do that.
    case audioRouteUnavailable(String)
    /// An audio playback device failed for good (unplugged, refused its format, write error).
    case audioPlaybackFailed(device: String, reason: String)
    /// A movie recording ended because its camera's format (size or pixel format) changed while it
    /// ran (AVErrorSessionConfigurationChanged); the file is finished and plays up to the last frame
    /// of the old format.
    case sessionConfigurationChanged(device: String, from: String, to: String)
    /// `VideoRecorder.cancel()` ended the recording; its file was removed.
    case recordingCancelled
    /// A metadata output was asked for an object type its detectors cannot find now (or before it
    /// is attached to a session with a video input, when nothing is available).
    case metadataObjectTypeNotAvailable(type: String, available: [String])
    /// A detector (ZBar, OpenCV) could not be set up or failed; `reason` says why.
    case detectorUnavailable(detector: String, reason: String)
    /// Event `event` (0-based) of a simulator fault timeline cannot happen as written: `problem`
    /// says what is wrong, `allowed` what would be accepted.
    case invalidFaultEvent(event: Int, problem: String, allowed: String)

    /// A failed write on `path` as the typed error for its errno: ENOSPC and EDQUOT are `diskFull`,
    /// everything else `writeFailed`.
    public static func writeError(path: String, errno code: Int32, bytesKept: Int64 = 0, secondsKept: Double = 0) -> CaptureError {
        code == ENOSPC || code == EDQUOT
            ? .diskFull(path: path, bytesKept: bytesKept, secondsKept: secondsKept)
            : .writeFailed(path: path, errno: code, bytesKept: bytesKept, secondsKept: secondsKept)
    }

    /// True for `diskFull` and `writeFailed`: the operating system refused to store the data.
    public var isWriteFailure: Bool {
        switch self {
        case .diskFull, .writeFailed: return true
        default: return false
        }
    }

    /// True when the error still leaves a complete, playable file (a limit was reached).
    public var recordingFinishedSuccessfully: Bool {
        switch self {
        case .recordingLimitReached, .sessionConfigurationChanged: return true
        default: return false
        }
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
            return "cannot write \(path): something already exists there and is not replaced unless overwriting was asked; remove it or choose another name"
        case .outputNotReplaceable(let path, let kind):
            return "cannot write \(path): it is \(kind), not a regular file, so it is never replaced (even when overwriting is asked); choose another name"
        case .fileOperationFailed(let path, let reason):
            return "file operation on \(path) failed: \(reason)"
        case .diskFull(let path, let bytes, let seconds):
            return "the disk holding \(path) is full (no space left on device): writing stopped; "
                + Self.keptText(bytes: bytes, seconds: seconds)
                + "; free space on that disk or record to another one (set minFreeDiskSpaceLimit to stop before a disk is full)"
        case .writeFailed(let path, let code, let bytes, let seconds):
            let advice = code == EROFS ? "the filesystem became read-only; remount it read-write or record elsewhere"
                : code == EIO ? "the device reported an I/O error; check the disk (dmesg) and record elsewhere"
                : code == EFBIG ? "the file reached the largest size this filesystem or the process's file-size limit (ulimit -f) allows; record shorter files (maxRecordedFileSize) or raise the limit"
                : "check the disk and the path, or record elsewhere"
            return "writing \(path) failed: \(String(cString: strerror(code))) (errno \(code)); "
                + Self.keptText(bytes: bytes, seconds: seconds) + "; " + advice
        case .recordingLimitReached(let limit):
            return "the recording stopped at its \(limit.rawValue) limit; the file is complete"
        case .noDataRecorded:
            return "nothing was captured: no sample arrived before the stop, or the limits let none in (e.g. a duration shorter than one frame); no file was kept"
        case .alreadyRecording:
            return "this output is already recording; stop the current recording first"
        case .encoderUnavailable(let name):
            return "encoder '\(name)' is not available in this FFmpeg build; install Debian's libavcodec with libx264"
        case .codecFailure(let op, let code, let message):
            return "\(op) failed (\(code)): \(message)"
        case .streamEnded:
            return "the device's stream ended"
        case .passthroughUnavailable(let why):
            return "video pass-through (copy) is not possible: \(why)"
        case .invalidCompressedFrame(let problem):
            return "a damaged compressed frame was not written: \(problem)"
        case .lockedByAnotherClient(let device, let holder):
            return "device '\(device)' is locked for configuration by another client (\(holder)); wait until it unlocks or use another device"
        case .notLockedForConfiguration(let device, let operation):
            return "\(operation) on '\(device)' needs the configuration lock; call lockForConfiguration() first"
        case .valueOutOfRange(let control, let value, let allowed):
            return "\(control) = \(value) is out of range; allowed: \(allowed)"
        case .controlNotSupported(let device, let control, let detail):
            return "'\(device)' does not support \(control): \(detail); run `capture controls \(device)` to see what it supports"
        case .unknownControl(let key, let known):
            return "unknown control '\(key)'; known controls: \(known)"
        case .notAuthorized(let mediaType, let status):
            return "capturing \(mediaType) is not authorized (status: \(status)); call requestAccess(for: .\(mediaType)) and capture only once it is granted"
        case .torchLevelUnavailable(let requested, let available):
            return "torch level \(requested) is above the level available now (\(available), limited by the device's thermal state); use a lower level or wait"
        case .invalidProfile(let file, let field, let problem):
            return "device profile \(file): field '\(field)': \(problem)"
        case .invalidScenario(let file, let field, let problem):
            return "scenario \(file): field '\(field)': \(problem); see Simulator/Scenarios/README.md for the format"
        case .invalidFaultEvent(let event, let problem, let allowed):
            return "fault timeline event \(event): \(problem); allowed: \(allowed)"
        case .deviceStartFailed(let id, let reason):
            return "device '\(id)' could not start streaming: \(reason)"
        case .deviceAccessDenied(let id):
            return "access to '\(id)' was denied; add the user to the device's group (`video` for cameras, `audio` for microphones) and log in again"
        case .invalidFixture(let path, let problem):
            return "fixture \(path) is unusable: \(problem); record it again with `capture fixture record`"
        case .unsupportedFixtureVersion(let path, let version, let supported):
            return "fixture \(path) has format version \(version), but this build reads versions up to \(supported); record it again with this build"
        case .videoOutputFailed(let path, let problem):
            return "cannot write video to \(path): \(problem)"
        case .buffersNotReturned(let device, let buffers, let seconds):
            return "'\(device)' has had all \(buffers) of its buffers held for \(seconds) s, so virtual time cannot advance; a consumer keeps sample buffers: release them when done (copy the pixels to keep them)"
        case .audioCategoryRefuses(let category, let operation, let allowedBy):
            return "the audio session's category \(category) does not allow \(operation): set the category to one that does (\(allowedBy)) before starting"
        case .audioRouteUnavailable(let what):
            return "audio route unavailable: \(what); pick one of AudioSession.availableInputs (and its dataSources)"
        case .audioPlaybackFailed(let device, let reason):
            return "audio playback on '\(device)' failed: \(reason)"
        case .sessionConfigurationChanged(let device, let from, let to):
            return "the recording stopped because '\(device)' changed format while recording (\(from) → \(to)); the file is complete up to the last \(from) frame; start a new recording to record the new format"
        case .recordingCancelled:
            return "the recording was cancelled and its file removed; record again to keep a movie"
        case .metadataObjectTypeNotAvailable(let type, let available):
            if available.isEmpty {
                return "metadata object type '\(type)' is not available: nothing is until the output is in a session with a video input (add the output first, then set metadataObjectTypes)"
            }
            return "metadata object type '\(type)' is not available (available: \(available.joined(separator: ", "))); pick from availableMetadataObjectTypes"
        case .detectorUnavailable(let detector, let reason):
            return "the \(detector) detector is unavailable: \(reason); install its Debian package (ci/setup lists them)"
        }
    }
}

extension CaptureError {
    static func keptText(bytes: Int64, seconds: Double) -> String {
        if seconds > 0 {
            return "kept \(String(format: "%.3f", seconds)) s in \(bytes) bytes (whole fragments or samples only), which play to their last frame"
        }
        if bytes > 0 {
            return "the \(bytes) bytes left in the file do not play (an unfragmented movie is indexed only when it ends: record with fragments, e.g. movieFragmentInterval or --fragment-interval 1)"
        }
        return "nothing was kept"
    }
}

/// Why a recording stopped on its own.
public enum RecordingLimit: String, Sendable, Equatable {
    case maximumDuration = "maximum duration"
    case maximumFileSize = "maximum file size"
    case diskFull = "minimum free disk space"
}
