import CaptureKit
import CaptureKitTesting
import Foundation
import Testing
@testable import CaptureALSA

final class PlaybackDelegateSpy: AudioPlayerDelegate {
    let finishes = Locked<[Bool]>([])
    func audioPlayerDidFinishPlaying(_ player: AudioPlayer, successfully flag: Bool) { finishes.withLock { $0.append(flag) } }
}

/// ALSA playback (`AudioPlayer` → `ALSAPlaybackDevice`) and the mixer capture volume behind the
/// audio session's input gain, against the fake sound card: what reaches the card sample by
/// sample, underrun recovery, and an unplug.
@Suite struct ALSAPlaybackTests {
    static let mono = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32)

    /// A 0.5 s mono WAV of the simulator's 1 kHz tone (−12 dBFS) and its samples.
    static func sourceWAV() async throws -> (path: String, samples: [Float]) {
        let dir = NSTemporaryDirectory() + "capturekit-alsaplay-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/source.wav"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav), microphone: "sim:mic",
                                         registry: DeviceRegistry(drivers: [SimulatorDriver()]), pace: .virtual)
        #expect(recorder.record(forDuration: 0.5))
        await recorder.waitUntilFinished()
        var samples: [Float] = []
        try MediaFileReader(path: path).decode(video: nil, audio: { chunk, _, _, _ in samples += chunk })
        return (path, samples)
    }

    /// The audio session's input gain on a real card is the mixer's capture volume: 48 of 0…64
    /// reads as 0.75, and 0.5 sets 32.
    @Test func theMixerCaptureVolumeIsTheSessionsInputGain() throws {
        let fake = FakeALSA()
        let registry = DeviceRegistry(drivers: [ALSADriver(system: fake)])
        let session = AudioSession(registry: registry, interruptionDomain: AudioInterruptionDomain())
        let port = try #require(session.availableInputs.first)
        #expect(port.uid == FakeALSA.pcmName)
        #expect(port.portType == .builtInMic)
        #expect(session.currentRoute.inputs.map(\.uid) == [FakeALSA.pcmName])
        #expect(session.isInputGainSettable)
        #expect(session.inputGain == 0.75)
        try session.setInputGain(0.5)
        #expect(fake.state.withLock { $0.mixer?.value } == 32)
        #expect(fake.trace.contains("mixer hw:Fake set 32"))
        #expect(session.inputGain == 0.5)
        // A card without a capture volume: not settable, and setting it is a typed error.
        fake.state.withLock { $0.mixer = nil }
        #expect(!session.isInputGainSettable)
        #expect(throws: CaptureError.self) { try session.setInputGain(0.5) }
    }

    /// `AudioPlayer` plays a WAV into an ALSA playback PCM: every sample reaches the card, scaled
    /// by the volume (float32 on a card that takes it, S16 on one that does not), and playback
    /// drains and closes the PCM.
    @Test(arguments: [true, false]) func audioPlayerPlaysAWAVIntoAnALSAPlaybackPCM(cardTakesFloat: Bool) async throws {
        let (path, source) = try await Self.sourceWAV()
        let fake = FakeALSA()
        fake.state.withLock { $0.playbackTakesFloat = cardTakesFloat }
        let driver = ALSADriver(system: fake)
        let device = driver.playbackDevice(name: FakeALSA.pcmName, format: Self.mono)
        let player = try AudioPlayer(path: path, output: device, pace: .realtime, audioSession: AudioSession(registry: DeviceRegistry(drivers: [driver]), interruptionDomain: AudioInterruptionDomain()))
        let delegate = PlaybackDelegateSpy()
        player.delegate = delegate
        player.volume = 0.5
        #expect(player.play())
        await player.waitUntilStopped()
        try await eventually("!delegate.finishes.withLock { $0.isEmpty }", timeout: .seconds(30)) { !delegate.finishes.withLock { $0.isEmpty } }
        #expect(delegate.finishes.withLock { $0 } == [true])
        let played = fake.played
        #expect(played.count == source.count)
        let worst = zip(played, source).map { abs($0 - $1 * 0.5) }.max() ?? 1
        print("ALSA playback (\(cardTakesFloat ? "float32" : "S16") card): \(played.count) frames, worst difference from source × 0.5: \(worst)")
        #expect(worst < (cardTakesFloat ? 1e-6 : 1e-4))
        #expect(fake.trace.contains("hw_params 48000 Hz 1 ch \(cardTakesFloat ? "float32" : "s16") period 960"))
        #expect(Array(fake.controlTrace.suffix(2)) == ["drain", "close"])
        #expect(device.playedFrameCount == source.count)
        #expect(abs(player.deviceCurrentTime - 0.5) < 0.001)
    }

    /// An underrun (EPIPE on a write) is recovered with snd_pcm_recover and counted; no sample is lost.
    @Test func anUnderrunIsRecoveredAndCounted() async throws {
        let (path, source) = try await Self.sourceWAV()
        let fake = FakeALSA()
        fake.injectWrites([nil, nil, .brokenPipe])
        let driver = ALSADriver(system: fake)
        let device = driver.playbackDevice(name: FakeALSA.pcmName, format: Self.mono)
        let player = try AudioPlayer(path: path, output: device, pace: .realtime, audioSession: AudioSession(registry: DeviceRegistry(drivers: [driver]), interruptionDomain: AudioInterruptionDomain()))
        #expect(player.play())
        await player.waitUntilStopped()
        #expect(device.underrunCount == 1)
        #expect(fake.trace.contains("writei 1024 → EPIPE"))
        #expect(fake.trace.contains("recover EPIPE"))
        #expect(fake.played.count == source.count)
        #expect(player.error == nil)
    }

    /// Unplugged mid-play (ENODEV on a write): playback ends with `deviceDisconnected`, the
    /// delegate hears `successfully: false`, and the audio session posts a route change
    /// `oldDeviceUnavailable` whose previous route's output is the card.
    @Test func anUnpluggedPlaybackDeviceEndsPlaybackWithATypedErrorAndARouteChange() async throws {
        let (path, _) = try await Self.sourceWAV()
        let fake = FakeALSA()
        fake.injectWrites([nil, nil, .noDevice])
        let driver = ALSADriver(system: fake)
        let session = AudioSession(registry: DeviceRegistry(drivers: [driver]), interruptionDomain: AudioInterruptionDomain())
        let changes = Locked<[(AudioSessionRouteChangeReason, [String])]>([])
        session.addObserver { event in
            if case .routeChange(let reason, let previous) = event { changes.withLock { $0.append((reason, previous.outputs.map(\.uid))) } }
        }
        let device = driver.playbackDevice(name: FakeALSA.pcmName, format: Self.mono)
        let player = try AudioPlayer(path: path, output: device, pace: .realtime, audioSession: session)
        let delegate = PlaybackDelegateSpy()
        player.delegate = delegate
        #expect(player.play())
        await player.waitUntilStopped()
        try await eventually("!delegate.finishes.withLock { $0.isEmpty }", timeout: .seconds(30)) { !delegate.finishes.withLock { $0.isEmpty } }
        #expect(player.error == .deviceDisconnected(FakeALSA.pcmName))
        #expect(delegate.finishes.withLock { $0 } == [false])
        #expect(fake.played.count == 2048, "two writes reached the card before the unplug")
        let seen = changes.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.first?.0 == .oldDeviceUnavailable)
        #expect(seen.first?.1 == [FakeALSA.pcmName])
        #expect(fake.openHandles == 0)
        // Playing again on the unplugged card is refused with a typed error.
        #expect(!player.play())
        #expect(player.error != nil)
    }
}

