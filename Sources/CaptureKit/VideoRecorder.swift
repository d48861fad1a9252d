import CaptureCore
import CaptureMedia
import Foundation

/// Receives a `VideoRecorder`'s outcome (UIImagePickerControllerDelegate's video path). Callbacks
/// arrive on the recorder's delegate queue.
public protocol VideoRecorderDelegate: AnyObject, Sendable {
    /// The movie is finished and plays: where it is, how long, and the recording's summary (its
    /// `stopReason` says why it ended: requested, maximumDuration, …).
    func videoRecorder(_ recorder: VideoRecorder, didFinishRecordingTo url: URL, duration: Double, summary: RecordingSummary)
    /// The user cancelled (`cancel()`): no movie is kept.
    func videoRecorderDidCancel(_ recorder: VideoRecorder)
}

/// The one-call recorder (UIImagePickerController's video path): choose a camera, a quality, a
/// maximum duration and a flash mode, then `record(to:)`. It is sugar over the same parts — it
/// builds a `CaptureSession` with the camera (and the default microphone), sets the session preset
/// the quality maps to, a `MovieFileOutput` with `maxRecordedDuration`, and the camera's torch for
/// the flash mode — not a second pipeline.
public final class VideoRecorder: Sendable {
    /// UIImagePickerController.SourceType: only the camera records.
    public enum SourceType: String, Sendable, CaseIterable { case camera, photoLibrary, savedPhotosAlbum }
    /// UIImagePickerController.CameraDevice.
    public enum CameraDevice: String, Sendable, CaseIterable { case rear, front }
    /// UIImagePickerController.CameraFlashMode, through the camera's torch while recording: `auto`
    /// lights it when the scene is dark (the torch's auto mode).
    public enum CameraFlashMode: String, Sendable, CaseIterable { case off, auto, on }
    /// UIImagePickerController.QualityType and the session preset each maps to.
    public enum Quality: String, Sendable, CaseIterable {
        case high, medium, low
        case vga640x480 = "640x480"
        case iFrame1280x720, iFrame960x540

        public var sessionPreset: SessionPreset {
            switch self {
            case .high: return .high
            case .medium: return .medium
            case .low: return .low
            case .vga640x480: return .vga640x480
            case .iFrame1280x720: return .iFrame1280x720
            case .iFrame960x540: return .iFrame960x540
            }
        }
    }

    /// kUTTypeMovie: what `availableMediaTypes` lists when the camera can record video.
    public static let movieMediaType = "public.movie"

    public let registry: DeviceRegistry
    public let pace: CapturePace
    private struct State {
        var cameraDevice = CameraDevice.rear
        var videoQuality = Quality.medium
        var videoMaximumDuration: Double = 600
        var cameraFlashMode = CameraFlashMode.auto
        var capturesAudio = true
        var encoderPreset = VideoEncoderSettings.Preset.veryfast
        var delegate: (any VideoRecorderDelegate)?
        var movie: MovieFileOutput?
        var cancelled = false
    }
    private let state = Locked(State())
    private let delegateQueue = DispatchQueue(label: "CaptureKit.VideoRecorder.delegate")

    /// A recorder over `registry`'s devices; `pace` virtual runs the simulator deterministically.
    public init(registry: DeviceRegistry, pace: CapturePace = .realtime) {
        self.registry = registry
        self.pace = pace
    }

    // MARK: What is available

    /// True when `source` can record here: the camera source, with at least one camera.
    public func isSourceTypeAvailable(_ source: SourceType) -> Bool {
        source == .camera && !((try? registry.devices(mediaType: .video)) ?? []).isEmpty
    }

    /// `[movieMediaType]` for an available camera source, else empty.
    public func availableMediaTypes(for source: SourceType) -> [String] {
        isSourceTypeAvailable(source) ? [Self.movieMediaType] : []
    }

    /// True when a camera faces that way (rear: a back camera, or an external one when there is no
    /// built-in back camera).
    public func isCameraDeviceAvailable(_ camera: CameraDevice) -> Bool { device(for: camera) != nil }

    private func device(for camera: CameraDevice) -> CaptureDevice? {
        let cameras = (try? registry.devices(mediaType: .video)) ?? []
        switch camera {
        case .front: return cameras.first { $0.position == .front }
        case .rear: return cameras.first { $0.position == .back } ?? cameras.first { $0.position == .external }
        }
    }

    // MARK: Settings

    /// Rear by default. Choosing a camera that is not there throws (`deviceNotFound`).
    public var cameraDevice: CameraDevice { state.withLock { $0.cameraDevice } }

    public func setCameraDevice(_ camera: CameraDevice) throws(CaptureError) {
        guard isCameraDeviceAvailable(camera) else {
            throw .deviceNotFound("no \(camera.rawValue) camera here; check isCameraDeviceAvailable(.\(camera.rawValue)) first")
        }
        state.withLock { $0.cameraDevice = camera }
    }

    /// Medium by default, as UIKit.
    public var videoQuality: Quality {
        get { state.withLock { $0.videoQuality } }
        set { state.withLock { $0.videoQuality = newValue } }
    }

