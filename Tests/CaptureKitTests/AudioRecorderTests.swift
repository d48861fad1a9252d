import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Records the delegate's finish calls.
final class RecorderDelegateSpy: AudioRecorderDelegate, AudioPlayerDelegate {
    let finishes = Locked<[Bool]>([])
    func audioRecorderDidFinishRecording(_ recorder: AudioRecorder, successfully flag: Bool) { finishes.withLock { $0.append(flag) } }
    func audioPlayerDidFinishPlaying(_ player: AudioPlayer, successfully flag: Bool) { finishes.withLock { $0.append(flag) } }
}

enum AudioTestSupport {
    /// Starts and stops a virtual-pace session on `microphone`: "started", or why it could not.
    static func startAndStopASession(on microphone: CaptureDevice) -> String {
        let session = CaptureSession(pace: .virtual)
        do {
            try session.addInput(CaptureDeviceInput(device: microphone))
            try session.startRunning()
            session.stopRunning()
            return "started"
        } catch {
            return "\(error)"
        }
    }

    /// A registry whose `sim:mic` plays a 1 kHz tone at `level` dBFS (−∞ = silence), 48 kHz mono.
    static func registry(toneLevel level: Double) -> DeviceRegistry {
        // Profiles are data: write one for a microphone at this level (−1000 dB is silence in Float).
        let db = level.isFinite ? level : -1000
        let json = """
            {"uniqueID": "sim:mic", "name": "Tone Microphone", "modelID": "test", "mediaType": "audio",
             "position": "unspecified", "deviceType": "microphone",
             "audio": {"sampleRate": 48000, "channels": 1, "sampleFormat": "f32"},
             "tone": {"frequency": 1000, "levelDBFS": \(db)}}
            """
        let path = NSTemporaryDirectory() + "capturekit-mic-\(UUID().uuidString).json"
        // A test helper: failing to write the temporary profile is a broken machine, not a test result.
        try! Data(json.utf8).write(to: URL(fileURLWithPath: path))
        let microphone = try! SimulatedDeviceProfile.load(file: path)
        return DeviceRegistry(drivers: [SimulatorDriver(profiles: [microphone])])
    }

    static func decodeMono(_ path: String) throws -> (samples: [Float], rate: Int) {
        var samples: [Float] = []
        var rate = 0
        try MediaFileReader(path: path).decode(video: nil, audio: { chunk, channels, r, _ in
            rate = r
            samples += channels == 1 ? chunk : stride(from: 0, to: chunk.count, by: channels).map { chunk[$0] }
        })
        return (samples, rate)
    }
}

