import CaptureKit
import Foundation
import Testing

extension DeviceEnvironment {
    /// The v4l2loopback node ci/vm/prepare loads (card label CaptureKitLoopback), if any.
    static var loopbackNode: String? {
        let base = "/sys/class/video4linux"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base))?.sorted() ?? [] {
            let label = (try? String(contentsOfFile: "\(base)/\(name)/name", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            if label == "CaptureKitLoopback" { return "/dev/\(name)" }
        }
        return nil
    }

    static var loopbackAvailable: Bool { inVM || loopbackNode != nil }
    static let loopbackSkipReason: Comment = "needs the v4l2loopback node CaptureKitLoopback (a kernel module this machine lacks); runs inside ci/vm-run"

    static func requireLoopback() throws -> String {
        guard let node = loopbackNode else { throw Failure(description: "no v4l2loopback node named CaptureKitLoopback (is the module loaded with card_label=CaptureKitLoopback?)") }
        return node
    }

    /// Waits until a writer has made `node` a capture node (exclusive_caps), at most 60 s (a
    /// debug-built writer on a loaded host's emulated vCPU took more than 20 s to start).
    static func waitForCapture(_ node: String) throws {
        try eventuallyBlocking("\(node) to offer capture (frames from the writer)", within: .seconds(60)) {
            (try? V4L2Driver().discoverDevices())?.contains(where: { $0.uniqueID == node }) == true
        }
    }

    /// The frame-index stamps of raw 8-bit grey frames (ffmpeg's `-pix_fmt gray` output).
    static func stamps(ofGreyFrames data: Data, width: Int, height: Int) -> [Int?] {
        let frameBytes = width * height
        return stride(from: 0, to: data.count - frameBytes + 1, by: frameBytes).map { offset in
            data.withUnsafeBytes { raw in
                let plane = LumaPlane(base: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + frameBytes]),
                                      width: width, height: height, bytesPerRow: width)
                return FrameStampReader.frameIndex(in: plane).map { Int($0) }
            }
        }
    }

    /// Decodes a recording and runs the marker analysis over every frame.
    static func analyze(_ path: String) throws -> RecordingReport {
        try analyzeWithFrameTimes(path).report
    }

    /// The marker analysis and every decoded frame's presentation time in the file.
    static func analyzeWithFrameTimes(_ path: String) throws -> (report: RecordingReport, frameTimes: [Double]) {
        var analyzer = RecordingAnalyzer()
        var times: [Double] = []
        try MediaFileReader(path: path).decode(video: { frame in
            analyzer.addVideoFrame(LumaPlane(base: frame.luma, width: frame.width, height: frame.height, bytesPerRow: frame.bytesPerRow[0]),
                                   presentationTime: frame.presentationTime)
            times.append(frame.presentationTime)
        }, audio: nil)
        return (analyzer.report(), times)
    }

    /// True when `indices` are all readable and each is one more than the one before.
    static func consecutive(_ indices: [Int?]) -> Bool {
        let read = indices.compactMap { $0 }
        return read.count == indices.count && zip(read, read.dropFirst()).allSatisfy { $1 == $0 + 1 }
    }
}

/// The simulator as a virtual camera through a real kernel path: CaptureKit writes simulated frames
/// to v4l2loopback and real V4L2 clients — CaptureKit's own backend, ffmpeg — read them back with
/// their frame-index stamps intact. Serialized: one node, one writer at a time; the round trip
/// through CaptureKit's own reader goes last (its reader may close the node a moment after the test).
@Suite(.serialized, .enabled(if: DeviceEnvironment.loopbackAvailable, DeviceEnvironment.loopbackSkipReason), .timeLimit(.minutes(3)))
struct LoopbackTests {
    /// Modest frames and rate: under TCG on a busy host the simulator, the reader and x264 share one
    /// slow vCPU. When the writer falls behind, frames arrive late but must still all arrive.
    static let size = Dimensions(width: 640, height: 480)
    static let rate: Int32 = 15