    /// Seconds; 600 (ten minutes) by default, as UIKit. Reaching it ends the movie with stop reason
    /// maximumDuration (the movie is kept).
    public var videoMaximumDuration: Double {
        get { state.withLock { $0.videoMaximumDuration } }
        set { state.withLock { $0.videoMaximumDuration = newValue } }
    }

    /// Auto by default, as UIKit.
    public var cameraFlashMode: CameraFlashMode {
        get { state.withLock { $0.cameraFlashMode } }
        set { state.withLock { $0.cameraFlashMode = newValue } }
    }

    /// Records the default microphone too (true by default).
    public var capturesAudio: Bool {
        get { state.withLock { $0.capturesAudio } }
        set { state.withLock { $0.capturesAudio = newValue } }
    }

    /// The H.264 encoder's speed preset (veryfast by default).
    public var encoderPreset: VideoEncoderSettings.Preset {
        get { state.withLock { $0.encoderPreset } }
        set { state.withLock { $0.encoderPreset = newValue } }
    }

    public var delegate: (any VideoRecorderDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    // MARK: Recording

    /// True from `record(to:)`'s start until its movie is finished.
    public var isRecording: Bool { state.withLock { $0.movie?.isRecording ?? false } }

    /// Records a movie to `path` until `stopVideoCapture()`, `cancel()` or `videoMaximumDuration`,
    /// then tells the delegate and returns the summary. Throws what went wrong (no camera, a preset
    /// the camera lacks, a file that exists…), `recordingCancelled` after `cancel()`.
    public func record(to path: String) async throws(CaptureError) -> RecordingSummary {
        let (camera, quality, maximum, flash, audio, preset) = state.withLock { s in
            s.cancelled = false
            return (s.cameraDevice, s.videoQuality, s.videoMaximumDuration, s.cameraFlashMode, s.capturesAudio, s.encoderPreset)
        }
        guard let device = device(for: camera) else {
            throw .deviceNotFound("no \(camera.rawValue) camera here; check isCameraDeviceAvailable(.\(camera.rawValue)) first")
        }
        guard maximum > 0, maximum.isFinite else {
            throw .invalidArgument("videoMaximumDuration must be a positive number of seconds, not \(maximum)")
        }
        let session = CaptureSession(pace: pace)
        try session.addInput(CaptureDeviceInput(device: device))
        if audio, let microphone = registry.defaultDevice(for: .audio) {
            try session.addInput(CaptureDeviceInput(device: microphone))
        }
        guard session.canSetSessionPreset(quality.sessionPreset) else {
            throw .formatNotSupported("\(device.uniqueID) has no format for video quality \(quality.rawValue) (session preset \(quality.sessionPreset.rawValue))")
        }
        try session.setSessionPreset(quality.sessionPreset)
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = preset
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(seconds: maximum, preferredTimescale: 1_000_000)
        try session.addOutput(movie)
        try setTorch(flash, on: device)
        state.withLock { $0.movie = movie }
        defer {
            state.withLock { $0.movie = nil }
            session.stopRunning()
            try? setTorch(.off, on: device)
        }
        try session.startRunning()
        let result: Result<RecordingSummary, CaptureError>
        do {
            result = .success(try await movie.record(to: path))
        } catch {
            result = .failure(error)
        }
        let delegate = state.withLock { $0.delegate }
        if state.withLock({ $0.cancelled }) {
            // Only the file this recording made: a start refused because the path was taken removes nothing.
            if case .failure(.outputFileExists) = result {} else { OutputPath.removeRegularFile(path) }
            if let delegate { delegateQueue.async { delegate.videoRecorderDidCancel(self) } }
            throw .recordingCancelled
        }
        let summary = try result.get()
        if let delegate {
            delegateQueue.async {
                delegate.videoRecorder(self, didFinishRecordingTo: URL(fileURLWithPath: path), duration: summary.duration, summary: summary)
            }
        }
        return summary
    }

    /// Ends the recording (UIImagePickerController.stopVideoCapture): the movie is kept.
    public func stopVideoCapture() {
        state.withLock { $0.movie }?.stopRecording()
    }

    /// Cancels (the user dismissed the picker): the recording stops, its file is removed, the
    /// delegate hears `videoRecorderDidCancel`.
    public func cancel() {
        let movie = state.withLock { s -> MovieFileOutput? in
            s.cancelled = true
            return s.movie
        }
        if let movie {
            movie.stopRecording()
        } else if let delegate = state.withLock({ $0.delegate }) {
            delegateQueue.async { delegate.videoRecorderDidCancel(self) }
        }
    }

    /// The flash mode through the torch, under the configuration lock. A camera with no torch
    /// records without flash (as UIKit ignores the flash mode of a camera that has none).
    private func setTorch(_ flash: CameraFlashMode, on device: CaptureDevice) throws(CaptureError) {
        guard device.hasTorch else { return }
        let mode: TorchMode = flash == .on ? .on : flash == .auto ? .auto : .off
        guard device.isTorchModeSupported(mode) else { return }
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        try device.setTorchMode(mode)
    }
}
