import CaptureKit
import Testing

/// The recording timeline with plain numbers (no FFmpeg, no files): where the movie output and the
/// asset writer put each video frame and audio sample.
@Suite struct RecordingTimelineTests {
    static let rate: Int32 = 48_000
    static let frame = MediaTime(value: 1, timescale: 30)

    /// A file with 30 fps video (1/90000 s ticks) and 48 kHz audio from `origin`.
    private func timeline(origin: MediaTime = .zero, video: Bool = true, audio: Bool = true) -> RecordingTimeline {
        RecordingTimeline(origin: origin, videoTick: video ? TrackTimeBase.fine(for: Self.frame) : nil,
                          audioRate: audio ? Self.rate : nil)
    }

    private func sample(_ n: Int64) -> MediaTime { MediaTime(value: n, timescale: Self.rate) }
    private func videoFrame(_ n: Int64) -> MediaTime { Self.frame * n }

    /// Writes what the timeline places of `frames` samples at `pts`; returns the placement.
    @discardableResult
    private func writeAudio(_ t: inout RecordingTimeline, at pts: MediaTime, frames: Int = 1024) -> RecordingTimeline.AudioPlacement {
        let placement = t.placeAudio(at: pts, frameCount: frames)
        t.didWriteAudio(placement.sampleCount)
        return placement
    }

    /// Writes frame `n` (PTS n/30 s) and returns its slot, or nil when the timeline does not write it.
    @discardableResult
    private func writeVideo(_ t: inout RecordingTimeline, at pts: MediaTime) -> RecordingTimeline.VideoSlot? {
        guard case .write(let slot) = t.placeVideo(at: pts) else { return nil }
        t.didWriteVideo(slot, duration: Self.frame)
        return slot
    }

    /// Frames 0…9 (to 1/3 s = sample 16 000) and audio buffers 0…14 (to sample 15 360).
    private func thirdOfASecond() -> RecordingTimeline {
        var t = timeline()
        for n in 0..<10 { writeVideo(&t, at: videoFrame(Int64(n))) }
        for k in 0..<15 { writeAudio(&t, at: sample(Int64(k) * 1024)) }
        return t
    }

    @Test func pauseInTheMiddleOfAnAudioBufferCutsAtTheExactSample() {
        var t = thirdOfASecond()
        #expect(t.duration == MediaTime(value: 1, timescale: 3))
        t.pause()
        // Buffer 15 (samples 15 360…16 383) straddles the paused video's end, sample 16 000.
        let straddling = writeAudio(&t, at: sample(15 * 1024))
        #expect(straddling == RecordingTimeline.AudioPlacement(silence: 0, frames: 0..<640, holdForResume: true))
        #expect(t.audioSamples == 16_000)
        // Later buffers add nothing (but are held for the resume), even after a gap.
        #expect(writeAudio(&t, at: sample(16 * 1024)) == RecordingTimeline.AudioPlacement(holdForResume: true))
        #expect(writeAudio(&t, at: sample(40 * 1024)) == RecordingTimeline.AudioPlacement(holdForResume: true))
        #expect(t.audioSamples == 16_000)
    }

    @Test func resumeInTheMiddleOfAnAudioBufferStartsAtTheExactSample() {
        var t = thirdOfASecond()
        t.pause()
        writeAudio(&t, at: sample(15 * 1024))
        // Resume on the frame at 2 s (sample 96 000 of capture time), inside buffer 93 (95 232…96 255).
        t.resume(at: videoFrame(60))
        #expect(t.pausedDuration == MediaTime(value: 5, timescale: 3))
        #expect(!t.isPaused)
        // The held buffers before the resume add nothing; the straddling one gives its last 256 samples.
        #expect(writeAudio(&t, at: sample(92 * 1024)).sampleCount == 0)
        #expect(writeAudio(&t, at: sample(93 * 1024)) == RecordingTimeline.AudioPlacement(silence: 0, frames: 768..<1024))
        #expect(t.audioSamples == 16_256)
        // The resuming frame continues the video where it stopped, at 1/3 s.
        #expect(writeVideo(&t, at: videoFrame(60))?.tick == 30_000)
        // The next buffer follows without a gap.
        #expect(writeAudio(&t, at: sample(94 * 1024)) == RecordingTimeline.AudioPlacement(silence: 0, frames: 0..<1024))
    }

