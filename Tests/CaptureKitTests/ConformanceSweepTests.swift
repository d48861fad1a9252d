import CaptureKit
import Foundation
import Testing

/// Independent readers must agree on every kind of file CaptureKit writes: ffprobe, `ffmpeg -f null`,
/// GStreamer (gst-discoverer-1.0 for the duration, playbin for the decoded frames) and MediaInfo report
/// the same duration (± one frame) and frame count, every stream starts at 0, and the ffmpeg CLI's
/// default re-encode keeps every frame once with A/V within 1 ms. `ci/conformance` runs this suite
/// and prints its table; `ci/setup` installs the readers.
@Suite(.serialized) struct ConformanceSweepTests {
    struct Case {
        var name: String
        var file: String
        /// Video frames the file must hold (nil: audio only).
        var frames: Int?
        /// Media seconds the file must last.
        var duration: Double
    }

    struct Reading {
        var duration: Double?
        var frames: Int?
    }

    static let frameDuration = 1.0 / 30

    // MARK: The files

    static func recordWithCLI(_ dir: String, _ name: String, _ file: String, _ arguments: [String], frames: Int?, duration: Double) async throws -> Case {
        let path = "\(dir)/\(file)"
        let result = try await offPool(CommandLineTests.binary, ["record"] + arguments + ["--duration", String(duration), "--pace", "virtual", "--preset", "ultrafast", path])
        if result.status != 0 { throw CaptureError.invalidState("capture record for \(name) failed: \(result.stderr)") }
        return Case(name: name, file: path, frames: frames, duration: duration)
    }