/// The virtual microphone's output (what `capture simulate --microphone --audio-to` runs) against
/// the fake card, in virtual time: what reaches the playback PCM is the simulated microphone's
/// signal, sample for sample — the analyzer finds the 1 kHz tone and the bursts on the second.
@Suite struct VirtualMicrophoneTests {
    @Test func theSimulatedMicrophoneReachesTheALSAPlaybackPCM() async throws {
        let fake = FakeALSA()
        let driver = ALSADriver(system: fake)
        let registry = DeviceRegistry(drivers: [SimulatorDriver(), driver])
        let mic = try registry.device(uniqueID: "sim:mic")
        let format = try #require(mic.activeFormat.audioFormat)
        let sink = driver.playbackDevice(name: FakeALSA.pcmName, format: format, cardSampleFormat: .int16)
        let output = AudioLoopbackOutput(sink: sink)
        let session = CaptureSession(pace: .virtual)
        try session.addInput(CaptureDeviceInput(device: mic))
        try session.addOutput(output)
        try session.startRunning()
        try await eventually("output.statistics.framesWritten >= 48_000 * 5 / 2", timeout: .seconds(30)) { output.statistics.framesWritten >= 48_000 * 5 / 2 }
        session.stopRunning()
        let stats = output.statistics
        let played = fake.played
        #expect(stats.error == nil)
        #expect(played.count == stats.framesWritten)
        #expect(fake.trace.contains("hw_params 48000 Hz 1 ch s16 period 960"))
        #expect(Array(fake.controlTrace.suffix(2)) == ["drain", "close"])
        let tone = try #require(ToneAnalysis.dominantFrequency(samples: played, sampleRate: 48_000, range: 4800..<43200))
        let onsets = ToneAnalysis.burstOnsets(samples: played, sampleRate: 48_000, startTime: 0)
        print("virtual microphone → fake PCM: \(played.count) frames, tone \(tone) Hz, bursts at \(onsets) s, underruns \(stats.underruns)")
        #expect(abs(tone - 1000) < 1)
        #expect(onsets.count >= 2)
        for (i, onset) in onsets.prefix(2).enumerated() { #expect(abs(onset - Double(i + 1)) < 0.001) }
        // The samples are the generator's, through S16.
        let generator = ToneGenerator(spec: SyncToneSpec(), sampleRate: 48_000)
        let worst = (0..<48_000).map { abs(played[$0] - generator.sample(Int64($0))) }.max() ?? 1
        #expect(worst < 1e-4)
    }
}

@Suite struct ALSACaptureSourceTests {
    /// A card's capture-source selector is its port's data sources: selecting "Front Mic" through
    /// the audio session sets the mixer's enumerated element.
    @Test func theCaptureSourceSelectorIsThePortsDataSources() throws {
        let fake = FakeALSA()
        fake.state.withLock { $0.captureSources = ALSACaptureSources(element: "Capture Source", items: ["Mic", "Line", "Front Mic"], selected: 0) }
        let session = AudioSession(registry: DeviceRegistry(drivers: [ALSADriver(system: fake)]), interruptionDomain: AudioInterruptionDomain())
        let port = try #require(session.availableInputs.first)
        #expect(port.dataSources?.map(\.dataSourceName) == ["Mic", "Line", "Front Mic"])
        #expect(port.selectedDataSource?.dataSourceName == "Mic")
        let front = try #require(port.dataSources?.first { $0.orientation == .front })
        try port.setPreferredDataSource(front)
        #expect(fake.state.withLock { $0.captureSources?.selected } == 2)
        #expect(fake.trace.contains("mixer hw:Fake source 2"))
        #expect(session.currentRoute.inputs.first?.selectedDataSource?.dataSourceName == "Front Mic")
    }
}