    @Test func videoFramesInThePauseAreDroppedAndLaterOnesShiftByThePausedLength() {
        var t = thirdOfASecond()
        t.pause()
        for n in 10..<45 { #expect(t.placeVideo(at: videoFrame(Int64(n))) == .paused) }
        t.resume(at: videoFrame(45))
        #expect(t.pausedDuration == MediaTime(value: 35, timescale: 30))
        for n in 45..<50 {
            let slot = writeVideo(&t, at: videoFrame(Int64(n)))
            #expect(slot?.fileTime == videoFrame(Int64(n) - 35))
            #expect(slot?.tick == (Int64(n) - 35) * 3000)
            #expect(slot?.isNudged == false)
        }
        #expect(t.duration == videoFrame(15))
    }

    @Test func anAudioGapOfNSamplesBecomesNSilentSamples() {
        var t = timeline()
        writeAudio(&t, at: .zero)
        let placement = writeAudio(&t, at: sample(1024 + 333))
        #expect(placement == RecordingTimeline.AudioPlacement(silence: 333, frames: 0..<1024))
        #expect(t.audioSamples == 2 * 1024 + 333)
        // An overlap is cut instead: this buffer starts 100 samples before the audio's end.
        #expect(writeAudio(&t, at: sample(2 * 1024 + 333 - 100)).frames == 100..<1024)
        #expect(t.audioSamples == 3 * 1024 + 333 - 100)
    }

    @Test func maximumDurationEndsVideoBeforeTheFrameAtItAndCutsAudioThere() {
        var t = timeline()
        t.end = MediaTime(value: 1, timescale: 1)
        for n in 0..<30 { #expect(writeVideo(&t, at: videoFrame(Int64(n))) != nil) }
        #expect(t.placeVideo(at: videoFrame(30)) == .pastEnd)
        for k in 0..<46 { writeAudio(&t, at: sample(Int64(k) * 1024)) }
        // Buffer 46 (47 104…48 127) is cut at sample 48 000; the next adds nothing.
        #expect(writeAudio(&t, at: sample(46 * 1024)).frames == 0..<896)
        #expect(writeAudio(&t, at: sample(47 * 1024)).sampleCount == 0)
        #expect(t.audioSamples == 48_000)
        #expect(!t.audioReachedEnd, "a file with video ends on a frame")
    }

    @Test func aGapBeforeTheEndIsSilentOnlyUpToTheEnd() {
        var t = timeline(video: false)
        t.end = MediaTime(value: 1, timescale: 1)
        writeAudio(&t, at: .zero, frames: 47_000)
        #expect(t.audioSamples == 47_000)
        // A buffer wholly past the end proves the audio went on: silence to the end, nothing more.
        #expect(writeAudio(&t, at: sample(49_000)) == RecordingTimeline.AudioPlacement(silence: 1000, frames: 0..<0))
        #expect(t.audioSamples == 48_000)
        #expect(t.audioReachedEnd)
    }

    @Test func audioStartingBeforeTheFirstFrameIsCutToIt() {
        // The capture clock's first frame at 10 s is the origin; audio began 10 ms earlier.
        var t = timeline(origin: MediaTime(value: 10, timescale: 1))
        writeVideo(&t, at: MediaTime(value: 10, timescale: 1))
        let placement = writeAudio(&t, at: MediaTime(value: 999, timescale: 100))
        #expect(placement == RecordingTimeline.AudioPlacement(silence: 0, frames: 480..<1024))
        // Audio wholly before the origin adds nothing.
        #expect(t.placeAudio(at: MediaTime(value: 9, timescale: 1), frameCount: 1024).sampleCount == 0)
        // The next buffer follows the cut one without a gap.
        #expect(writeAudio(&t, at: MediaTime(value: 999, timescale: 100) + sample(1024)).silence == 0)
    }

    @Test func audioStartingAfterTheFirstFrameIsPrecededBySilence() {
        var t = timeline(origin: MediaTime(value: 10, timescale: 1))
        writeVideo(&t, at: MediaTime(value: 10, timescale: 1))
        let placement = writeAudio(&t, at: MediaTime(value: 1005, timescale: 100))
        #expect(placement == RecordingTimeline.AudioPlacement(silence: 2400, frames: 0..<1024))
    }

    @Test func videoBeforeTheOriginIsNotWritten() {
        var t = timeline(origin: MediaTime(value: 2, timescale: 1))
        #expect(t.placeVideo(at: MediaTime(value: 59, timescale: 30)) == .beforeStart)
        #expect(writeVideo(&t, at: MediaTime(value: 2, timescale: 1))?.tick == 0)
    }

    @Test func aFrameOnThePreviousTickMovesToTheNextAndSaysSo() {
        var t = timeline()
        writeVideo(&t, at: .zero)
        // 5 µs later rounds to tick 0 of 1/90000 s again.
        let slot = writeVideo(&t, at: MediaTime(value: 5, timescale: 1_000_000))
        #expect(slot?.tick == 1)
        #expect(slot?.isNudged == true)
    }

    @Test func anAudioOnlyFilePausesAndResumesOnAudio() {
        var t = timeline(video: false)
        #expect(t.resumes(on: .audio) && !t.resumes(on: .video))
        for k in 0..<10 { writeAudio(&t, at: sample(Int64(k) * 1024)) }
        t.pause()
        #expect(writeAudio(&t, at: sample(10 * 1024)) == .nothing, "paused audio-only files drop audio")
        t.resume(at: sample(20 * 1024 + 7))
        #expect(t.pausedDuration == sample(10 * 1024 + 7))
        #expect(writeAudio(&t, at: sample(20 * 1024 + 7)) == RecordingTimeline.AudioPlacement(silence: 0, frames: 0..<1024))
        #expect(t.audioSamples == 11 * 1024)
        #expect(t.duration == sample(11 * 1024))
    }

    @Test func samplesOfAMissingTrackAreNotPlaced() {
        let audioOnly = timeline(video: false)
        #expect(audioOnly.placeVideo(at: .zero) == .noTrack)
        let videoOnly = timeline(audio: false)
        #expect(videoOnly.placeAudio(at: .zero, frameCount: 1024) == .nothing)
        #expect(videoOnly.resumes(on: .video) && !videoOnly.resumes(on: .audio))
    }

    /// One hour of 48 kHz audio in 1024-sample buffers and 30000/1001 fps video, stamped by a
    /// nanosecond host clock (each PTS rounded to the nanosecond) from an arbitrary origin: no
    /// buffer gains or loses a sample and every frame is on its exact tick.
    @Test func anHourOfAudioAndNTSCVideoDoesNotDrift() {
        let ns: Int32 = 1_000_000_000
        let origin = MediaTime(value: 12_345_678_901, timescale: ns)
        let frameDuration = MediaTime(value: 1001, timescale: 30_000)
        var t = RecordingTimeline(origin: origin, videoTick: TrackTimeBase.fine(for: frameDuration), audioRate: Self.rate)
        #expect(t.videoTick == MediaTime(value: 1, timescale: 90_000))
        func hostTime(_ seconds: MediaTime) -> MediaTime { origin + seconds.convertScale(ns) }
        let buffers: Int64 = 3600 * 48_000 / 1024  // 168 750
        let frames: Int64 = 3600 * 30_000 / 1001   // 107 892
        var badAudio = 0, badVideo = 0
        var k: Int64 = 0, n: Int64 = 0
        while k < buffers || n < frames {
            let audioTime = MediaTime(value: k * 1024, timescale: Self.rate)
            let videoTime = frameDuration * n
            if n >= frames || (k < buffers && audioTime < videoTime) {
                let placement = t.placeAudio(at: hostTime(audioTime), frameCount: 1024)
                if placement != RecordingTimeline.AudioPlacement(silence: 0, frames: 0..<1024) { badAudio += 1 }
                t.didWriteAudio(placement.sampleCount)
                k += 1
            } else {
                guard case .write(let slot) = t.placeVideo(at: hostTime(videoTime)) else { badVideo += 1; n += 1; continue }
                if slot.tick != n * 3003 || slot.isNudged { badVideo += 1 }
                t.didWriteVideo(slot, duration: frameDuration)
                n += 1
            }
        }
        #expect(badAudio == 0)
        #expect(badVideo == 0)
        #expect(t.audioSamples == buffers * 1024)
        #expect(t.audioDuration == MediaTime(value: 3600, timescale: 1))
        #expect(t.lastVideoTick == (frames - 1) * 3003)
    }
}