    static func makeFiles(_ dir: String) async throws -> [Case] {
        let av = ["--camera", "sim:back", "--microphone", "sim:mic", "--size", "640x480", "--fps", "30"]
        var cases: [Case] = []
        cases.append(try await recordWithCLI(dir, "MP4 A+V (fragments, defragmented)", "av.mp4", av, frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MP4 A+V 0.5 s fragments", "frag.mp4", av + ["--fragment-interval", "0.5"], frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MP4 A+V unfragmented", "plain.mp4", av + ["--fragment-interval", "0"], frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MOV A+V", "av.mov", av, frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MKV A+V", "av.mkv", av, frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MP4 video only", "video.mp4", ["--camera", "sim:back", "--size", "640x480", "--fps", "30"], frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MP4 audio only", "audio.mp4", ["--microphone", "sim:mic"], frames: nil, duration: 2))
        cases.append(try await recordWithCLI(dir, "MP4 rotated 90°", "rotated.mp4", av + ["--rotation", "90"], frames: 60, duration: 2))
        let mjpeg = ["--camera", "sim:webcam", "--microphone", "sim:mic", "--format", "640x480@30:MJPG"]
        cases.append(try await recordWithCLI(dir, "MOV MJPEG copied", "copied.mov", mjpeg, frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MKV MJPEG copied", "copied.mkv", mjpeg, frames: 60, duration: 2))
        cases.append(try await recordWithCLI(dir, "MOV MJPEG encoded", "mjpeg.mov", av + ["--video-codec", "mjpeg"], frames: 60, duration: 2))
        if VideoCodec.hevc.isAvailable {
            cases.append(try await recordWithCLI(dir, "MP4 HEVC", "hevc.mp4", av + ["--video-codec", "hevc"], frames: 60, duration: 2))
        }
        let m4a = "\(dir)/audio.m4a"
        let audio = try await offPool(CommandLineTests.binary, ["audio", "record", "--microphone", "sim:mic", "--duration", "2", "--pace", "virtual", m4a])
        if audio.status != 0 { throw CaptureError.invalidState("capture audio record failed: \(audio.stderr)") }
        cases.append(Case(name: "M4A (audio recorder)", file: m4a, frames: nil, duration: 2))
        cases.append(try await pausedRecording(dir))
        cases.append(try await assetWriterMovie(dir, fileType: .mp4, fragments: nil))
        cases.append(try await assetWriterMovie(dir, fileType: .mov, fragments: MediaTime(value: 1, timescale: 1)))
        return cases
    }

    /// 1 s recorded, 1 s paused, 1 s recorded (MovieFileOutput's pause cuts the span out).
    static func pausedRecording(_ dir: String) async throws -> Case {
        let path = "\(dir)/paused.mp4"
        _ = try await TestSupport.recordPausedSecond(to: path)
        return Case(name: "MP4 paused/resumed", file: path, frames: 60, duration: 2)
    }

    /// Seed 001's asset-writer path: data outputs → AssetWriter (H.264 + AAC).
    static func assetWriterMovie(_ dir: String, fileType: MediaFileType, fragments: MediaTime?) async throws -> Case {
        let path = "\(dir)/asset-writer.\(fileType.rawValue)"
        let (session, videoOutput, audioOutput) = try AssetTestSupport.dataOutputSession()
        let writer = try AssetWriter(url: URL(fileURLWithPath: path), fileType: fileType)
        if let fragments { writer.movieFragmentInterval = fragments }
        let video = try AssetWriterInput(mediaType: .video, outputSettings: [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.width: 640, VideoSettingsKey.height: 480,
        ])
        let audio = try AssetWriterInput(mediaType: .audio, outputSettings: [
            AudioSettingsKey.formatID: .string(AudioFormatID.mpeg4AAC),
            AudioSettingsKey.numberOfChannels: 1, AudioSettingsKey.sampleRate: 48000,
        ])
        try writer.add(video)
        try writer.add(audio)
        let feeder = AssetFeeder(video: video, audio: audio, end: MediaTime(value: 2, timescale: 1))
        videoOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "video"))
        audioOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "audio"))
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        try await AssetTestSupport.run(session, writer, feeder, frames: 60)
        #expect(writer.status == .completed, "\(String(describing: writer.error))")
        let name = "\(fileType.rawValue.uppercased()) asset writer" + (fragments == nil ? "" : " (1 s fragments)")
        return Case(name: name, file: path, frames: 60, duration: 2)
    }

    // MARK: The readers

    static func ffprobe(_ path: String) throws -> (Reading, startTimes: [Double]) {
        let json = try AssetTestSupport.ffprobeJSON(["-count_frames", "-show_format", "-show_streams", path])
        let streams = json["streams"] as? [[String: Any]] ?? []
        let video = streams.first { $0["codec_type"] as? String == "video" }
        let duration = ((json["format"] as? [String: Any])?["duration"] as? String).flatMap(Double.init)
        let frames = (video?["nb_read_frames"] as? String).flatMap(Int.init)
        let starts = streams.compactMap { ($0["start_time"] as? String).flatMap(Double.init) }
        return (Reading(duration: duration, frames: frames), starts)
    }

    static func gstreamer(_ path: String, hasVideo: Bool) throws -> Reading {
        let discover = try TestSupport.runGStreamer("gst-discoverer-1.0", [path])
        var reading = Reading()
        // "Duration: 0:00:02.000000000"
        if let line = discover.stdout.split(separator: "\n").first(where: { $0.contains("Duration:") }) {
            let parts = line.split(separator: " ").last?.split(separator: ":").compactMap { Double($0) } ?? []
            if parts.count == 3 { reading.duration = parts[0] * 3600 + parts[1] * 60 + parts[2] }
        }
        if hasVideo {
            // Every decoded picture reaches the named video sink; -v prints one "chain" line per buffer.
            let play = try TestSupport.runGStreamer("gst-launch-1.0", ["-v", "playbin", "uri=file://\(path)",
                                                              "video-sink=fakesink name=vsink sync=false silent=false",
                                                              "audio-sink=fakesink sync=false"])
            if play.status == 0 {
                reading.frames = play.stdout.split(separator: "\n").filter { $0.contains("vsink: last-message = chain") }.count
            }
        }
        return reading
    }

    static func mediainfo(_ path: String) throws -> Reading {
        let result = try TestSupport.run("mediainfo", ["--Output=JSON", path])
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let tracks = (json?["media"] as? [String: Any])?["track"] as? [[String: Any]] ?? []
        let general = tracks.first { $0["@type"] as? String == "General" }
        let video = tracks.first { $0["@type"] as? String == "Video" }
        return Reading(duration: (general?["Duration"] as? String).flatMap(Double.init),
                       frames: (video?["FrameCount"] as? String).flatMap(Int.init))
    }

    static func format(_ reading: Reading) -> String {
        let d = reading.duration.map { String(format: "%.3f s", $0) } ?? "—"
        let f = reading.frames.map { "\($0) fr" } ?? "—"
        return "\(d) / \(f)"
    }

    // MARK: The sweep

    @Test func everyReaderAgreesOnEveryKindOfFile() async throws {
        for tool in ["ffprobe", "ffmpeg", "gst-discoverer-1.0", "gst-launch-1.0", "mediainfo"] {
            let found = try TestSupport.run("sh", ["-c", "command -v \(tool)"]).status == 0
            try #require(found, "\(tool) is missing: run ci/setup (it installs GStreamer 1.22 and MediaInfo from Debian)")
        }
        let dir = try TestSupport.temporaryDirectory()
        let cases = try await Self.makeFiles(dir)
        var table = ["file | ffprobe | GStreamer | MediaInfo | ffmpeg -f null | ffmpeg re-encode | agree",
                     "---|---|---|---|---|---|---"]
        var disagreements: [String] = []
        for c in cases {
            var problems: [String] = []
            let (probe, starts) = try Self.ffprobe(c.file)
            let gst = try Self.gstreamer(c.file, hasVideo: c.frames != nil)
            let info = try Self.mediainfo(c.file)
            let decode = try await offPool("ffmpeg", ["-v", "error", "-i", c.file, "-f", "null", "-"])
            let decodeClean = decode.status == 0 && decode.stderr.isEmpty
            if !decodeClean { problems.append("ffmpeg -f null: \(decode.stderr.prefix(200))") }
            if starts.contains(where: { abs($0) > 1e-6 }) { problems.append("ffprobe start_time \(starts), expected 0 for every stream") }

            // Durations within one frame of each other and of what was recorded.
            let readers = [("ffprobe", probe), ("GStreamer", gst), ("MediaInfo", info)]
            for (name, reading) in readers {
                guard let d = reading.duration else { problems.append("\(name) reports no duration"); continue }
                if abs(d - c.duration) > Self.frameDuration + 0.001 { problems.append("\(name) duration \(d) s, expected \(c.duration) s ± one frame") }
                if let frames = c.frames, reading.frames != frames {
                    problems.append("\(name) counts \(reading.frames.map(String.init) ?? "no") frames, expected \(frames)")
                }
            }

            // The ffmpeg CLI's default re-encode into the same kind of file.
            let ext = (c.file as NSString).pathExtension
            let reencoded = "\(dir)/re-\((c.file as NSString).lastPathComponent)"
            let encodeArguments = c.frames == nil ? ["-c:a", "aac"] : ["-c:v", "libx264", "-c:a", "aac"]
            // A rotated file's default re-encode turns the pixels (autorotate), which hides the frame
            // markers: check that one's size and count, and read the markers from a -noautorotate copy.
            if c.name.contains("rotated") {
                let turned = "\(dir)/turned-\((c.file as NSString).lastPathComponent)"
                let turn = try await offPool("ffmpeg", ["-v", "error", "-i", c.file] + encodeArguments + [turned])
                let streams = try TestSupport.probeStreams(turned)
                let video = streams.first { $0["codec_type"] as? String == "video" }
                let shape = "\(video?["width"] as? Int ?? 0)x\(video?["height"] as? Int ?? 0)"
                if turn.status != 0 || shape != "480x640" || video?["nb_read_frames"] as? String != "\(c.frames ?? 0)" {
                    problems.append("default re-encode of the rotated file: \(shape), \(video?["nb_read_frames"] as? String ?? "?") frames \(turn.stderr.prefix(200))")
                }
            }
            let encode = try await offPool("ffmpeg", ["-v", "error"] + (c.name.contains("rotated") ? ["-noautorotate"] : [])
                                             + ["-i", c.file] + encodeArguments + [reencoded])
            var reencodeText = "failed"
            if encode.status != 0 {
                problems.append("ffmpeg re-encode to .\(ext) failed: \(encode.stderr.prefix(200))")
            } else {
                let original = try TestSupport.analyze(c.file)
                let report = try TestSupport.analyze(reencoded)
                let before = original.frameIndices.compactMap { $0 }, after = report.frameIndices.compactMap { $0 }
                if after != before { problems.append("re-encode frames \(after.count) (\(report.duplicatedIndices.count) duplicated), original \(before.count)") }
                let offsets = report.syncMarkers.compactMap(\.offset)
                if offsets.count != original.syncMarkers.compactMap(\.offset).count {
                    problems.append("re-encode has \(offsets.count) sync markers, the original \(original.syncMarkers.compactMap(\.offset).count)")
                }
                let worst = offsets.map(abs).max() ?? 0
                if worst > 0.001 { problems.append(String(format: "re-encode A/V offset %.1f ms", worst * 1000)) }
                reencodeText = c.frames == nil ? "re-encoded" : String(format: "%d fr, A/V ≤ %.1f ms", after.count, worst * 1000)
            }
            table.append("\(c.name) | \(Self.format(probe)) | \(Self.format(gst)) | \(Self.format(info)) | \(decodeClean ? "clean" : "errors") | \(reencodeText) | \(problems.isEmpty ? "yes" : "NO")")
            if !problems.isEmpty { disagreements.append("\(c.name) (\(c.file)): " + problems.joined(separator: "; ")) }
        }
        print("conformance sweep:\n" + table.joined(separator: "\n"))
        #expect(disagreements.isEmpty, "readers disagree:\n\(disagreements.joined(separator: "\n"))")
    }
}
