import CaptureAnalysis
import CaptureCore
import Testing

@Suite struct ToneAnalysisTests {
    @Test(arguments: [(48000, 0.0), (48000, 0.5), (44100, 0.0), (44100, 0.5)])
    func burstOnsetsLandWithinAMillisecond(sampleRate: Int, startTime: Double) {
        let audio = SyntheticTone.samples(duration: 3.0 - startTime, sampleRate: sampleRate, startTime: startTime)
        let onsets = ToneAnalysis.burstOnsets(samples: audio, sampleRate: sampleRate, startTime: startTime,
                                              spec: SyncToneSpec())
        #expect(onsets.count == 2, "\(onsets)")
        guard onsets.count == 2 else { return }
        #expect(abs(onsets[0] - 1.0) < 0.001, "\(onsets[0])")
        #expect(abs(onsets[1] - 2.0) < 0.001, "\(onsets[1])")
        // The half-plateau refinement does much better than the 1 ms requirement on clean input.
        #expect(onsets.allSatisfy { abs($0 - $0.rounded()) < 0.000_25 }, "\(onsets)")
    }

    @Test func quieterRecordingStillPlacesOnsetsPrecisely() {
        // 6 dB below the spec level: detection still fires and the half-plateau refinement
        // adapts to the actual burst level.
        var spec = SyncToneSpec()
        spec.toneLevelDBFS = -18
        let audio = SyntheticTone.samples(duration: 2.5, sampleRate: 48000, spec: spec)
        let onsets = ToneAnalysis.burstOnsets(samples: audio, sampleRate: 48000, startTime: 0, spec: SyncToneSpec())
        #expect(onsets.count == 2)
        #expect(onsets.allSatisfy { abs($0 - $0.rounded()) < 0.001 }, "\(onsets)")
    }

    @Test func toneWithoutBurstsHasNoOnsets() {
        let audio = SyntheticTone.samples(duration: 2.5, sampleRate: 48000, bursts: false)
        #expect(ToneAnalysis.burstOnsets(samples: audio, sampleRate: 48000, startTime: 0, spec: SyncToneSpec()).isEmpty)
        #expect(ToneAnalysis.burstOnsets(samples: [], sampleRate: 48000, startTime: 0, spec: SyncToneSpec()).isEmpty)
    }

    @Test(arguments: [1000.0, 997.0])
    func dominantFrequencyWithinOneHertz(frequency: Double) throws {
        let audio = SyntheticTone.samples(duration: 0.75, sampleRate: 48000, toneFrequency: frequency, bursts: false)
        let measured = try #require(ToneAnalysis.dominantFrequency(samples: audio, sampleRate: 48000))
        #expect(abs(measured - frequency) < 1, "\(measured)")
    }

    @Test func dominantFrequencyOfAChosenSegment() throws {
        // Burst at 1.0 s: the stretch before it reads 1 kHz, the burst itself reads 3 kHz.
        let audio = SyntheticTone.samples(duration: 1.2, sampleRate: 48000)
        let before = try #require(ToneAnalysis.dominantFrequency(samples: audio, sampleRate: 48000,
                                                                range: 4800 ..< 47_500, maxLength: 32768))
        #expect(abs(before - 1000) < 1, "\(before)")
        let burst = try #require(ToneAnalysis.dominantFrequency(samples: audio[48_000 ..< 50_400], sampleRate: 48000))
        #expect(abs(burst - 3000) < 25, "\(burst)")
    }

    @Test func dominantFrequencyNeedsSignal() {
        #expect(ToneAnalysis.dominantFrequency(samples: [Float](repeating: 0, count: 4096), sampleRate: 48000) == nil)
        #expect(ToneAnalysis.dominantFrequency(samples: [Float](repeating: 0.5, count: 10), sampleRate: 48000) == nil)
    }

    @Test func levelsOfAMinus12DBFSSine() {
        let audio = SyntheticTone.samples(duration: 0.5, sampleRate: 48000, bursts: false, noise: 0)
        #expect(abs(ToneAnalysis.rmsDBFS(audio) - (-15.0103)) < 0.01, "\(ToneAnalysis.rmsDBFS(audio))")
        #expect(abs(ToneAnalysis.peakDBFS(audio) - (-12)) < 0.01, "\(ToneAnalysis.peakDBFS(audio))")
        #expect(ToneAnalysis.rmsDBFS([Float](repeating: 0, count: 100)) == -160)
        #expect(ToneAnalysis.peakDBFS([]) == -160)
    }
}
