import CaptureKit
import Foundation
import Logging
import Testing

/// FFmpeg's and CaptureKit's log lines go through swift-log: none at the default level, all with
/// their `capturekit.<module>` label at `--log-level debug`.
@Suite struct LoggingCommandTests {
    /// Lines FFmpeg (or libx264 through it) would print: "[libx264 @ 0x…]", "[mp4 @ 0x…]".
    static func ffmpegLines(_ stderr: String) -> [Substring] {
        stderr.split(separator: "\n").filter { $0.contains(" @ 0x") }
    }

    static func record(_ camera: String, microphone: String?, extra: [String], env: [String] = []) async throws -> TestSupport.ToolResult {
        let dir = try TestSupport.temporaryDirectory()
        var arguments = ["record", "--camera", camera, "--duration", "1", "--pace", "virtual"] + extra + [dir + "/out.mp4"]
        if let microphone { arguments.insert(contentsOf: ["--microphone", microphone], at: 3) }
        let result = try await offPool("env", env + [CommandLineTests.binary] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        return result
    }

    @Test func aRecordingPrintsNoFFmpegLineByDefaultAndLabelledLinesAtDebug() async throws {
        let quiet = try await Self.record("sim:back", microphone: "sim:mic", extra: [])
        #expect(Self.ffmpegLines(quiet.stderr).isEmpty, "\(quiet.stderr)")
        #expect(!quiet.stderr.contains("capturekit."), "\(quiet.stderr)")

        let debug = try await Self.record("sim:back", microphone: "sim:mic", extra: ["--log-level", "debug"])
        let lines = Self.ffmpegLines(debug.stderr)
        // libx264's end-of-encode statistics, routed through av_log: every one labelled.
        #expect(lines.contains { $0.contains("[libx264 @ 0x") && $0.contains("frame I:") }, "\(debug.stderr)")
        #expect(!lines.isEmpty && lines.allSatisfy { $0.contains(" capturekit.ffmpeg:") }, "\(lines)")
        #expect(debug.stderr.split(separator: "\n").contains { $0.contains("debug capturekit.media:") && $0.hasSuffix("[CaptureMedia] opening mp4 file") }, "\(debug.stderr)")
        #expect(debug.stderr.split(separator: "\n").contains { $0.contains("info capturekit.media:") && $0.hasSuffix("[CaptureMedia] finished mp4 file") }, "\(debug.stderr)")
        print("record --log-level debug: \(lines.count) FFmpeg lines, e.g. \(lines.first ?? "")")

        // --verbose after the subcommand, and the environment variable, do the same.
        let verbose = try await Self.record("sim:back", microphone: nil, extra: ["--verbose"])
        #expect(Self.ffmpegLines(verbose.stderr).contains { $0.contains("debug capturekit.ffmpeg:") }, "\(verbose.stderr)")
        let env = try await Self.record("sim:back", microphone: nil, extra: [], env: ["CAPTUREKIT_LOG_LEVEL=debug"])
        #expect(Self.ffmpegLines(env.stderr).contains { $0.contains("debug capturekit.ffmpeg:") }, "\(env.stderr)")
        // info shows CaptureKit's lifecycle lines but not FFmpeg's informational output.
        let info = try await Self.record("sim:back", microphone: nil, extra: ["--log-level=info"])
        #expect(Self.ffmpegLines(info.stderr).isEmpty, "\(info.stderr)")
        #expect(info.stderr.contains("info capturekit.media:"), "\(info.stderr)")
    }

    @Test func aFixtureReplayPrintsNoFFmpegLineByDefault() async throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/vivid-yuyv-320x180-30.nut").path
        let quiet = try await Self.record("fixture:" + fixture, microphone: nil, extra: [])
        #expect(Self.ffmpegLines(quiet.stderr).isEmpty, "\(quiet.stderr)")
        #expect(!quiet.stderr.contains("capturekit."), "\(quiet.stderr)")
        let debug = try await Self.record("fixture:" + fixture, microphone: nil, extra: ["--log-level", "debug"])
        #expect(debug.stderr.split(separator: "\n").contains { $0.contains("debug capturekit.media: path=\(fixture)") && $0.hasSuffix("opening fixture") }, "\(debug.stderr)")
        #expect(Self.ffmpegLines(debug.stderr).contains { $0.contains("debug capturekit.ffmpeg:") }, "\(debug.stderr)")
    }

    @Test func aWrongLevelIsRefused() async throws {
        let result = try await offPool(CommandLineTests.binary, ["devices", "--log-level", "loud"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("--log-level takes one of trace|debug|info|notice|warning|error|critical, not 'loud'"), "\(result.stderr)")
    }

    @Test func levelsMapOneStepDown() {
        #expect(FFmpegLogRouting.level(ffmpeg: 16) == .notice)  // AV_LOG_ERROR
        #expect(FFmpegLogRouting.level(ffmpeg: 24) == .info)  // AV_LOG_WARNING
        #expect(FFmpegLogRouting.level(ffmpeg: 32) == .debug)  // AV_LOG_INFO
        #expect(FFmpegLogRouting.threshold(for: .warning) == 8)  // AV_LOG_FATAL: nothing routine
        #expect(CaptureLogging.startingLevel(nil) == .warning)
        #expect(CaptureLogging.startingLevel(" Debug") == .debug)
        #expect(CaptureLogging.startingLevel("nonsense") == .warning)
        #expect(CaptureLogging.logger(.v4l2).label == "capturekit.v4l2")
    }
}
