import CaptureCore

/// Accumulates observations from a whole recording, frame by frame and audio chunk by chunk,
/// then reports on its health.
///
/// Video frames are reduced at once to (PTS, stamp, flash) so a long recording costs a few
/// bytes per frame. Audio is kept as mono float samples (4 bytes per sample, ~690 MB per hour
/// at 48 kHz) because burst onsets and the tone frequency are measured over all of it.
public struct RecordingAnalyzer: Sendable {
    /// What one video frame showed.
    private struct FrameObservation: Sendable {
        var presentationTime: Double
        var index: UInt32?
        var flash: Bool
        /// Arrival order, to keep equal PTS in the order they were added.
        var arrival: Int
    }

    /// Audio before this much time into the track is left out of the frequency measurement:
    /// encoder priming and fade-in distort the first moments.
    public static let frequencyLeadIn = 0.1
    /// Clearance kept on both sides of a burst when choosing a burst-free stretch.
    public static let burstGuard = 0.005
    /// A flash and a burst further apart than this are not the same marker.
    public static let pairingWindow = 0.5

    public let spec: SyncToneSpec
    private var frames: [FrameObservation] = []
    private var samples: [Float] = []
    private var audioStartTime: Double?
    private var sampleRate: Int?

    public init(spec: SyncToneSpec = SyncToneSpec()) {
        self.spec = spec
    }

    /// Reads the stamp and flash of one frame; the pixels are not kept. Frames may arrive in
    /// decode order — the report sorts them by `presentationTime`, which must be finite.
    public mutating func addVideoFrame(_ plane: LumaPlane, presentationTime: Double) {
        precondition(presentationTime.isFinite, "presentation time must be finite")
        frames.append(FrameObservation(presentationTime: presentationTime,
                                       index: FrameStampReader.frameIndex(in: plane),
                                       flash: FrameStampReader.hasSyncFlash(in: plane),
                                       arrival: frames.count))
    }

    /// Appends a chunk of mono samples. Chunks are assumed contiguous: only the first chunk's
    /// `startTime` is used, later ones continue where the previous ended. Every chunk must have
    /// the first chunk's `sampleRate` (one track has one rate); `startTime` must be finite.
    public mutating func addAudio(_ monoSamples: UnsafeBufferPointer<Float>, startTime: Double, sampleRate: Int) {
        precondition(sampleRate > 0, "sample rate must be positive")
        precondition(startTime.isFinite, "audio start time must be finite")
        guard !monoSamples.isEmpty else { return }
        if let existing = self.sampleRate {
            precondition(existing == sampleRate, "audio chunks must share one sample rate")
        } else {
            self.sampleRate = sampleRate
            audioStartTime = startTime
        }
        samples.append(contentsOf: monoSamples)
    }

    /// Appends a chunk of mono samples; see the `UnsafeBufferPointer` variant.
    public mutating func addAudio(_ monoSamples: [Float], startTime: Double, sampleRate: Int) {
        monoSamples.withUnsafeBufferPointer {
            addAudio($0, startTime: startTime, sampleRate: sampleRate)
        }
    }

    public func report() -> RecordingReport {
        var report = RecordingReport()
        let ordered = frames.sorted {
            ($0.presentationTime, $0.arrival) < ($1.presentationTime, $1.arrival)
        }
        report.videoFrameCount = ordered.count
        report.frameIndices = ordered.map { $0.index.map(Int.init) }
        report.unreadableFrames = ordered.count(where: { $0.index == nil })
        analyseContinuity(report.frameIndices.compactMap { $0 }, into: &report)

        var previousFlash = false
        for frame in ordered {
            if frame.flash && !previousFlash { report.flashTimes.append(frame.presentationTime) }
            previousFlash = frame.flash
        }

        if let sampleRate, let audioStartTime {
            report.burstOnsets = ToneAnalysis.burstOnsets(samples: samples, sampleRate: sampleRate,
                                                          startTime: audioStartTime, spec: spec)
            report.audioDuration = Double(samples.count) / Double(sampleRate)
            report.audioRMSDBFS = ToneAnalysis.rmsDBFS(samples)
            let stretch = burstFreeStretch(onsets: report.burstOnsets, sampleRate: sampleRate,
                                           startTime: audioStartTime)
            report.dominantFrequency = ToneAnalysis.dominantFrequency(samples: samples, sampleRate: sampleRate,
                                                                      range: stretch)
        }
        report.syncMarkers = Self.pair(flashes: report.flashTimes, onsets: report.burstOnsets)
        return report
    }

