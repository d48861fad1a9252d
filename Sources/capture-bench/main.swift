import CaptureKit
import Foundation
import Synchronization

// In-process benchmark rows for ci/bench. Each row runs its subject and its reference on the
// same work, alternating A B A B after a warm-up, and prints medians and the ratio. Timing lives
// here, never in tests. Usage: capture-bench [--runs N] [--seconds S]

/// Waits for a movie output's finish on a semaphore (the bench is synchronous).
final class FinishSignal: CaptureFileOutputRecordingDelegate {
    let done = DispatchSemaphore(value: 0)
    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) { done.signal() }
}

final class Sink: VideoDataOutputSampleBufferDelegate {
    let count = Atomic<Int>(0)
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        count.wrappingAdd(1, ordering: .relaxed)
    }
}

func benchMain() throws {
var runs = 3
var seconds = 4
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--runs": runs = Int(arguments.next() ?? "") ?? runs
    case "--seconds": seconds = Int(arguments.next() ?? "") ?? seconds
    default: FileHandle.standardError.write(Data("usage: capture-bench [--runs N] [--seconds S]\n".utf8)); exit(2)
    }
}

func now() -> Double { HostClock.now().seconds }
func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}
func row(runs: Int, _ name: String, subject: String, reference: String, unit: String = "s",
         _ a: () throws -> Double, _ b: () throws -> Double) rethrows {
    _ = try a(); _ = try b()   // warm-up
    var xs: [Double] = [], ys: [Double] = []
    for _ in 0..<runs {
        xs.append(try a())
        ys.append(try b())
    }
    let (x, y) = (median(xs), median(ys))
    print(String(format: "%-46@ %10.3f %@  %10.3f %@  ratio %6.2f   (%@ vs %@)", name as NSString, x, unit, y, unit, x / y,
                 subject, reference))
}

let tmp = NSTemporaryDirectory() + "capture-bench-\(UUID().uuidString)"
try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: tmp) }
var fileCounter = 0
func nextPath() -> String { fileCounter += 1; return "\(tmp)/\(fileCounter).mp4" }

let frameDuration = MediaTime(value: 1, timescale: 30)
let sizes = [Dimensions(width: 640, height: 480), Dimensions(width: 1280, height: 720), Dimensions(width: 1920, height: 1080)]

// Row 2: capture pipeline vs encoder floor (the same libavcodec/libavformat calls on frames made beforehand).
print("== capture pipeline vs encoder floor, \(seconds) s of media, veryfast, with a 48 kHz tone")
for size in sizes {
    let renderer = try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: size, frameDuration: frameDuration, seed: 1)
    let ring: [PixelBuffer] = (0..<30).map { n in
        let b = PixelBuffer(format: .nv12, width: size.width, height: size.height)
        renderer.render(frame: Int64(n), into: b)
        return b
    }
    let tone = ToneGenerator(spec: SyncToneSpec(), sampleRate: 48_000)
    let audioFormat = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32)
    let audio: [AudioPCMBuffer] = (0..<47).map { n in
        let b = AudioPCMBuffer(format: audioFormat, frameCapacity: 1024)
        b.withMutableBytes { tone.fill($0.baseAddress!.assumingMemoryBound(to: Float.self), first: Int64(n * 1024), count: 1024, channels: 1) }
        return b
    }
    func floor() throws -> Double {
        let start = now()
        let writer = try MovieWriter(path: nextPath(), container: .mp4,
                                     video: VideoEncoderSettings(dimensions: size, inputPixelFormat: .nv12, frameDuration: frameDuration),
                                     audio: AudioEncoderSettings(input: audioFormat),
                                     options: MovieWriter.Options(fragmentInterval: MediaTime(value: 10, timescale: 1)))
        var written: Int64 = 0
        for n in 0..<(seconds * 30) {
            try writer.appendVideo(ring[n % ring.count], frameIndex: Int64(n))
            while written < Int64(n + 1) * 1600 {
                try writer.appendAudio(audio[Int(written / 1024) % audio.count])
                written += 1024
            }
        }
        try writer.finish()
        return now() - start
    }
    func pipeline() throws -> Double {
        let start = now()
        let registry = CaptureKit.makeRegistry(seed: 1)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: camera))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        if let format = camera.format(matching: size, frameRate: 30, pixelFormat: .nv12) {
            try camera.lockForConfiguration()
            try camera.setActiveFormat(format)
            camera.unlockForConfiguration()
        }
        let movie = MovieFileOutput()
        movie.maxRecordedDuration = MediaTime(value: Int64(seconds), timescale: 1)
        try session.addOutput(movie)
        try session.startRunning()
        let signal = FinishSignal()
        movie.startRecording(to: nextPath(), recordingDelegate: signal)
        signal.done.wait()
        session.stopRunning()
        return now() - start
    }
    try row(runs: runs, "\(size) pipeline ÷ floor", subject: "session→movie", reference: "encode loop", pipeline, floor)
}

