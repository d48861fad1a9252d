import ArgumentParser
import CaptureKit
import Foundation

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Write a camera's frames, in real time, to a V4L2 output device (v4l2loopback) as a virtual camera.",
        discussion: """
            Any program that reads the v4l2loopback node then sees the camera — with the simulator's frame-index \
            stamp and sync markers — e.g. `capture record --camera /dev/video10` or `ffmpeg -f v4l2 -i /dev/video10`. \
            Load the module first: modprobe v4l2loopback devices=1 video_nr=10 exclusive_caps=1. \
            Runs until Ctrl-C (or SIGTERM) or --duration.
            """)

    @Option(help: "Camera unique ID (e.g. sim:back, sim:webcam).")
    var camera: String

    @Option(help: "The V4L2 output node to write to (a v4l2loopback device, e.g. /dev/video10).")
    var to: String

    @Option(help: "WxH@FPS[:FOURCC]: the size and rate, and the pixel format written (YUYV, I420/YU12, NV12 or MJPG; default: the camera's). A camera format of that size and rate is chosen (the same pixel format when it has it) and converted.")
    var format: String?

    @Option(name: .customLong("control"), help: "KEY=VALUE, repeatable: a camera control applied under the configuration lock before streaming (see `capture controls DEVICE`).")
    var controls: [String] = []

    @Option(help: "Stop after this many seconds (default: run until interrupted).")
    var duration: Double?

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    func validate() throws {
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
        if let format, FormatRequest(format) == nil {
            throw ValidationError("--format '\(format)' must look like 640x480@30 or 640x480@30:YUYV (pixel formats: YUYV, I420, NV12, MJPG)")
        }
    }

    func run() async throws {
        let registry = CaptureKit.makeRegistry(seed: seed)
        let device: CaptureDevice
        let sink: V4L2LoopbackSink
        do throws(CaptureError) {
            device = try registry.device(uniqueID: camera)
            guard device.hasMediaType(.video) else { throw .invalidArgument("\(camera) is not a camera") }
            let sinkFormat = try configure(device)
            let active = device.activeFormat
            guard let size = active.dimensions else { throw .formatNotSupported("\(camera)'s format \(active.formatDescription) has no size") }
            sink = try V4L2LoopbackSink(path: to, pixelFormat: sinkFormat, dimensions: size, frameDuration: device.activeVideoMinFrameDuration)
        } catch {
            throw CommandFailure(error)
        }

        let session = CaptureSession(pace: .realtime)
        let output = VideoLoopbackOutput(sink: sink)
        let stop = Locked(false)
        let interrupt = SignalHandler(signals: [SIGINT, SIGTERM]) { stop.withLock { $0 = true } }
        defer { interrupt.cancel() }
        let start = HostClock.now()
        do throws(CaptureError) {
            try session.setSessionPreset(.inputPriority)  // keep the format chosen above
            try session.addInput(CaptureDeviceInput(device: device))
            try session.addOutput(output)
            try session.startRunning()
        } catch {
            sink.close()
            throw CommandFailure(error)
        }
        let rate = 1 / device.activeVideoMinFrameDuration.seconds
        printError("capture simulate: writing \(camera) (\(ControlOptions.describe(device.activeFormat)) @ \(String(format: "%g", rate)) fps) to \(to) "
                   + "('\(sink.cardName)') as \(sink.pixelFormat) \(sink.dimensions); "
                   + (duration.map { "stopping after \(String(format: "%g", $0)) s" } ?? "Ctrl-C stops"))
        while !stop.withLock({ $0 }), output.statistics.error == nil, session.isRunning {
            if let duration, (HostClock.now() - start).seconds >= duration { break }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        session.stopRunning()
        sink.close()
        let elapsed = (HostClock.now() - start).seconds
        let stats = output.statistics
        let indices = stats.firstSequenceNumber.map { "frames \($0)–\(stats.lastSequenceNumber ?? $0)" } ?? "no frames"
        print("Wrote \(stats.framesWritten) frames (\(indices)) to \(to) as \(sink.pixelFormat) \(sink.dimensions) "
              + "in \(String(format: "%.2f", elapsed)) s (\(String(format: "%.1f", Double(stats.framesWritten) / max(elapsed, 0.001))) fps)")
        print("  dropped by the camera: \(stats.framesDropped), late writes: \(stats.lateWrites)")
        if let error = stats.error { throw CommandFailure(error) }
    }

    /// `--format` and `--control`s under the configuration lock; returns the pixel format to write.
    /// The camera format is the one of the requested size and rate with the requested pixel format,
    /// else an uncompressed one of that size and rate (converted by the sink).
    private func configure(_ device: CaptureDevice) throws(CaptureError) -> PixelFormat {
        let entries = try ControlOptions.parse(controls)
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        var written: PixelFormat?
        if let format, let request = FormatRequest(format) {
            written = request.fourcc.flatMap(PixelFormat.init(name:))
            let duration = request.frameDuration
            let candidates = device.formats.filter { $0.dimensions == request.dimensions && $0.supports(frameDuration: duration) }
            let choice = candidates.first { written != nil && $0.pixelFormat == written } ?? candidates.first { $0.pixelFormat?.isCompressed == false }
            guard let choice else {
                let available = device.formats.map { "\(ControlOptions.describe($0)) @ \($0.frameRateRanges.map(\.description).joined(separator: ", "))" }
                throw .formatNotSupported("\(device.uniqueID) has no uncompressed format \(request.dimensions) at \(request.frameRate) fps (it has: \(available.joined(separator: "; ")))")
            }
            try device.setActiveFormat(choice)
            try device.setActiveVideoMaxFrameDuration(duration)
            try device.setActiveVideoMinFrameDuration(duration)
        }
        try ControlOptions.applyControls(entries, to: device)
        if let written { return written }
        let camera = device.activeFormat.pixelFormat ?? .yuv420
        return V4L2LoopbackSink.supportedPixelFormats.contains(camera) ? camera : .yuv420
    }
}
