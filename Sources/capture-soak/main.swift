import CCaptureShims
import CaptureKit
import Foundation
import Synchronization

// The soak: a long virtual-time run of the whole pipeline in a process of its own, sampling what
// leaks show up in (resident memory, open file descriptors, threads) once per minute of media.
//
//   capture-soak [--minutes N] [--dir DIR]
//
// sim:back (640x480, 30 fps) + sim:mic → a movie output writing 10 s fragments into a new file every
// minute (left in DIR for the caller to decode), a video data output, a JPEG
// photo every 10 s, and faults on a schedule: every 997th frame lost at the camera. Prints one CSV
// line per minute, sampled half-way through it (minute, rss_kb, heap_kb — malloc's bytes in use —,
// fds, threads, frames, photos, files), and exits 1 if, from minute 2 on, resident memory or the heap
// grows by more than 5 %, or file descriptors or threads by more than 5 % (at least 1).

func argument(_ name: String) -> String? {
    guard let i = CommandLine.arguments.firstIndex(of: name), i + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[i + 1]
}

struct Sample { var minute: Int; var rssKB: Int; var heapKB: Int; var fds: Int; var threads: Int; var frames: Int; var photos: Int; var files: Int }

func processStatus() -> (rssKB: Int, threads: Int) {
    let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int {
        text.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            .flatMap { Int($0.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") } ?? -1
    }
    return (field("VmRSS"), field("Threads"))
}

func openFileDescriptors() -> Int {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count
}

final class PhotoSink: PhotoCaptureDelegate, Sendable {
    let taken = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    func photoOutput(_ output: PhotoOutput, didFinishProcessingPhoto photo: CapturePhoto?, error: CaptureError?) {
        if photo != nil, error == nil { taken.wrappingAdd(1, ordering: .relaxed) } else { failed.wrappingAdd(1, ordering: .relaxed) }
    }
}

/// Counts frames, asks for a photo every 10 s of media and samples once per minute of media.
final class Ticker: VideoDataOutputSampleBufferDelegate, Sendable {
    let photo: PhotoOutput
    let photos = PhotoSink()
    let frames = Atomic<Int>(0)
    let files = Atomic<Int>(0)
    let samples = Locked<[Sample]>([])
    let lastMinute = Atomic<Int>(0)
    let minuteDone: @Sendable (Int) -> Void

    init(photo: PhotoOutput, minuteDone: @escaping @Sendable (Int) -> Void) {
        self.photo = photo
        self.minuteDone = minuteDone
    }

    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        let n = frames.wrappingAdd(1, ordering: .relaxed).newValue
        let t = sample.presentationTime.seconds
        if n % 300 == 0, !CommandLine.arguments.contains("--no-photos") { try? photo.capturePhoto(with: PhotoSettings(quality: 0.8), delegate: photos) }
        // Minute k is sampled at k × 60 − 30 s of media: mid-file, never during a file change.
        let minute = Int((t + 30) / 60)
        if minute > lastMinute.load(ordering: .relaxed) {
            lastMinute.store(minute, ordering: .relaxed)
            // Freed memory that malloc keeps cached is not a leak: hand it back before measuring.
            _ = ck_release_free_memory()
            let status = processStatus()
            let s = Sample(minute: minute, rssKB: status.rssKB, heapKB: ck_heap_bytes_in_use() / 1024, fds: openFileDescriptors(), threads: status.threads,
                           frames: n, photos: photos.taken.load(ordering: .relaxed), files: files.load(ordering: .relaxed))
            samples.withLock { $0.append(s) }
            // FileHandle writes at once (print would sit in stdio's buffer when piped).
            FileHandle.standardOutput.write(Data("\(s.minute),\(s.rssKB),\(s.heapKB),\(s.fds),\(s.threads),\(s.frames),\(s.photos),\(s.files)\n".utf8))
            minuteDone(minute)
        }
    }
}

let minutes = Int(argument("--minutes") ?? "60") ?? 60
let dir = argument("--dir") ?? (NSTemporaryDirectory() + "capture-soak-\(getpid())")  // movie files stay here
try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)

let scenario = SimulatorScenario()
scenario.setVideoFaults(SimulatorScenario.VideoFaults(droppedFrames: Set(stride(from: Int64(997), to: Int64(minutes * 1800 + 1800), by: 997))),
                        for: "sim:back")
