import CaptureKit
import Foundation
import Synchronization

// Measurements for ci/bench (timing lives here, never in tests). Two kinds of command:
//
//   capture-bench rows [--runs N] [--seconds S] [--only TEXT]...
//       In-process rows. Each runs its subject (A) and its reference (B) on the same work,
//       in pairs A B, B A, A B, … after one warm-up pair, and prints one machine-readable line:
//       ROW<TAB>name<TAB>unit<TAB>target<TAB>a1,a2,…<TAB>b1,b2,…   (b is "-" without a reference)
//       ci/bench turns these lines (and its own shell rows, same format) into one table.
//   capture-bench generate WxH FORMAT [--effects|--uncached] [--frames N]
//       One number: milliseconds per simulated frame (for rows whose reference is a CLI).
//
// Targets read "ratio<=1.05" (median of the per-pair ratios A_i ÷ B_i), "subject>=1000"
// (median of A), or "-" (informational).

/// Waits for a movie output's finish on a semaphore (the bench is synchronous).
final class FinishSignal: CaptureFileOutputRecordingDelegate {
    let done = DispatchSemaphore(value: 0)
    let started = Locked<Double?>(nil)
    func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection]) {
        started.withLock { $0 = now() }
    }
    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) { done.signal() }
}

final class Sink: VideoDataOutputSampleBufferDelegate {
    let count = Atomic<Int>(0)
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        count.wrappingAdd(1, ordering: .relaxed)
    }
}

/// Keeps a copy of every frame a session delivers (the encoder floor's input).
final class FrameCollector: VideoDataOutputSampleBufferDelegate {
    let frames = Locked<[PixelBuffer]>([])
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer else { return }
        let copy = PixelBuffer(format: pixels.format, width: pixels.width, height: pixels.height)
        for plane in 0..<pixels.planeCount {
            copy.producerBaseAddress(ofPlane: plane).copyMemory(from: pixels.baseAddress(ofPlane: plane),
                                                        byteCount: pixels.bytesPerRow[plane] * pixels.planeRows[plane])
        }
        frames.withLock { $0.append(copy) }
    }
}

func now() -> Double { HostClock.now().seconds }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("capture-bench: \(message)\n".utf8))
    exit(2)
}

let usage = """
    usage: capture-bench rows [--runs N] [--seconds S] [--only TEXT]...
           capture-bench generate WxH nv12|yuv420 [--effects|--uncached] [--frames N]
           capture-bench profile WxH [--seconds S]
           capture-bench workload render|effects|mjpeg|pipeline|start|floor-frames|floor
                                  [--size WxH --seconds S --preset P]   (pipeline, floor-frames, floor; default 640x480 2 ultrafast)
           capture-bench dump WxH SECONDS DIR   (raw NV12 frames + float samples for ci/bench)
           capture-bench latency WxH [--fps N] [--seconds S] [--busy]   (ms: median p99 frames [packet: median p99 packets])
    """

let frameDuration = MediaTime(value: 1, timescale: 30)

/// The camera effects the effects rows apply: white balance (a warm cast), defocus and noise.
let benchEffects: CameraEffects = {
    var e = CameraEffects()
    e.red = 1.3; e.green = 1.1; e.blue = 0.8
    e.blurRadius = 3
    e.noiseSigma = 2
    return e
}()

func parseSize(_ text: String) -> Dimensions {
    let parts = text.split(separator: "x").compactMap { Int($0) }
    guard parts.count == 2 else { fail("size must read WxH, not \(text)") }
    return Dimensions(width: parts[0], height: parts[1])
}

func parseFormat(_ text: String) -> PixelFormat {
    switch text.lowercased() {
    case "nv12": return .nv12
    case "yuv420", "i420", "yu12": return .yuv420
    default: fail("format must be nv12 or yuv420, not \(text)")
    }
}

enum GenerationMode { case plain, effects, uncached }

/// Milliseconds per frame for `frames` frames of one renderer (after a few untimed frames).
/// `uncached` alternates two neutral-looking effect sets so every frame redraws its background.
func generationTime(_ size: Dimensions, _ format: PixelFormat, _ mode: GenerationMode, frames: Int,
                    renderer: SyntheticFrameRenderer? = nil, buffer: PixelBuffer? = nil) throws -> Double {
    let renderer = try renderer ?? SyntheticFrameRenderer(pixelFormat: format, dimensions: size, frameDuration: frameDuration, seed: 2)
    let buffer = buffer ?? PixelBuffer(format: format, width: size.width, height: size.height)
    var alternate = CameraEffects.neutral
    alternate.green = 0.999
    func effects(_ n: Int) -> CameraEffects {
        switch mode {
        case .plain: return .neutral
        case .effects: return benchEffects
        case .uncached: return n % 2 == 0 ? .neutral : alternate
        }
    }
    for n in 0..<3 { _ = renderer.render(frame: Int64(n), effects: effects(n), syncFlash: false, metering: nil, into: buffer) }
    let start = now()
    for n in 0..<frames { _ = renderer.render(frame: Int64(n), effects: effects(n), syncFlash: false, metering: nil, into: buffer) }
    return (now() - start) * 1000 / Double(frames)
}