// Row 3: simulator frame generation, plain and with camera effects.
print("== simulator frame generation, 60 frames (ms per frame)")
for size in sizes {
    for format in [PixelFormat.nv12, .yuv420] {
        let renderer = try SyntheticFrameRenderer(pixelFormat: format, dimensions: size, frameDuration: frameDuration, seed: 2)
        let buffer = PixelBuffer(format: format, width: size.width, height: size.height)
        var effects = CameraEffects()
        effects.red = 1.3; effects.green = 1.1; effects.blue = 0.8
        effects.blurRadius = 3
        effects.noiseSigma = 2
        func plain() -> Double {
            let start = now()
            for n in 0..<60 { _ = renderer.render(frame: Int64(n), effects: .neutral, syncFlash: false, metering: nil, into: buffer) }
            return (now() - start) * 1000 / 60
        }
        func withEffects() -> Double {
            let start = now()
            for n in 0..<60 { _ = renderer.render(frame: Int64(n), effects: effects, syncFlash: false, metering: nil, into: buffer) }
            return (now() - start) * 1000 / 60
        }
        row(runs: runs, "\(size) \(format) effects ÷ plain", subject: "blur+noise+WB", reference: "plain", unit: "ms", withEffects, plain)
        print(String(format: "GEN %@ %@ %.4f", "\(size)" as NSString, format.fourcc as NSString, plain()))
    }
}

// Row 4: data-output delivery at 1080p (no encoding), frames per second.
print("== data-output delivery, 1080p, consumer does nothing")
do {
    let registry = CaptureKit.makeRegistry(seed: 3)
    let session = CaptureSession(pace: .virtual)
    try session.setSessionPreset(.hd1920x1080)
    try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
    let output = VideoDataOutput()
    let sink = Sink()
    output.setSampleBufferDelegate(sink, queue: DispatchQueue(label: "sink"))
    try session.addOutput(output)
    try session.startRunning()
    Thread.sleep(forTimeInterval: 0.5)
    let (c0, t0) = (sink.count.load(ordering: .relaxed), now())
    Thread.sleep(forTimeInterval: 3)
    let (c1, t1) = (sink.count.load(ordering: .relaxed), now())
    session.stopRunning()
    print(String(format: "DELIVERY 1080p %.0f frames/s (simulator rendering included)", Double(c1 - c0) / (t1 - t0)))
}

// Row 5: a 1080p photo's JPEG work (NV12 → I420 → turbojpeg) vs libturbojpeg straight from I420 planes.
print("== photo, 1080p")
do {
    let size = Dimensions(width: 1920, height: 1080)
    let nv12 = PixelBuffer(format: .nv12, width: size.width, height: size.height)
    let i420 = PixelBuffer(format: .yuv420, width: size.width, height: size.height)
    try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: size, frameDuration: frameDuration, seed: 4).render(frame: 5, into: nv12)
    try SyntheticFrameRenderer(pixelFormat: .yuv420, dimensions: size, frameDuration: frameDuration, seed: 4).render(frame: 5, into: i420)
    let codec = try JPEGCodec()
    try row(runs: runs, "1080p photo ÷ direct turbojpeg", subject: "photo path", reference: "tjCompressFromYUVPlanes", unit: "ms", {
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

try benchMain()