    /// Drops (indices missing between the smallest and largest seen), duplicates and reorders.
    private func analyseContinuity(_ decoded: [Int], into report: inout RecordingReport) {
        var previous: Int?
        for index in decoded {
            if let previous, index < previous { report.reorderedCount += 1 }
            previous = index
        }
        var seen: [Int: Int] = [:]
        for index in decoded { seen[index, default: 0] += 1 }
        report.duplicatedIndices = seen.filter { $0.value > 1 }.map(\.key).sorted()

        let distinct = seen.keys.sorted()
        for (lower, upper) in zip(distinct, distinct.dropFirst()) where upper - lower > 1 {
            report.droppedCount += upper - lower - 1
            var missing = lower + 1
            while missing < upper && report.droppedIndices.count < RecordingReport.droppedIndexListLimit {
                report.droppedIndices.append(missing)
                missing += 1
            }
        }
    }

    /// The longest stretch of samples free of bursts (with `burstGuard` either side) after
    /// `frequencyLeadIn`.
    private func burstFreeStretch(onsets: [Double], sampleRate: Int, startTime: Double) -> Range<Int> {
        let rate = Double(sampleRate)
        let guardSamples = Int((Self.burstGuard * rate).rounded(.up))
        let burstSamples = Int((spec.burstDuration * rate).rounded(.up))
        var best = 0 ..< 0
        var gapStart = min(samples.count, Int((Self.frequencyLeadIn * rate).rounded()))
        for onset in onsets {
            let onsetSample = Int(((onset - startTime) * rate).rounded())
            let gapEnd = min(samples.count, max(gapStart, onsetSample - guardSamples))
            if gapEnd - gapStart > best.count { best = gapStart ..< gapEnd }
            gapStart = min(samples.count, max(gapStart, onsetSample + burstSamples + guardSamples))
        }
        if samples.count - gapStart > best.count { best = gapStart ..< samples.count }
        return best
    }

    /// Pairs each flash with the nearest unpaired burst within `pairingWindow`; leftovers on
    /// either side become one-sided markers. The second comes from the audio onset when there
    /// is one (it lands exactly on the second) and from the flash otherwise.
    static func pair(flashes: [Double], onsets: [Double]) -> [SyncMarker] {
        var used = [Bool](repeating: false, count: onsets.count)
        var markers: [SyncMarker] = []
        for flash in flashes {
            var nearest: Int?
            for (j, onset) in onsets.enumerated() where !used[j] && abs(onset - flash) <= pairingWindow {
                if nearest.map({ abs(onset - flash) < abs(onsets[$0] - flash) }) ?? true { nearest = j }
            }
            if let nearest {
                used[nearest] = true
                let onset = onsets[nearest]
                markers.append(SyncMarker(second: wholeSecond(onset), videoTime: flash, audioTime: onset))
            } else {
                markers.append(SyncMarker(second: wholeSecond(flash), videoTime: flash, audioTime: nil))
            }
        }
        for (j, onset) in onsets.enumerated() where !used[j] {
            markers.append(SyncMarker(second: wholeSecond(onset), videoTime: nil, audioTime: onset))
        }
        return markers.sorted {
            ($0.second, $0.videoTime ?? $0.audioTime ?? 0) < ($1.second, $1.videoTime ?? $1.audioTime ?? 0)
        }
    }

    /// The nearest whole second, saturating instead of trapping on absurd times.
    private static func wholeSecond(_ time: Double) -> Int {
        let rounded = time.rounded()
        return rounded.magnitude < 9e18 ? Int(rounded) : (rounded < 0 ? Int.min : Int.max)
    }
}