// MARK: - Rows

struct Rows {
    var runs = 3
    var seconds = 4
    var only: [String] = []
    let tmp: String
    var fileCounter = 0
    var keep = false

    init(tmp: String) { self.tmp = tmp }

    mutating func nextPath() -> String { fileCounter += 1; return "\(tmp)/\(fileCounter).mp4" }

    /// A row runs when its name contains every `--only` text.
    func wanted(_ name: String) -> Bool { only.allSatisfy { name.localizedCaseInsensitiveContains($0) } }

    static func median(_ values: [Double]) -> Double {
        let s = values.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func emit(_ name: String, unit: String, target: String, _ a: [Double], _ b: [Double]?) {
        func list(_ v: [Double]) -> String { v.map { String(format: "%.6g", $0) }.joined(separator: ",") }
        print("ROW\t\(name)\t\(unit)\t\(target)\t\(list(a))\t\(b.map(list) ?? "-")")
        fflush(nil)
    }

    /// One row: a warm-up pair, then `runs` pairs in the order A B, B A, A B, … — whatever the
    /// second of a pair pays (the first's freed memory, a machine growing busier) falls on each side in turn.
    func row(_ name: String, unit: String, target: String, _ a: () throws -> Double, _ b: () throws -> Double) rethrows {
        guard wanted(name) else { return }
        _ = try a(); _ = try b()
        var xs: [Double] = [], ys: [Double] = []
        for pair in 0..<runs {
            if pair % 2 == 0 {
                xs.append(try a()); ys.append(try b())
            } else {
                ys.append(try b()); xs.append(try a())
            }
        }
        Self.emit(name, unit: unit, target: target, xs, ys)
    }

    static let sizes = [Dimensions(width: 640, height: 480), Dimensions(width: 1280, height: 720), Dimensions(width: 1920, height: 1080)]
    /// The size of the encoder floor's A/A row.
    static let controlSize = Dimensions(width: 1280, height: 720)

    /// A virtual-pace session on sim:back (and sim:mic) at `size`, NV12, 30 fps.
    static func makeSession(seed: UInt64, size: Dimensions, audio: Bool) throws -> CaptureSession {
        // CAPTURE_BENCH_RENDER_AHEAD=0: the camera renders each frame in turn (for an A/B of rendering ahead).
        let scenario = SimulatorScenario()
        scenario.rendersAhead = ProcessInfo.processInfo.environment["CAPTURE_BENCH_RENDER_AHEAD"] != "0"
        let registry = CaptureKit.makeRegistry(seed: seed, scenario: scenario)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: camera))
        if audio { try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic"))) }
        guard let format = camera.format(matching: size, frameRate: 30, pixelFormat: .nv12) else {
            fail("sim:back has no \(size) NV12 format")
        }
        try camera.lockForConfiguration()
        try camera.setActiveFormat(format)
        camera.unlockForConfiguration()
        return session
    }

    /// Row 2: the whole capture pipeline (session → movie file output) against the encoder floor
    /// (`EncoderFloor`: the same frames, captured beforehand into memory, encoded and muxed by a
    /// minimal loop over the same MovieWriter calls; libx264 veryfast, AAC, MP4 fragmented every 10 s).
    mutating func pipelineRows() throws {
        for size in Self.sizes {
            let name = "pipeline ÷ encoder floor \(size.width)x\(size.height)"
            // A/A: the floor against itself, the same way — how far from 1 this method reads when
            // both sides do the same work (the resolution the rows are read against).
            let control = size == Self.controlSize ? "encoder floor ÷ encoder floor \(size.width)x\(size.height) (A/A)" : nil
            guard wanted(name) || control.map(wanted) == true else { continue }
            let floorWork = try EncoderFloor(size: size, frameCount: seconds * 30)
            var paths: [String] = []
            for _ in 0..<(2 * runs + 2) { paths.append(nextPath()) }
            var next = 0
            func path() -> String { defer { next += 1 }; return paths[next] }
            let seconds = self.seconds
            func floor() throws -> Double {
                let start = now()
                try floorWork.encode(to: path())
                return now() - start
            }
            func pipeline() throws -> Double {
                let start = now()
                let session = try Self.makeSession(seed: 1, size: size, audio: true)
                let movie = MovieFileOutput()
                movie.maxRecordedDuration = MediaTime(value: Int64(seconds), timescale: 1)
                try session.addOutput(movie)
                try session.startRunning()
                let signal = FinishSignal()
                movie.startRecording(to: path(), recordingDelegate: signal)
                signal.done.wait()
                session.stopRunning()
                return now() - start
            }
            try row(name, unit: "s", target: "ratio<=1.03", pipeline, floor)
            if let control, wanted(control) {
                for _ in 0..<(2 * runs + 2) { paths.append(nextPath()) }
                try row(control, unit: "s", target: "-", floor, floor)
            }
            if !keep { for p in paths { try? FileManager.default.removeItem(atPath: p) } }
        }
    }

