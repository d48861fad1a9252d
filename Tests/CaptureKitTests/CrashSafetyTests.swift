import CaptureKit
import Foundation
import Testing

/// Fragmented movies survive a crash: a `capture record` process killed with SIGKILL at a seeded
/// random moment leaves a file that decodes cleanly and holds every frame up to its last fragment.
@Suite struct CrashSafetyTests {
    @Test func killedRecordingsStayPlayable() async throws {
        let dir = try TestSupport.temporaryDirectory()
        var random = SplitMix(seed: 2026)
        var outcomes: [String] = []
        for run in 0..<10 {
            let path = "\(dir)/crash\(run).mp4"
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
            process.arguments = ["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "20",
                                 "--fragment-interval", "2", "--pace", "virtual", "--preset", "ultrafast", path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // The clock starts when the first fragment is on disk (a 'moof' box): on a loaded machine
            // the process may need more than the shortest delay just to start, and a file killed before
            // it recorded anything has nothing to keep.
            for _ in 0..<6_000 where process.isRunning {
                if let data = FileManager.default.contents(atPath: path), data.range(of: Data("moof".utf8)) != nil { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            // Then 0–1.2 s of wall time: from the first fragment to late in the recording.
            let delay = Double(random.next() % 1200) / 1000
            try await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()

            let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "run \(run) (killed at \(delay) s): \(decode.stderr)")
            let report = try TestSupport.analyze(path)
            let indices = report.frameIndices.compactMap { $0 }
            // Frame 0 forms the first fragment; later fragments start on the keyframe every 2 s (60 frames).
            #expect(indices == Array(0..<indices.count), "run \(run): frames must be 0…n−1 with nothing missing")
            #expect(indices.count == 1 || indices.count % 60 == 0 || indices.count == 600,
                    "run \(run): \(indices.count) frames is not a whole number of fragments")
            #expect(report.isClean)
            outcomes.append("\(String(format: "%.2f", delay)) s → \(indices.count) frames")
        }
        print("crash runs: \(outcomes.joined(separator: ", "))")
    }
}

/// SplitMix64, for the seeded kill moments.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