    /// A simulator session writing `sim:back` (I420 at `size`, `rate` fps, real time) to the loopback.
    final class Writer: Sendable {
        let session: CaptureSession
        let output: VideoLoopbackOutput
        init(node: String, pixelFormat: PixelFormat) throws {
            let registry = CaptureKit.makeRegistry()
            let camera = try registry.device(uniqueID: "sim:back")
            let duration = MediaTime(value: 1, timescale: LoopbackTests.rate)
            guard let format = camera.format(matching: LoopbackTests.size, frameRate: Int(LoopbackTests.rate), pixelFormat: .yuv420) else {
                throw DeviceEnvironment.Failure(description: "sim:back has no I420 \(LoopbackTests.size) at \(LoopbackTests.rate) fps")
            }
            try camera.lockForConfiguration()
            try camera.setActiveFormat(format)
            try camera.setActiveVideoMinFrameDuration(duration)
            try camera.setActiveVideoMaxFrameDuration(duration)
            camera.unlockForConfiguration()
            // A reader of the previous test may close the node a moment late (the format stays until
            // every opener is gone): retry for a few seconds before calling it refused.
            var attempt = 0
            var opened: V4L2LoopbackSink?
            while opened == nil {
                do throws(CaptureError) {
                    opened = try V4L2LoopbackSink(path: node, pixelFormat: pixelFormat, dimensions: LoopbackTests.size, frameDuration: duration)
                } catch {
                    attempt += 1
                    guard attempt < 50, case .videoOutputFailed(_, let problem) = error else { throw error }
                    switch problem {
                    case .busy, .formatRefused: usleep(100_000)
                    default: throw error
                    }
                }
            }
            let sink = opened!
            output = VideoLoopbackOutput(sink: sink)
            session = CaptureSession(pace: .realtime)
            try session.setSessionPreset(.inputPriority)
            try session.addInput(CaptureDeviceInput(device: camera))
            try session.addOutput(output)
            try session.startRunning()
        }
        func stop() {
            session.stopRunning()
            output.sink.close()
        }
    }

    @Test func ffmpegReadsStampedMJPEGFramesFromTheLoopback() throws {
        let node = try DeviceEnvironment.requireLoopback()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let writer = try Writer(node: node, pixelFormat: .mjpeg)
        defer { writer.stop() }
        try DeviceEnvironment.waitForCapture(node)
        let out = dir + "/frames.gray"
        let r = try DeviceEnvironment.run("timeout", ["-k", "5", "40", "ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "v4l2", "-input_format", "mjpeg",
                                                     "-i", node, "-frames:v", "20", "-fps_mode", "passthrough",
                                                     "-f", "rawvideo", "-pix_fmt", "gray", out])
        #expect(r.status == 0, "\(r.stderr)")
        let stamps = DeviceEnvironment.stamps(ofGreyFrames: try Data(contentsOf: URL(fileURLWithPath: out)), width: Self.size.width, height: Self.size.height)
        let written = writer.output.statistics
        print("ffmpeg read \(stamps.count) MJPEG frames from \(node): stamps \(stamps.map { $0.map(String.init) ?? "nil" }.joined(separator: " ")); \(written.framesWritten) written")
        // ffmpeg reads one frame while probing, then sets up its decoder while the writer goes on;
        // v4l2loopback 0.12 hands a reader that fell more than two frames behind the newest one. So
        // the first frame may be followed by a jump; from the second on, none may be missing.
        #expect(stamps.count == 20)
        #expect(DeviceEnvironment.consecutive(Array(stamps.dropFirst())) && (stamps[0] ?? .max) < (stamps[1] ?? 0))
        #expect(written.error == nil)
    }