    /// Row 3 (in-process part): the cost of camera effects over the plain (cached) path, and over
    /// an uncached render of the scene (the plain path redrawn every frame).
    func generationRows() throws {
        for size in Self.sizes {
            for format in [PixelFormat.nv12, .yuv420] {
                let renderer = try SyntheticFrameRenderer(pixelFormat: format, dimensions: size, frameDuration: frameDuration, seed: 2)
                let buffer = PixelBuffer(format: format, width: size.width, height: size.height)
                let label = "\(size.width)x\(size.height) \(format == .nv12 ? "NV12" : "I420")"
                let frames = 60
                // Issue 17 retired "effects ÷ plain ≤ 3" (it compared with a cached memcpy); the
                // ratio stays as information. Target 6 is "generation with effects ÷ testsrc2 ≤ 0.5" (ci/bench).
                try row("effects ÷ plain generation \(label)", unit: "ms", target: "-",
                        { try generationTime(size, format, .effects, frames: frames, renderer: renderer, buffer: buffer) },
                        { try generationTime(size, format, .plain, frames: frames, renderer: renderer, buffer: buffer) })
                if format == .nv12 {
                    try row("effects ÷ uncached generation \(label)", unit: "ms", target: "-",
                            { try generationTime(size, format, .effects, frames: frames, renderer: renderer, buffer: buffer) },
                            { try generationTime(size, format, .uncached, frames: frames, renderer: renderer, buffer: buffer) })
                }
            }
        }
    }

    /// Row 4: frames per second a video data output delivers at 1080p (no encoding, rendering included).
    func deliveryRow() throws {
        let name = "data-output delivery 1920x1080"
        guard wanted(name) else { return }
        let registry = CaptureKit.makeRegistry(seed: 3)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.hd1920x1080)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let output = VideoDataOutput()
        let sink = Sink()
        output.setSampleBufferDelegate(sink, queue: DispatchQueue(label: "sink"))
        try session.addOutput(output)
        try session.startRunning()
        Thread.sleep(forTimeInterval: 0.3)
        var rates: [Double] = []
        for _ in 0..<runs {
            let (c0, t0) = (sink.count.load(ordering: .relaxed), now())
            Thread.sleep(forTimeInterval: 1)
            let (c1, t1) = (sink.count.load(ordering: .relaxed), now())
            rates.append(Double(c1 - c0) / (t1 - t0))
        }
        session.stopRunning()
        Self.emit(name, unit: "fps", target: "subject>=1000", rates, nil)
    }

    /// Row 5: a 1080p photo's JPEG work (NV12 → I420 → libturbojpeg) against libturbojpeg straight from I420 planes.
    func photoRow() throws {
        let size = Dimensions(width: 1920, height: 1080)
        let nv12 = PixelBuffer(format: .nv12, width: size.width, height: size.height)
        let i420 = PixelBuffer(format: .yuv420, width: size.width, height: size.height)
        try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: size, frameDuration: frameDuration, seed: 4).render(frame: 5, into: nv12)
        try SyntheticFrameRenderer(pixelFormat: .yuv420, dimensions: size, frameDuration: frameDuration, seed: 4).render(frame: 5, into: i420)
        let codec = try JPEGCodec()
        try row("photo ÷ direct libturbojpeg 1920x1080", unit: "ms", target: "ratio<=1.2", {
            let start = now()
            for _ in 0..<10 { _ = try codec.encode(nv12, quality: 0.9) }
            return (now() - start) * 100
        }, {
            let start = now()
            for _ in 0..<10 { _ = try codec.encode(i420, quality: 0.9) }
            return (now() - start) * 100
        })
    }
}

