import CaptureKit
import Foundation

/// Fixed pieces of work for the instruction-count gate (`ci/bench --instructions`): each runs the
/// same code on the same input every time, so callgrind counts the same instructions whatever
/// else the machine is doing; a change that makes one do more work shows as a higher count.
enum Workload: String, CaseIterable {
    /// The renderer, per frame: 30 frames of 640x480 NV12, every background redrawn.
    case render
    /// The camera model's pixel effects (white balance, blur radius 3, noise) and the control
    /// statistics (metering for auto exposure, focus and gray-world white balance), 10 frames.
    case effects
    /// The MJPEG copy path: 2 s of sim:webcam's MJPEG copied into a MOV, virtual time.
    case mjpeg
    /// The whole pipeline: 2 s of sim:back 640x480 + sim:mic → H.264 ultrafast + AAC MP4, virtual time.
    case pipeline
    /// Nothing: the process's start and exit alone (the Swift runtime, the libraries' loading and
    /// constructors), what every other workload's count includes once.
    case start
    /// The encoder floor's input for that pipeline: its 60 frames captured into memory (a session
    /// with a video data output) and its tone, nothing encoded.
    case floorFrames = "floor-frames"
    /// The same, then encoded and muxed as the pipeline's file (`EncoderFloor.encode`, ultrafast):
    /// `floor` − `floor-frames` is the encoding alone, what `pipeline` − `start` is read against.
    case floor

    /// What the pipeline workloads (`pipeline`, `floor-frames`, `floor`) record: the gate's is fixed
    /// (640x480, 2 s, ultrafast); ci/bench's instruction rows of target 1 run them at the timed rows' settings.
    struct Settings {
        var size = Dimensions(width: 640, height: 480)
        var seconds = 2
        var preset = VideoEncoderSettings.Preset.ultrafast
    }

    func run(in folder: String, settings: Settings = Settings()) throws {
        let size = Dimensions(width: 640, height: 480)
        let frames = settings.seconds * 30
        switch self {
        case .render:
            _ = try generationTime(size, .nv12, .uncached, frames: 30)
        case .effects:
            let renderer = try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: size, frameDuration: frameDuration, seed: 2)
            let buffer = PixelBuffer(format: .nv12, width: size.width, height: size.height)
            let metering = MeteringRequest(exposureRegion: PixelRect(x0: 160, y0: 120, x1: 480, y1: 360),
                                           focusRegion: PixelRect(x0: 240, y0: 180, x1: 400, y1: 300), grayWorld: true)
            for n in 0..<10 { _ = renderer.render(frame: Int64(n), effects: benchEffects, syncFlash: false, metering: metering, into: buffer) }
        case .mjpeg:
            try record(camera: "sim:webcam", size: size, pixelFormat: .mjpeg, audio: false, to: folder + "/mjpeg.mov")
        case .pipeline:
            try record(camera: "sim:back", size: settings.size, pixelFormat: .nv12, audio: true, to: folder + "/pipeline.mp4", settings: settings)
        case .start:
            break
        case .floorFrames:
            _ = try EncoderFloor(size: settings.size, frameCount: frames)
        case .floor:
            try EncoderFloor(size: settings.size, frameCount: frames).encode(to: folder + "/floor.mp4", preset: settings.preset)
        }
    }

    private func record(camera id: String, size: Dimensions, pixelFormat: PixelFormat, audio: Bool, to path: String,
                        settings: Settings = Settings()) throws {
        let registry = CaptureKit.makeRegistry(seed: 1)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: id)
        try session.addInput(CaptureDeviceInput(device: camera))
        if audio { try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic"))) }
        guard let format = camera.format(matching: size, frameRate: 30, pixelFormat: pixelFormat) else {
            fail("\(id) has no \(size) \(pixelFormat) format")
        }
        try camera.lockForConfiguration()
        try camera.setActiveFormat(format)
        camera.unlockForConfiguration()
        let movie = MovieFileOutput()
        movie.settings.preset = settings.preset
        movie.maxRecordedDuration = MediaTime(value: Int64(settings.seconds), timescale: 1)
        try session.addOutput(movie)
        try session.startRunning()
        let signal = FinishSignal()
        movie.startRecording(to: path, recordingDelegate: signal)
        signal.done.wait()
        session.stopRunning()
    }
}