@Suite struct AudioRecorderTests {
    /// A −6 dBFS sine meters about −9 dB average (RMS) and −6 dB peak, while recording, and the
    /// WAV holds the same levels.
    @Test func meteringAMinus6dBFSToneWhileRecording() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/tone.wav"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav),
                                         registry: AudioTestSupport.registry(toneLevel: -6), pace: .virtual)
        let spy = RecorderDelegateSpy()
        recorder.delegate = spy
        recorder.isMeteringEnabled = true
        #expect(recorder.prepareToRecord())
        // Virtual time, no limit: the meters are read while the recording runs, whatever the load.
        #expect(recorder.record())
        try await eventually("recorder.currentTime >= 0.3", timeout: .seconds(30)) { recorder.currentTime >= 0.3 }
        #expect(recorder.isRecording, "stopped early: error \(String(describing: recorder.error)), \(recorder.currentTime) s")
        recorder.updateMeters()
        let average = recorder.averagePower(forChannel: 0), peak = recorder.peakPower(forChannel: 0)
        #expect(recorder.isRecording, "metering must be read while recording")
        #expect(abs(average - -9.03) < 0.5, "average \(average)")
        #expect(abs(peak - -6) < 0.5, "peak \(peak)")
        recorder.stop()
        #expect(!recorder.isRecording)
        try await eventually("!spy.finishes.withLock { $0 }.isEmpty", timeout: .seconds(30)) { !spy.finishes.withLock { $0 }.isEmpty }
        #expect(spy.finishes.withLock { $0 } == [true])

        let (samples, rate) = try await offPool { try AudioTestSupport.decodeMono(path) }
        #expect(rate == 48_000 && abs(Double(samples.count) / 48_000 - recorder.recordedDuration) < 1e-9)
        #expect(abs(ToneAnalysis.rmsDBFS(samples) - -9.03) < 0.1)
        #expect(abs(ToneAnalysis.peakDBFS(samples) - -6) < 0.1)
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.first?["codec_name"] as? String == "pcm_s16le")
        print("metering while recording a -6 dBFS tone: average \(average) dB, peak \(peak) dB")
    }

    @Test func silenceMetersAtTheFloorAndM4AIsAAC() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/silence.m4a"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .m4a, sampleRate: 44_100, channelCount: 2),
                                         registry: AudioTestSupport.registry(toneLevel: -.infinity))
        recorder.isMeteringEnabled = true
        #expect(recorder.record(forDuration: 0.5))
        await recorder.waitUntilFinished()
        recorder.updateMeters()
        #expect(recorder.averagePower(forChannel: 0) <= -120)
        #expect(recorder.peakPower(forChannel: 0) <= -120)
        let stream = try require(TestSupport.probeStreams(path).first)
        #expect(stream["codec_name"] as? String == "aac")
        #expect(stream["sample_rate"] as? String == "44100" && stream["channels"] as? Int == 2)
        let duration = Double(stream["duration"] as? String ?? "0") ?? 0
        #expect(abs(duration - 0.5) < 0.03, "duration \(duration)")
        #expect(recorder.recordedDuration == 0.5)  // record(forDuration:) is sample-accurate
    }

    /// A recording that reaches its duration frees the microphone before the delegate hears of it
    /// and before `waitUntilFinished` returns: a session started then gets the device. (Its session
    /// used to stop on another thread afterwards; under TSan the next session found the microphone
    /// still streaming, `deviceInUse`.)
    @Test func theMicrophoneIsFreeWhenARecordingOfAGivenDurationHasFinished() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let registry = AudioTestSupport.registry(toneLevel: -12)
        let microphone = try registry.device(uniqueID: "sim:mic")
        final class StartsASession: AudioRecorderDelegate {
            let microphone: CaptureDevice
            let outcomes = Locked<[String]>([])
            init(_ microphone: CaptureDevice) { self.microphone = microphone }
            func audioRecorderDidFinishRecording(_ recorder: AudioRecorder, successfully flag: Bool) {
                outcomes.withLock { $0.append(AudioTestSupport.startAndStopASession(on: microphone)) }
            }
        }
        // Even takes: the delegate starts a session in its callback. Odd takes: no delegate, the
        // test starts one as soon as `waitUntilFinished` returns (not both: they would compete).
        let delegate = StartsASession(microphone)
        for take in 0..<20 {
            let recorder = try AudioRecorder(path: dir + "/take\(take).wav", settings: AudioRecorderSettings(format: .wav),
                                             registry: registry)
            if take % 2 == 0 { recorder.delegate = delegate }
            #expect(recorder.record(forDuration: 0.05))
            await recorder.waitUntilFinished()
            #expect(recorder.recordedDuration == 0.05)
            if take % 2 == 0 {
                try await eventually("delegate.outcomes.withLock { $0.count } > take / 2", timeout: .seconds(30)) { delegate.outcomes.withLock { $0.count } > take / 2 }
            } else {
                #expect(AudioTestSupport.startAndStopASession(on: microphone) == "started", "take \(take), after waitUntilFinished")
            }
        }
        #expect(delegate.outcomes.withLock { $0 } == Array(repeating: "started", count: 10), "in the delegate's callback")
    }

    @Test func pauseStopDeleteAndOverwrite() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/take.wav"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8)))
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav), pace: .realtime)
        let spy = RecorderDelegateSpy()
        recorder.delegate = spy
        #expect(recorder.record())
        try await eventually("recorder.currentTime >= 0.2", timeout: .seconds(30)) { recorder.currentTime >= 0.2 }
        recorder.pause()
        #expect(!recorder.isRecording)
        let paused = recorder.currentTime
        try await Task.sleep(for: .milliseconds(200))
        #expect(abs(recorder.currentTime - paused) < 0.03)  // at most one buffer in flight when pausing
        #expect(!recorder.deleteRecording())  // only once stopped
        #expect(recorder.record())
        try await eventually("recorder.currentTime >= paused + 0.2", timeout: .seconds(30)) { recorder.currentTime >= paused + 0.2 }
        recorder.stop()
        #expect(recorder.currentTime == 0)
        let recorded = recorder.recordedDuration
        #expect(recorded >= 0.4, "recorded \(recorded)")
        let (samples, _) = try await offPool { try AudioTestSupport.decodeMono(path) }
        #expect(abs(Double(samples.count) / 48_000 - recorded) < 1e-6)  // the old file was replaced
        try await eventually("!spy.finishes.withLock { $0 }.isEmpty", timeout: .seconds(30)) { !spy.finishes.withLock { $0 }.isEmpty }
        #expect(spy.finishes.withLock { $0 } == [true])
        #expect(recorder.deleteRecording())
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(throws: CaptureError.self) { _ = try AudioRecorder(path: dir + "/x.wav", settings: AudioRecorderSettings(format: .wav, bitRate: 64_000)) }
        #expect(throws: CaptureError.self) { _ = try AudioRecorder(path: dir + "/x.wav", settings: AudioRecorderSettings(format: .wav), microphone: "sim:back") }
    }
}