func benchMain() throws {
    var arguments = Array(CommandLine.arguments.dropFirst())
    guard let command = arguments.first else { fail(usage) }
    arguments.removeFirst()
    func value(_ flag: String) -> String? {
        guard let i = arguments.firstIndex(of: flag), i + 1 < arguments.count else { return nil }
        defer { arguments.removeSubrange(i...(i + 1)) }
        return arguments[i + 1]
    }
    func flag(_ name: String) -> Bool {
        guard let i = arguments.firstIndex(of: name) else { return false }
        arguments.remove(at: i)
        return true
    }
    switch command {
    case "rows":
        let tmp = NSTemporaryDirectory() + "capture-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        // CAPTURE_BENCH_KEEP=1 keeps the movies (e.g. to check that pipeline and floor wrote the same video).
        let keep = ProcessInfo.processInfo.environment["CAPTURE_BENCH_KEEP"] == "1"
        defer { if keep { print("kept \(tmp)") } else { try? FileManager.default.removeItem(atPath: tmp) } }
        var rows = Rows(tmp: tmp)
        rows.keep = keep
        if let v = value("--runs") { rows.runs = max(1, Int(v) ?? rows.runs) }
        if let v = value("--seconds") { rows.seconds = max(1, Int(v) ?? rows.seconds) }
        while let text = value("--only") { rows.only.append(text) }
        guard arguments.isEmpty else { fail(usage) }
        try rows.pipelineRows()
        try rows.generationRows()
        try rows.deliveryRow()
        try rows.photoRow()
    case "generate":
        let frames = value("--frames").flatMap { Int($0) } ?? 120
        let mode: GenerationMode = flag("--effects") ? .effects : (flag("--uncached") ? .uncached : .plain)
        guard arguments.count == 2 else { fail(usage) }
        let ms = try generationTime(parseSize(arguments[0]), parseFormat(arguments[1]), mode, frames: frames)
        print(String(format: "%.6g", ms))
    case "profile":
        // Where one pipeline run's wall time goes (diagnostic; not a row).
        let seconds = value("--seconds").flatMap { Int($0) } ?? 4
        guard arguments.count == 1 else { fail(usage) }
        let size = parseSize(arguments[0])
        let path = NSTemporaryDirectory() + "capture-bench-profile-\(UUID().uuidString).mp4"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var marks: [(String, Double)] = [("start", now())]
        let session = try Rows.makeSession(seed: 1, size: size, audio: true)
        marks.append(("session + devices", now()))
        let movie = MovieFileOutput()
        movie.maxRecordedDuration = MediaTime(value: Int64(seconds), timescale: 1)
        try session.addOutput(movie)
        try session.startRunning()
        marks.append(("startRunning", now()))
        let signal = FinishSignal()
        movie.startRecording(to: path, recordingDelegate: signal)
        signal.done.wait()
        let finished = now()
        if let started = signal.started.withLock({ $0 }) { marks.append(("first frame written", started)) }
        marks.append(("recording", finished))
        session.stopRunning()
        marks.append(("stopRunning", now()))
        for i in 1..<marks.count { print(String(format: "%-20@ %8.1f ms", marks[i].0 as NSString, (marks[i].1 - marks[i - 1].1) * 1000)) }
    case "latency":
        let fps = value("--fps").flatMap { Int($0) } ?? 30
        let seconds = value("--seconds").flatMap { Int($0) } ?? 10
        let busy = flag("--busy")
        guard arguments.count == 1 else { fail(usage) }
        let r = try measureLatency(size: parseSize(arguments[0]), fps: fps, seconds: seconds, busy: busy)
        // (a) median p99 frames, then with --busy (b) median p99 packets.
        var line = String(format: "%.3f %.3f %d", r.delegate.median, r.delegate.p99, r.delegate.count)
        if let b = r.packet { line += String(format: " %.3f %.3f %d", b.median, b.p99, b.count) }
        print(line)
    case "dump":
        guard arguments.count == 3, let seconds = Int(arguments[1]) else { fail(usage) }
        try dumpRaw(size: parseSize(arguments[0]), seconds: seconds, folder: arguments[2])
    case "workload":
        // One fixed piece of work for the instruction-count gate (ci/bench --instructions); the
        // pipeline workloads also at other settings for ci/bench's instruction rows of target 1.
        var settings = Workload.Settings()
        if let v = value("--size") { settings.size = parseSize(v) }
        if let v = value("--seconds") { settings.seconds = max(1, Int(v) ?? settings.seconds) }
        if let v = value("--preset") {
            guard let preset = VideoEncoderSettings.Preset(rawValue: v) else { fail("unknown preset \(v)") }
            settings.preset = preset
        }
        guard arguments.count == 1, let workload = Workload(rawValue: arguments[0]) else { fail(usage) }
        let folder = NSTemporaryDirectory() + "capture-bench-workload-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try workload.run(in: folder, settings: settings)
    default:
        fail(usage)
    }
}

try benchMain()
