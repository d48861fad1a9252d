import CaptureKit
import Foundation
import Testing

/// The walking skeleton, end to end: simulator → session → H.264/AAC MP4, judged by ffprobe,
/// ffmpeg and CaptureKit's own analyzer.
@Suite struct RecordingEndToEndTests {
    @Test func threeSecondsGiveTheRightStreams() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/three.mp4"
        let summary = try await TestSupport.record(seconds: 3, size: Dimensions(width: 640, height: 480), fps: 30, to: path)
        #expect(summary.videoFrames == 90)
        #expect(summary.audioSamples == 144_000)

        let streams = try TestSupport.probeStreams(path)
        let video = streams.filter { $0["codec_type"] as? String == "video" }
        let audio = streams.filter { $0["codec_type"] as? String == "audio" }
        #expect(video.count == 1 && audio.count == 1)
        #expect(video.first?["codec_name"] as? String == "h264")
        #expect(video.first?["width"] as? Int == 640 && video.first?["height"] as? Int == 480)
        #expect(video.first?["pix_fmt"] as? String == "yuv420p")
        #expect(video.first?["nb_read_frames"] as? String == "90")
        #expect(audio.first?["codec_name"] as? String == "aac")
        #expect(audio.first?["sample_rate"] as? String == "48000")
        // Durations of the two tracks agree within one frame.
        let vd = Double(video.first?["duration"] as? String ?? "") ?? -1
        let ad = Double(audio.first?["duration"] as? String ?? "") ?? -1
        #expect(abs(vd - ad) <= 1.0 / 30, "video \(vd) s vs audio \(ad) s")

        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0)
        #expect(decode.stderr.isEmpty, "ffmpeg reported: \(decode.stderr)")
    }

    @Test func analyzerRecoversEveryFrameAndTheSyncMarkers() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/analyzed.mp4"
        _ = try await TestSupport.record(seconds: 3, size: Dimensions(width: 640, height: 480), fps: 30, to: path)
        let report = try TestSupport.analyze(path)
        #expect(report.frameIndices == (0..<90).map { Optional($0) })
        #expect(report.isClean)
        #expect(report.droppedCount == 0 && report.duplicatedIndices.isEmpty && report.reorderedCount == 0)
        #expect(report.syncMarkers.map(\.second) == [1, 2])
        for marker in report.syncMarkers {
            let offset = try #require(marker.offset, "marker \(marker.second) lacks a side: \(marker)")
            #expect(abs(offset) <= 1.0 / 30, "A/V offset at \(marker.second) s is \(offset) s")
            // The contract allows a frame; the pipeline is sample-accurate, so hold it to 2 ms.
            #expect(abs(offset) <= 0.002, "A/V offset at \(marker.second) s is \(offset) s")
        }
        let frequency = try #require(report.dominantFrequency)
        #expect(abs(frequency - 1000) <= 5, "dominant frequency \(frequency) Hz")
    }

    @Test func sameSeedGivesIdenticalDecodedMediaAndAnotherSeedDoesNot() async throws {
        let dir = try TestSupport.temporaryDirectory()
        var hashes: [String] = []
        for (name, seed) in [("a", UInt64(7)), ("b", 7), ("c", 8)] {
            let path = "\(dir)/\(name).mp4"
            _ = try await TestSupport.record(seconds: 2, seed: seed, preset: .veryfast, to: path)
            let md5 = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "framemd5", "-"])
            #expect(md5.status == 0)
            // Drop the comment header; keep one line per decoded frame / audio packet with its hash.
            hashes.append(md5.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n"))
        }
        #expect(hashes[0].split(separator: "\n").count > 100)
        #expect(hashes[0] == hashes[1], "the same seed must decode to the same frames and audio")
        #expect(hashes[0] != hashes[2], "a different seed must change the content")
    }

    @Test func tenSecondsOf720pInVirtualTime() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/hd.mp4"
        let summary = try await TestSupport.record(seconds: 10, size: Dimensions(width: 1280, height: 720), fps: 30,
                                                   preset: .veryfast, to: path)
        #expect(summary.videoFrames == 300)
        #expect(summary.audioSamples == 480_000)
        let report = try TestSupport.analyze(path)
        #expect(report.isClean && report.videoFrameCount == 300)
        #expect(report.syncMarkers.map(\.second) == Array(1...9))
    }

    @Test func audioOnlyAndVideoOnlyRecordings() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let audioOnly = try await TestSupport.record(camera: nil, seconds: 1.5, to: dir + "/audio.mp4")
        #expect(audioOnly.videoFrames == 0 && audioOnly.audioSamples == 72_000)
        let audioStreams = try TestSupport.probeStreams(dir + "/audio.mp4")
        #expect(audioStreams.map { $0["codec_name"] as? String } == ["aac"])

        let videoOnly = try await TestSupport.record(microphone: nil, seconds: 1, to: dir + "/video.m4v.mp4")
        #expect(videoOnly.videoFrames == 30 && videoOnly.audioSamples == 0)
        let videoStreams = try TestSupport.probeStreams(dir + "/video.m4v.mp4")
        #expect(videoStreams.map { $0["codec_name"] as? String } == ["h264"])
    }
}
