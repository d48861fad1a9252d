import CaptureKit
import Foundation
import Testing

@Suite struct StatusLineTests {
    @Test func rendersLikeFFmpegsProgressLine() {
        let s = CaptureStatus(elapsed: 10, mediaSeconds: 10, frames: 300, dropped: 2, fileSize: 1_048_576, encoderQueue: 1,
                              audioLevelDBFS: -12, avDrift: 0.003)
        #expect(StatusLine.render(s)
                == "frame=  300 fps=  30 drop=2 size=   1024kB time=00:00:10.00 bitrate=  838.9kbits/s queue=1 level=[########--] -12dB A-V=+3ms elapsed=10.0s")
        // Audio only: no frame counters, no drift.
        let audio = CaptureStatus(elapsed: 61.5, mediaSeconds: 61.25, fileSize: 0, audioLevelDBFS: -160)
        #expect(StatusLine.render(audio) == "size=      0kB time=00:01:01.25 bitrate=    0.0kbits/s level=[----------] -99dB elapsed=61.5s")
        #expect(StatusLine.meter(0) == "[##########]" && StatusLine.meter(-30) == "[#####-----]" && StatusLine.meter(-90) == "[----------]")
        #expect(StatusLine.clock(3725.5) == "01:02:05.50")
    }
}

/// The live status line of a real-time recording, on a terminal (`script` gives the command a pty)
/// and piped. Real time by nature: ci/test runs this suite in its real-time pass.
@Suite struct StatusLineRealtimeTests {
    static func inPty(_ command: [String]) async throws -> TestSupport.ToolResult {
        try await offPool("script", ["-qfec", command.joined(separator: " "), "/dev/null"])
    }

    /// The status updates in captured terminal output: the text between carriage returns that starts with `frame=`.
    static func updates(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == "\r" || $0 == "\n" })
            .map { $0.replacingOccurrences(of: "\u{1B}[K", with: "") }
            .filter { $0.hasPrefix("frame=") }
    }

    static func elapsed(_ line: String) -> Double? {
        line.range(of: "elapsed=").flatMap { Double(line[$0.upperBound...].prefix { $0.isNumber || $0 == "." }) }
    }

    @Test func aTenSecondRecordingUpdatesOnATerminalAtLeastOnceASecond() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let result = try await Self.inPty([CommandLineTests.binary, "record", "--camera", "sim:back", "--microphone", "sim:mic",
                                           "--duration", "10", dir + "/tty.mp4"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let updates = Self.updates(result.stdout)
        let distinct = Set(updates)
        #expect(distinct.count >= 9, "\(updates)")
        // In place: carriage returns, not new lines, between updates.
        #expect(result.stdout.contains("\u{1B}[K\rframe="), "\(result.stdout.prefix(400))")
        let times = updates.compactMap(Self.elapsed)
        #expect(times.count == updates.count, "\(updates.filter { Self.elapsed($0) == nil })")
        #expect((times.last ?? 0) >= 9, "\(times)")
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 <= 1.0 }, "gaps between updates \(gaps)")
        #expect(updates.allSatisfy { $0.contains(" drop=0 ") && $0.contains(" level=[") && $0.contains(" A-V=") })
        #expect(result.stdout.contains("Recorded \(dir)/tty.mp4: 10.000 s"))
        print("status line: \(updates.count) updates (\(distinct.count) distinct) over \(times.last ?? 0) s, last: \(updates.last ?? "")")

        let quiet = try await Self.inPty([CommandLineTests.binary, "record", "--camera", "sim:back", "--duration", "2", "--quiet",
                                          dir + "/quiet.mp4"])
        #expect(quiet.status == 0)
        #expect(Self.updates(quiet.stdout).isEmpty, "\(quiet.stdout)")
    }

    /// Lines that start with `size=` (commands without video frames).
    static func audioUpdates(_ text: String) -> [String] {
        text.split(whereSeparator: { $0 == "\r" || $0 == "\n" })
            .map { $0.replacingOccurrences(of: "\u{1B}[K", with: "") }
            .filter { $0.hasPrefix("size=") }
    }

    @Test func audioAndFixtureRecordingsShowTheLineToo() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let audio = try await Self.inPty([CommandLineTests.binary, "audio", "record", "--microphone", "sim:mic", "--duration", "2",
                                          dir + "/a.wav"])
        #expect(audio.status == 0, "\(audio.stdout)")
        let lines = Self.audioUpdates(audio.stdout)
        // The simulated microphone's tone is at −12 dBFS: eight cells of the meter.
        #expect(lines.count >= 3 && lines.allSatisfy { $0.contains("level=[########--] -12dB") }, "\(lines)")
        #expect(audio.stdout.contains("recorded 2.000 s to \(dir)/a.wav"))
        let fixture = try await Self.inPty([CommandLineTests.binary, "fixture", "record", "--camera", "sim:back", "--duration", "2",
                                            dir + "/f.nut"])
        #expect(fixture.status == 0, "\(fixture.stdout)")
        // With a camera the fixture's line counts its frames, as `record`'s does.
        let fixtureLines = Self.updates(fixture.stdout)
        #expect(fixtureLines.count >= 3 && fixtureLines.allSatisfy { $0.contains(" time=00:00:0") }, "\(fixtureLines)")
    }

    @Test func pipedOnlyTheSummaryUnlessProgressIsAsked() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let piped = try await offPool(CommandLineTests.binary, ["record", "--camera", "sim:back", "--microphone", "sim:mic",
                                                                 "--duration", "2", dir + "/piped.mp4"])
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(!piped.stderr.contains("frame=") && !piped.stderr.contains("\r"), "\(piped.stderr)")
        #expect(piped.stderr.split(separator: "\n").count == 1)  // "capture: recording to …" only
        #expect(piped.stdout.hasPrefix("Recorded \(dir)/piped.mp4: 2.000 s"))
        let progress = try await offPool(CommandLineTests.binary, ["record", "--camera", "sim:back", "--duration", "2", "--progress",
                                                                   dir + "/progress.mp4"])
        #expect(progress.status == 0)
        let lines = progress.stderr.split(separator: "\n").filter { $0.hasPrefix("frame=") }
        #expect(lines.count >= 1 && !progress.stderr.contains("\r"), "\(progress.stderr)")
    }
}
