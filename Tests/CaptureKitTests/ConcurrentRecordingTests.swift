import CaptureKit
import Foundation
import Testing

/// Many recordings at once: 8 sessions in one process (each with its own registry, so its own
/// simulated camera and microphone objects and seed) and 8 `capture record` processes. Every file
/// must be complete: every frame once, in order, decoding without an error, A/V in sync.
@Suite(.serialized) struct ConcurrentRecordingTests {
    static func verify(_ path: String, frames: Int, label: String) throws {
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(label): \(decode.stderr)")
        let report = try TestSupport.analyze(path)
        #expect(report.frameIndices.compactMap { $0 } == Array(0..<frames), "\(label): frames \(report.frameIndices.compactMap { $0 }.count)")
        let offsets = report.syncMarkers.compactMap(\.offset)
        #expect(!offsets.isEmpty && offsets.allSatisfy { abs($0) <= 0.001 }, "\(label): A/V offsets \(offsets)")
    }

    @Test func eightSessionsRecordAtOnceInOneProcess() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let summaries = try await withThrowingTaskGroup(of: (Int, RecordingSummary).self) { group in
            for n in 0..<8 {
                group.addTask {
                    let summary = try await TestSupport.record(seconds: 2, size: Dimensions(width: 640, height: 480), fps: 30,
                                                               seed: UInt64(n + 1), to: "\(dir)/session\(n).mp4")
                    return (n, summary)
                }
            }
            var all: [Int: RecordingSummary] = [:]
            for try await (n, summary) in group { all[n] = summary }
            return all
        }
        #expect(summaries.count == 8)
        for n in 0..<8 {
            let summary = try #require(summaries[n])
            #expect(summary.videoFrames == 60 && summary.audioSamples == 96_000 && summary.fileIsUsable, "session \(n): \(summary)")
            try Self.verify("\(dir)/session\(n).mp4", frames: 60, label: "session \(n)")
        }
        // Different seeds, different pictures: the sessions did not share a camera.
        let first = try TestSupport.run("ffmpeg", ["-v", "error", "-i", "\(dir)/session0.mp4", "-map", "0:v", "-f", "md5", "-"])
        let second = try TestSupport.run("ffmpeg", ["-v", "error", "-i", "\(dir)/session1.mp4", "-map", "0:v", "-f", "md5", "-"])
        #expect(first.stdout != second.stdout)
    }

    @Test func eightProcessesRecordAtOnce() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var processes: [Process] = []
        for n in 0..<8 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
            process.arguments = ["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "2", "--size", "640x480",
                                 "--pace", "virtual", "--preset", "ultrafast", "--seed", String(n + 1), "\(dir)/process\(n).mp4"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            processes.append(process)
        }
        for (n, process) in processes.enumerated() {
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "process \(n) exited \(process.terminationStatus)")
        }
        for n in 0..<8 { try Self.verify("\(dir)/process\(n).mp4", frames: 60, label: "process \(n)") }
    }
}