let registry = CaptureKit.makeRegistry(seed: 11, scenario: scenario)
let session = CaptureSession(pace: .virtual)
do {
    try session.setSessionPreset(.vga640x480)
    try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
    try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
} catch {
    print("capture-soak: \(error)")
    exit(2)
}
let movie = MovieFileOutput()
var settings = MovieFileOutput.Settings()
settings.preset = .ultrafast
movie.settings = settings
movie.movieFragmentInterval = MediaTime(value: 10, timescale: 1)
movie.maxRecordedDuration = MediaTime(value: 60, timescale: 1)
let photo = PhotoOutput()
let data = VideoDataOutput()
let finished = DispatchSemaphore(value: 0)
let ticker = Ticker(photo: photo) { minute in if minute >= minutes { finished.signal() } }
// (--no-movie and --no-photos leave parts out, to tell which part a growth comes from.)
data.setSampleBufferDelegate(ticker, queue: DispatchQueue(label: "soak.data"))
do {
    try session.addOutput(movie)
    try session.addOutput(photo)
    try session.addOutput(data)
    try session.startRunning()
} catch {
    print("capture-soak: \(error)")
    exit(2)
}

FileHandle.standardOutput.write(Data("minute,rss_kb,heap_kb,fds,threads,frames,photos,files\n".utf8))
// Movie files of a minute each, one after another, for as long as the soak runs. They stay in
// --dir for the caller to check (ci/soak and SoakTests decode every one with ffmpeg afterwards): a
// checker inside this process would measure its own pipes and threads, not CaptureKit's.
let recorder = Thread {
    var index = 0
    while ticker.lastMinute.load(ordering: .relaxed) < minutes, !CommandLine.arguments.contains("--no-movie") {
        let path = "\(dir)/soak\(String(format: "%03d", index)).mp4"
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<String?>(nil)
        Task {
            do {
                _ = try await movie.record(to: path)
            } catch {
                if ticker.lastMinute.load(ordering: .relaxed) < minutes { failure.withLock { $0 = "\(path): \(error)" } }
            }
            done.signal()
        }
        done.wait()
        if let problem = failure.withLock({ $0 }) {
            print("capture-soak: a recording failed: \(problem)")
            exit(1)
        }
        ticker.files.wrappingAdd(1, ordering: .relaxed)
        index += 1
    }
}
recorder.start()
finished.wait()
session.stopRunning()

let all = ticker.samples.withLock { $0 }
// The baseline is the first sample after the first full minute (minute 2, at 90 s of media): by then
// every part has run once (a file finished, photos taken, malloc's per-thread arenas made).
guard all.count >= 3 else {
    print("capture-soak: too few samples (\(all.count)); run at least 3 minutes")
    exit(1)
}
let first = all[1], samples = Array(all.dropFirst())
let last = all[all.count - 1]
func growth(_ values: [Int], _ base: Int) -> Double { Double(values.max()! - base) / Double(max(base, 1)) }
let rssGrowth = growth(samples.map(\.rssKB), first.rssKB)
let heapGrowth = growth(samples.map(\.heapKB), first.heapKB)
let fdGrowth = samples.map(\.fds).max()! - first.fds
let threadGrowth = samples.map(\.threads).max()! - first.threads
print(String(format: "capture-soak: %d min, %d frames, %d photos (%d failed), %d files; from minute 2: RSS %d → max %d kB (%+.1f %%), heap in use %d → max %d kB (%+.1f %%), fds %d → max %d, threads %d → max %d",
             last.minute, last.frames, last.photos, ticker.photos.failed.load(ordering: .relaxed), last.files,
             first.rssKB, samples.map(\.rssKB).max()!, rssGrowth * 100, first.heapKB, samples.map(\.heapKB).max()!, heapGrowth * 100,
             first.fds, samples.map(\.fds).max()!, first.threads, samples.map(\.threads).max()!))
let flat = rssGrowth <= 0.05 && heapGrowth <= 0.05 && fdGrowth <= max(1, first.fds / 20) && threadGrowth <= max(1, first.threads / 20)
print(flat ? "capture-soak: flat" : "capture-soak: GROWTH beyond 5 %")
exit(flat ? 0 : 1)