@Suite struct AudioLoopbackTests {
    /// A WAV played into the simulated speaker, heard by `loop:mic` and recorded, gives back the
    /// very same samples.
    @Test func playedWAVLoopsBackSampleForSample() async throws {
        let dir = try TestSupport.temporaryDirectory()
        // The source: 1.5 s of the sync tone (16-bit, 48 kHz mono) made by the recorder itself.
        let source = dir + "/source.wav"
        let maker = try AudioRecorder(path: source, settings: AudioRecorderSettings(format: .wav))
        #expect(maker.record(forDuration: 1.5))
        await maker.waitUntilFinished()

        let speaker = SimulatedSpeaker()
        let registry = DeviceRegistry(drivers: [LoopbackDriver(speaker: speaker)])
        let player = try AudioPlayer(path: source, speaker: speaker)
        let spy = RecorderDelegateSpy()
        player.delegate = spy
        #expect(abs(player.duration - 1.5) < 1e-9)
        let looped = dir + "/looped.wav"
        let recorder = try AudioRecorder(path: looped, settings: AudioRecorderSettings(format: .wav),
                                         microphone: LoopbackDriver.microphoneID, registry: registry)
        #expect(player.play())
        #expect(recorder.record(forDuration: 1.5))
        await recorder.waitUntilFinished()
        await player.waitUntilStopped()
        try await eventually("!spy.finishes.withLock { $0 }.isEmpty", timeout: .seconds(30)) { !spy.finishes.withLock { $0 }.isEmpty }
        #expect(spy.finishes.withLock { $0 } == [true])
        #expect(speaker.playedFrameCount == 72_000)

        let original = try await offPool { try AudioTestSupport.decodeMono(source) }.samples
        let heard = try await offPool { try AudioTestSupport.decodeMono(looped) }.samples
        #expect(original.count == 72_000)
        #expect(heard == original, "first difference at \(String(describing: zip(heard, original).enumerated().first { $1.0 != $1.1 }?.offset))")
        print("loopback: \(heard.count) samples recorded, \(zip(heard, original).filter { $0 != $1 }.count) differ")
    }

    @Test func volumeRateLoopsAndMeteringShapeWhatTheSpeakerGets() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let source = dir + "/tone.wav"
        let maker = try AudioRecorder(path: source, settings: AudioRecorderSettings(format: .wav),
                                      registry: AudioTestSupport.registry(toneLevel: -6))
        #expect(maker.record(forDuration: 0.5))
        await maker.waitUntilFinished()

        let speaker = SimulatedSpeaker()
        let player = try AudioPlayer(path: source, speaker: speaker)
        player.volume = 0.5
        player.numberOfLoops = 1
        player.isMeteringEnabled = true
        #expect(player.play())
        await player.waitUntilStopped()
        #expect(speaker.playedFrameCount == 48_000)  // two plays of 0.5 s
        player.updateMeters()
        #expect(abs(player.peakPower(forChannel: 0) - -12.02) < 0.2)  // −6 dB tone at half volume
        #expect(abs(ToneAnalysis.rmsDBFS(speaker.playedSamples) - -15.05) < 0.2)

        let fast = SimulatedSpeaker()
        let double = try AudioPlayer(path: source, speaker: fast)
        double.enableRate = true
        double.rate = 2
        #expect(double.play())
        await double.waitUntilStopped()
        #expect(abs(fast.playedFrameCount - 12_000) <= 64, "\(fast.playedFrameCount)")
        let frequency = ToneAnalysis.dominantFrequency(samples: Array(fast.playedSamples[2000..<10_000]), sampleRate: 48_000) ?? 0
        #expect(abs(frequency - 2000) < 5, "rate 2 doubles the tone: \(frequency) Hz")

        // play(atTime:) waits on the speaker's clock.
        let later = SimulatedSpeaker()
        let delayed = try AudioPlayer(path: source, speaker: later)
        #expect(delayed.play(atTime: 0.25))
        await delayed.waitUntilStopped()
        #expect(later.playedFrameCount == 12_000 + 24_000)
        #expect(later.playedSamples[0..<12_000].allSatisfy { $0 == 0 })
    }
}