    @Test func captureSimulateWritesUntilInterruptedWhileFFmpegReads() throws {
        let node = try DeviceEnvironment.requireLoopback()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: DeviceEnvironment.captureTool)
        tool.arguments = ["simulate", "--camera", "sim:back", "--to", node, "--format", "\(Self.size)@\(Self.rate):YUYV",
                          "--control", "exposure.bias=0.5", "--duration", "60"]
        let stdout = Pipe(), stderr = Pipe()
        tool.standardOutput = stdout
        tool.standardError = stderr
        try tool.run()
        defer { if tool.isRunning { tool.terminate(); tool.waitUntilExit() } }
        try DeviceEnvironment.waitForCapture(node)
        let out = dir + "/frames.gray"
        let r = try DeviceEnvironment.run("timeout", ["-k", "5", "40", "ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "v4l2", "-input_format", "yuyv422",
                                                     "-i", node, "-frames:v", "20", "-fps_mode", "passthrough",
                                                     "-f", "rawvideo", "-pix_fmt", "gray", out])
        #expect(r.status == 0, "\(r.stderr)")
        let stamps = DeviceEnvironment.stamps(ofGreyFrames: try Data(contentsOf: URL(fileURLWithPath: out)), width: Self.size.width, height: Self.size.height)
        tool.interrupt()  // SIGINT: stop, print the summary, exit 0
        let summary = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let messages = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        tool.waitUntilExit()
        print("capture simulate: \(messages)\(summary)ffmpeg stamps: \(stamps.map { $0.map(String.init) ?? "nil" }.joined(separator: " "))")
        #expect(tool.terminationStatus == 0)
        #expect(messages.contains("writing sim:back") && messages.contains("as YUYV 640x480"))
        #expect(summary.hasPrefix("Wrote ") && summary.contains("dropped by the camera: 0"))
        #expect(stamps.count == 20)
        #expect(DeviceEnvironment.consecutive(Array(stamps.dropFirst())) && (stamps[0] ?? .max) < (stamps[1] ?? 0))
    }

    @Test func aCaptureNodeIsNotAVideoOutput() throws {
        let vivid = try DeviceEnvironment.requireVivid()
        #expect {
            _ = try V4L2LoopbackSink(path: vivid, pixelFormat: .yuyv, dimensions: Self.size, frameDuration: MediaTime(value: 1, timescale: 30))
        } throws: { error in
            guard case .videoOutputFailed(vivid, .notAVideoOutput(let what)) = error as? CaptureError else { return false }
            return what.contains("capture node")
        }
        // While one writer streams, a second one is told the node is busy.
        let node = try DeviceEnvironment.requireLoopback()
        let writer = try Writer(node: node, pixelFormat: .yuv420)
        defer { writer.stop() }
        try DeviceEnvironment.waitForCapture(node)
        #expect {
            _ = try V4L2LoopbackSink(path: node, pixelFormat: .yuv420, dimensions: Self.size, frameDuration: MediaTime(value: 1, timescale: 30))
        } throws: { error in
            guard case .videoOutputFailed(node, .busy) = error as? CaptureError else { return false }
            return true
        }
    }

    @Test func anMJPEGCameraIsCopiedIntoAMovWithoutReencoding() async throws {
        // The loopback carries MJPEG, as a UVC webcam does: CaptureKit's V4L2 backend delivers the
        // JPEG bytes untouched and the movie output copies them (pass-through) into a MOV.
        let node = try DeviceEnvironment.requireLoopback()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (summary, path) = try await Self.recordMJPEGCopy(node: node, dir: dir)
        // The reader's objects are gone: wait until this process holds the node no more, so the
        // next test's writer can set another format (v4l2loopback keeps a format while it is open).
        try Self.waitUntilClosed(node)
        try Self.checkMJPEGCopy(summary, path: path)
    }

    /// Records `node` (MJPEG, written by a simulator session) into a MOV with the default settings.
    static func recordMJPEGCopy(node: String, dir: String) async throws -> (RecordingSummary, String) {
        let writer = try Writer(node: node, pixelFormat: .mjpeg)
        defer { writer.stop() }
        try DeviceEnvironment.waitForCapture(node)
        let registry = CaptureKit.makeRegistry()
        let camera = try Self.reader(registry, node: node, pixelFormat: .mjpeg)
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: camera))
        let movie = MovieFileOutput()
        try session.addOutput(movie)
        try session.startRunning()
        let path = dir + "/copied.mov"
        defer { for input in session.inputs { session.removeInput(input) } }
        let summary = try await Self.record(movie, to: path, whileWriting: writer, frames: 2 * Int(Self.rate))
        session.stopRunning()
        writer.stop()
        return (summary, path)
    }

    /// CaptureKit's V4L2 backend reading the loopback: the writer's format at `size` and `rate`.
    static func reader(_ registry: DeviceRegistry, node: String, pixelFormat: PixelFormat) throws -> CaptureDevice {
        let camera = try DeviceEnvironment.device(registry, node)
        guard let format = camera.format(matching: size, frameRate: Int(rate), pixelFormat: pixelFormat) else {
            throw DeviceEnvironment.Failure(description: "the loopback offers \(camera.formats.map { "\($0.formatDescription) \($0.frameRateRanges)" })")
        }
        try camera.lockForConfiguration()
        try camera.setActiveFormat(format)
        try camera.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: rate))
        camera.unlockForConfiguration()
        return camera
    }

    /// Records until the writer has written `frames` more frames — counted rather than timed: on a
    /// busy host the emulated vCPU may render slower than real time, and late frames must still all
    /// arrive (at most 120 s).
    static func record(_ movie: MovieFileOutput, to path: String, whileWriting writer: Writer, frames: Int) async throws -> RecordingSummary {
        let target = writer.output.statistics.framesWritten + frames
        let stopper = Task {
            // Stops at the target, or after 120 s (the recording then holds fewer frames and the
            // caller's count fails, naming them).
            try? await DeviceEnvironment.eventually("the writer's \(frames) frames", within: .seconds(120)) {
                writer.output.statistics.framesWritten >= target
            }
            try Task.checkCancellation()
            movie.stopRecording()
        }
        defer { stopper.cancel() }
        return try await movie.record(to: path)
    }

    /// Polls /proc/self/fd until no descriptor of this process points at `node` (at most 30 s).
    static func waitUntilClosed(_ node: String) throws {
        let target = URL(fileURLWithPath: node).resolvingSymlinksInPath().path
        try DeviceEnvironment.eventuallyBlocking("this process to close \(node) after its last use", within: .seconds(30)) {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return !fds.contains(where: { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == target })
        }
    }

    static func checkMJPEGCopy(_ summary: RecordingSummary, path: String) throws {
        #expect(summary.videoPassthrough, "an MJPEG camera into MOV is copied by default")
        let probe = try DeviceEnvironment.run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                                          "stream=codec_name,width,height", "-of", "csv=p=0", path])
        #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,\(Self.size.width),\(Self.size.height)")
        let report = try DeviceEnvironment.analyze(path)
        print("loopback MJPEG copy: \(summary.videoFrames) frames copied, stamps \(report.frameIndices.compactMap { $0 }.first ?? -1)…\(report.frameIndices.compactMap { $0 }.last ?? -1)")
        #expect(report.videoFrameCount == summary.videoFrames && report.videoFrameCount >= Int(Self.rate))
        #expect(report.unreadableFrames == 0)
        #expect(DeviceEnvironment.consecutive(report.frameIndices), "stamps: \(report.frameIndices.map { $0.map(String.init) ?? "nil" }.joined(separator: " "))")
    }

    @Test func capturekitRecordsTheSimulatorFromTheLoopbackWithEveryFrameInOrder() async throws {
        let node = try DeviceEnvironment.requireLoopback()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let writer = try Writer(node: node, pixelFormat: .yuv420)
        defer { writer.stop() }
        try DeviceEnvironment.waitForCapture(node)

        // The reader: CaptureKit's V4L2 backend sees the loopback as a camera with the writer's format.
        let registry = CaptureKit.makeRegistry()
        let camera = try Self.reader(registry, node: node, pixelFormat: .yuv420)
        #expect(camera.localizedName == "CaptureKitLoopback")
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: camera))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        try session.addOutput(movie)
        // The reader's drops with their times: those inside the recording are what the file lost.
        let dropLog = DeviceEnvironment.dropLog(registry, node: node)
        try session.startRunning()
        let path = dir + "/loopback.mp4"
        // Three seconds' worth of frames (45 at 15 fps).
        let summary = try await Self.record(movie, to: path, whileWriting: writer, frames: 3 * Int(Self.rate))
        session.stopRunning()
        let sessionDrops = registry.driverEvents.droppedCount(deviceID: node)
        dropLog.cancel()
        let drops = await dropLog.value
        let written = writer.output.statistics
        writer.stop()

        let (report, frameTimes) = try DeviceEnvironment.analyzeWithFrameTimes(path)
        // Under TCG the writer runs late and catches up in bursts, so the reader sees gaps before the
        // recording began and after it stopped, stamped close to its edges (bunched frames can be a
        // few milliseconds apart). A drop is reported with the PTS of the frame after the gap: it cost
        // the file a frame only when that very frame is in it. The file keeps each PTS to a 90 kHz
        // tick, so the match is to 0.2 ms, not to a fraction of the frame period.
        let readerDrops = try DeviceEnvironment.dropped(drops, beforeFramesAt: frameTimes, of: summary,
                                                        tolerance: 0.0002)
        let indices = report.frameIndices
        let first = indices.first.flatMap { $0 }, last = indices.last.flatMap { $0 }
        print("loopback round trip: wrote \(written.framesWritten) frames (\(written.lateWrites) late, \(written.framesDropped) lost by the simulator); "
              + "recorded \(summary.videoFrames) frames over \(summary.duration) s, stamps \(first.map(String.init) ?? "?")…\(last.map(String.init) ?? "?"), "
              + "\(report.unreadableFrames) unreadable, \(report.droppedCount) missing, \(report.duplicatedIndices.count) duplicated; the reader reported \(readerDrops) dropped during the recording, \(sessionDrops) in the session "
              + "(at \(drops.map { String(format: "%.4f", $0.time - (summary.startTime ?? 0)) }) s from the recording's start; "
              + "the file's frames from \(String(format: "%.4f", frameTimes.first ?? .nan)) to \(String(format: "%.4f", frameTimes.last ?? .nan)) s)")
        for drop in drops {
            let at = drop.time - (summary.startTime ?? 0)
            if let nearest = frameTimes.indices.min(by: { abs(frameTimes[$0] - at) < abs(frameTimes[$1] - at) }) {
                print("loopback round trip: a drop of \(drop.count) at \(String(format: "%.6f", at)) s; the file's nearest frame, stamp \(indices[nearest].map(String.init) ?? "?"), at \(String(format: "%.6f", frameTimes[nearest])) s")
            }
        }
        #expect(written.error == nil && written.framesDropped == 0)
        // Every frame carries its stamp, and the reader, starting mid-stream, got consecutive
        // indices: nothing dropped, duplicated or reordered on the way through the kernel.
        #expect(report.videoFrameCount == summary.videoFrames && report.videoFrameCount >= 2 * Int(Self.rate))
        #expect(report.unreadableFrames == 0)
        #expect(DeviceEnvironment.consecutive(indices), "stamps: \(indices.map { $0.map(String.init) ?? "nil" }.joined(separator: " "))")
        #expect(report.droppedCount == 0 && report.duplicatedIndices.isEmpty && report.reorderedCount == 0)
        // The file's times start at the recording's first frame, so the drops' times can be matched to them.
        #expect(abs(frameTimes.first ?? .infinity) < 0.0002, "first frame at \(frameTimes.first ?? .nan) s")
        #expect(readerDrops == 0)
        // The sync flash survives too: frame n is lit when it is a whole second's first frame (n = rate × t).
        let seconds = (try #require(first)...(try #require(last))).filter { $0 > 0 && $0.isMultiple(of: Int(Self.rate)) }.count
        #expect(report.flashTimes.count == seconds, "flashes at \(report.flashTimes)")
    }
}
