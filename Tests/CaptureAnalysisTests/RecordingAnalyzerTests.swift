import CaptureAnalysis
import CaptureCore
import Foundation
import Testing

@Suite struct RecordingAnalyzerTests {
    @Test func wholeRecordingHasTwoTightMarkersAndIsClean() throws {
        var analyzer = RecordingAnalyzer()
        let fps = 30.0
        for i in 0 ..< 90 {
            let pts = Double(i) / fps
            // The first frame at or after each whole second carries the flash.
            let flash = i > 0 && Int((Double(i - 1) / fps).rounded(.down)) < Int(pts.rounded(.down))
            let frame = SyntheticFrame(width: 320, height: 240, index: UInt32(i), flash: flash, seed: UInt64(i + 1))
            frame.withPlane { analyzer.addVideoFrame($0, presentationTime: pts) }
        }
        let audio = SyntheticTone.samples(duration: 3.0, sampleRate: 48000)
        var offset = 0
        while offset < audio.count {
            let chunk = Array(audio[offset ..< min(audio.count, offset + 1024)])
            analyzer.addAudio(chunk, startTime: Double(offset) / 48000, sampleRate: 48000)
            offset += 1024
        }

        let report = analyzer.report()
        #expect(report.videoFrameCount == 90)
        #expect(report.frameIndices == (0 ..< 90).map { Optional($0) })
        #expect(report.isClean)
        #expect(report.flashTimes == [1.0, 2.0])
        #expect(report.syncMarkers.map(\.second) == [1, 2])
        for marker in report.syncMarkers {
            let offset = try #require(marker.offset)
            #expect(abs(offset) < 0.002, "second \(marker.second): \(offset)")
        }
        #expect(report.audioDuration == 3.0)
        let frequency = try #require(report.dominantFrequency)
        #expect(abs(frequency - 1000) < 1, "\(frequency)")
        let rms = try #require(report.audioRMSDBFS)
        #expect(abs(rms - (-15.01)) < 0.05, "\(rms)")

        let decoded = try JSONDecoder().decode(RecordingReport.self, from: JSONEncoder().encode(report))
        #expect(decoded == report)
    }

    @Test func missingDuplicateSwapAndUnreadableFramesAreReported() {
        var analyzer = RecordingAnalyzer()
        let stamps: [UInt32?] = [0, 1, 2, 4, 5, 5, 7, 6, nil, 8, 9]
        let flashes: Set<Int> = [3, 4, 9]
        for (i, stamp) in stamps.enumerated() {
            let frame = SyntheticFrame(width: 352, height: 288, index: stamp, flash: flashes.contains(i), seed: UInt64(i + 1))
            frame.withPlane { analyzer.addVideoFrame($0, presentationTime: 0.25 * Double(i)) }
        }
        let report = analyzer.report()
        #expect(report.videoFrameCount == 11)
        #expect(report.frameIndices == [0, 1, 2, 4, 5, 5, 7, 6, nil, 8, 9])
        #expect(report.unreadableFrames == 1)
        #expect(report.droppedIndices == [3])
        #expect(report.droppedCount == 1)
        #expect(report.duplicatedIndices == [5])
        #expect(report.reorderedCount == 1)
        #expect(!report.isClean)
        // Frames 3 and 4 form one run: only its first frame counts.
        #expect(report.flashTimes == [0.75, 2.25])
        // No audio: markers are video-only.
        #expect(report.syncMarkers == [SyncMarker(second: 1, videoTime: 0.75, audioTime: nil),
                                       SyncMarker(second: 2, videoTime: 2.25, audioTime: nil)])
        #expect(report.audioDuration == nil && report.dominantFrequency == nil && report.audioRMSDBFS == nil)
    }

    @Test func framesAddedInDecodeOrderAreSortedByPresentationTime() {
        var analyzer = RecordingAnalyzer()
        for (index, pts) in [(0, 0.0), (2, 2.0 / 30), (1, 1.0 / 30), (3, 3.0 / 30)] {
            let frame = SyntheticFrame(width: 320, height: 240, index: UInt32(index), seed: UInt64(index + 1))
            frame.withPlane { analyzer.addVideoFrame($0, presentationTime: pts) }
        }
        let report = analyzer.report()
        #expect(report.frameIndices == [0, 1, 2, 3])
        #expect(report.isClean)
    }

    @Test func wildMisreadDoesNotExplodeTheDropList() {
        var analyzer = RecordingAnalyzer()
        for (i, index) in [UInt32(0), 1, 0xFFFF_FFF0].enumerated() {
            let frame = SyntheticFrame(width: 320, height: 240, index: index, damage: false)
            frame.withPlane { analyzer.addVideoFrame($0, presentationTime: Double(i)) }
        }
        let report = analyzer.report()
        #expect(report.droppedCount == 0xFFFF_FFF0 - 2)
        #expect(report.droppedIndices.count == RecordingReport.droppedIndexListLimit)
        #expect(report.droppedIndices.first == 2)
    }

    @Test func audioOnlyBurstsAndUnmatchedFlashesStayOneSided() {
        var analyzer = RecordingAnalyzer()
        // A flash at 1.0 s with a burst at 1.0 s pairs; a flash at 4.6 s has no burst near it.
        for (i, pts) in [0.9, 1.0, 1.1, 4.6].enumerated() {
            let frame = SyntheticFrame(width: 320, height: 240, index: UInt32(i), flash: pts == 1.0 || pts == 4.6,
                                       seed: UInt64(i + 1))
            frame.withPlane { analyzer.addVideoFrame($0, presentationTime: pts) }
        }
        analyzer.addAudio(SyntheticTone.samples(duration: 2.5, sampleRate: 48000), startTime: 0, sampleRate: 48000)
        let markers = analyzer.report().syncMarkers
        #expect(markers.map(\.second) == [1, 2, 5])
        #expect(markers.count == 3)
        guard markers.count == 3 else { return }
        #expect(markers[0].videoTime == 1.0 && markers[0].audioTime != nil)
        #expect(markers[1].videoTime == nil && abs((markers[1].audioTime ?? 0) - 2.0) < 0.001)
        #expect(markers[2].videoTime == 4.6 && markers[2].audioTime == nil && markers[2].offset == nil)
    }
}
