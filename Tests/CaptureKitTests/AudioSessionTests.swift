import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Collects an audio session's events (the callback form; the AsyncSequence is tested too).
final class AudioSessionEventLog: Sendable {
    let events = Locked<[AudioSessionEvent]>([])
    init(_ session: AudioSession) {
        session.addObserver { [weak self] event in self?.events.withLock { $0.append(event) } }
    }
    var routeChangeReasons: [AudioSessionRouteChangeReason] {
        events.withLock { $0.compactMap { if case .routeChange(let reason, _) = $0 { reason } else { nil } } }
    }
    var interruptions: [AudioSessionInterruption] {
        events.withLock { $0.compactMap { if case .interruption(let i) = $0 { i } else { nil } } }
    }
}

enum AudioSessionTestSupport {
    /// Records `seconds` (virtual time) from `microphone` to a WAV and returns its samples.
    static func recordWAV(_ rig: DeviceRig, microphone: String, seconds: Double, name: String) async throws -> (samples: [Float], rate: Int, path: String) {
        let path = try TestSupport.temporaryDirectory() + "/\(name).wav"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav), microphone: microphone,
                                         registry: rig.registry, pace: .virtual)
        #expect(recorder.record(forDuration: seconds), "refused: \(String(describing: recorder.error))")
        await recorder.waitUntilFinished()
        #expect(recorder.error == nil)
        let (samples, rate) = try AudioTestSupport.decodeMono(path)
        return (samples, rate, path)
    }

    /// The tone's frequency over 0.1…0.9 s (before the first sync burst at 1 s).
    static func toneFrequency(_ samples: [Float], rate: Int) throws -> Double {
        try require(ToneAnalysis.dominantFrequency(samples: samples, sampleRate: rate, range: (rate / 10)..<(rate * 9 / 10)))
    }
}

@Suite struct AudioSessionTests {
    /// Seed 002's table: each category permits or refuses recording (an AudioRecorder, a capture
    /// session with an audio input) and playback (an AudioPlayer), refusals as typed errors.
    @Test func categoriesPermitAndRefuseRecordingAndPlaybackAsTheTableSays() async throws {
        let rig = try DeviceRig(suffix: "categories")
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        #expect(audioSession.category == .playAndRecord, "default: what a capture session configures")
        let dir = try TestSupport.temporaryDirectory()
        // A short file to play.
        let wav = try await AudioSessionTestSupport.recordWAV(rig, microphone: rig.id("sim:mic"), seconds: 0.2, name: "source").path
        let table: [AudioSessionCategory: (record: Bool, play: Bool)] = [
            .ambient: (false, true), .soloAmbient: (false, true), .playback: (false, true),
            .record: (true, false), .playAndRecord: (true, true), .multiRoute: (true, true),
        ]
        for (category, allowed) in table.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            try audioSession.setCategory(category)
            try audioSession.setActive(true)
            // AudioRecorder
            let recorder = try AudioRecorder(path: dir + "/\(category.rawValue).wav", settings: AudioRecorderSettings(format: .wav),
                                             microphone: rig.id("sim:mic"), registry: rig.registry, pace: .virtual)
            let recorded = recorder.record(forDuration: 0.1)
            #expect(recorded == allowed.record, "\(category): AudioRecorder.record() → \(recorded)")
            if recorded {
                await recorder.waitUntilFinished()
                #expect(recorder.recordedDuration == 0.1)
            } else if case .audioCategoryRefuses(let name, _, let allowedBy)? = recorder.error {
                #expect(name == category.rawValue)
                #expect(allowedBy == "record, playAndRecord, multiRoute")
            } else {
                Issue.record("\(category): expected audioCategoryRefuses, got \(String(describing: recorder.error))")
            }
            // A capture session with an audio input.
            let session = CaptureSession(pace: .virtual)
            try session.addInput(CaptureDeviceInput(device: rig.device("sim:mic")))
            do {
                try session.startRunning()
                session.stopRunning()
                #expect(allowed.record, "\(category): a session with a microphone started")
            } catch {
                #expect(!allowed.record)
                guard case .audioCategoryRefuses = error else { Issue.record("\(category): \(error)"); continue }
            }
            // AudioPlayer
            let speaker = SimulatedSpeaker()
            let player = try AudioPlayer(path: wav, speaker: speaker, audioSession: audioSession)
            let played = player.play()
            #expect(played == allowed.play, "\(category): AudioPlayer.play() → \(played)")
            if played {
                await player.waitUntilStopped()
                #expect(speaker.playedFrameCount >= 9600, "\(category): played \(speaker.playedFrameCount) frames")
            } else {
                guard case .audioCategoryRefuses(_, _, let allowedBy)? = player.error else { Issue.record("\(category): \(String(describing: player.error))"); continue }
                #expect(allowedBy == "ambient, soloAmbient, playback, playAndRecord, multiRoute")
            }
        }
    }

    /// Seed 003's microphone selection: the built-in mic's front data source, made the preferred
    /// input, is what records — its 500 Hz tone, where the default (bottom) mic hears 1 kHz and the
    /// back one 1.5 kHz; the registry's default microphone follows the preferred input.
    @Test func preferredInputAndDataSourceSelectThePhonesFrontMicrophone() async throws {
        let rig = try DeviceRig(suffix: "frontmic")
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        let builtInMic = try require(audioSession.availableInputs.first { $0.portType == .builtInMic })
        #expect(builtInMic.uid == rig.id("sim:mic"))
        #expect(builtInMic.dataSources?.map(\.dataSourceName) == ["Front", "Back", "Bottom"])
        #expect(builtInMic.selectedDataSource?.orientation == .bottom)
        let before = try await AudioSessionTestSupport.recordWAV(rig, microphone: builtInMic.uid, seconds: 0.9, name: "bottom")
        let bottomHz = try AudioSessionTestSupport.toneFrequency(before.samples, rate: before.rate)

        let front = try require(builtInMic.dataSources?.first { $0.orientation == .front })
        try builtInMic.setPreferredDataSource(front)
        try audioSession.setPreferredInput(builtInMic)
        #expect(audioSession.currentRoute.inputs.first?.selectedDataSource == front)
        #expect(audioSession.preferredInput?.preferredDataSource == front)
        let mic = try require(rig.registry.defaultDevice(for: .audio))
        #expect(mic.uniqueID == builtInMic.uid)
        let after = try await AudioSessionTestSupport.recordWAV(rig, microphone: mic.uniqueID, seconds: 0.9, name: "front")
        let frontHz = try AudioSessionTestSupport.toneFrequency(after.samples, rate: after.rate)

        let back = try require(builtInMic.dataSources?.first { $0.orientation == .back })
        try audioSession.setInputDataSource(back)
        let backRecording = try await AudioSessionTestSupport.recordWAV(rig, microphone: mic.uniqueID, seconds: 0.9, name: "back")
        let backHz = try AudioSessionTestSupport.toneFrequency(backRecording.samples, rate: backRecording.rate)
        print("data sources measured: bottom \(bottomHz) Hz, front \(frontHz) Hz, back \(backHz) Hz")
        #expect(abs(bottomHz - 1000) < 1)
        #expect(abs(frontHz - 500) < 1)
        #expect(abs(backHz - 1500) < 1)
        // A data source the port does not have is refused.
        #expect(throws: CaptureError.self) {
            try builtInMic.setPreferredDataSource(AudioSessionDataSourceDescription(dataSourceID: 42, dataSourceName: "Top"))
        }
    }

    /// The simulator's gain stage really scales the samples: inputGain 0.5 records 6.02 dB lower.
    @Test func inputGainOfOneHalfHalvesTheRecordedRMS() async throws {
        let rig = try DeviceRig(suffix: "inputgain")
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        #expect(audioSession.isInputGainSettable)
        #expect(audioSession.inputGain == 1)
        let full = try await AudioSessionTestSupport.recordWAV(rig, microphone: rig.id("sim:mic"), seconds: 0.9, name: "unity")
        try audioSession.setInputGain(0.5)
        #expect(audioSession.inputGain == 0.5)
        let half = try await AudioSessionTestSupport.recordWAV(rig, microphone: rig.id("sim:mic"), seconds: 0.9, name: "half")
        let fullDB = ToneAnalysis.rmsDBFS(full.samples), halfDB = ToneAnalysis.rmsDBFS(half.samples)
        print("inputGain: unity \(fullDB) dBFS, 0.5 → \(halfDB) dBFS, difference \(halfDB - fullDB) dB")
        #expect(abs((halfDB - fullDB) - -6.0206) < 0.1)
        #expect(throws: CaptureError.self) { try audioSession.setInputGain(1.5) }
    }

    /// Plugging the simulated USB microphone in is `newDeviceAvailable`; preferring it makes it the
    /// route and the default microphone; unplugging it mid-recording is `oldDeviceUnavailable`
    /// (previous route: the USB mic), the route falls back to the built-in mic, and the recording
    /// finalizes a file ffprobe reads.
    @Test func unpluggingTheUSBMicrophoneIsARouteChangeAndTheRecordingIsPlayable() async throws {
        let rig = try DeviceRig(suffix: "usbmic")
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        let log = AudioSessionEventLog(audioSession)
        var stream = audioSession.notifications().makeAsyncIterator()
        let usb = rig.id("sim:usbmic")
        #expect(!audioSession.availableInputs.contains { $0.uid == usb }, "the USB mic starts unplugged")
        rig.scenario.connect(usb)
        let port = try require(audioSession.availableInputs.first { $0.uid == usb })
        #expect(port.portType == .usbAudio)
        #expect(log.routeChangeReasons == [.newDeviceAvailable])
        try audioSession.setPreferredInput(port)
        #expect(audioSession.currentRoute.inputs.map(\.uid) == [usb])
        let mic = try require(rig.registry.defaultDevice(for: .audio))
        #expect(mic.uniqueID == usb, "the default microphone follows the preferred input")

        let path = try TestSupport.temporaryDirectory() + "/usb.wav"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav), microphone: mic.uniqueID,
                                         registry: rig.registry, pace: .virtual)
        #expect(recorder.record())
        try await eventually("recorder.currentTime >= 0.5", timeout: .seconds(60)) { recorder.currentTime >= 0.5 }
        rig.scenario.disconnect(usb)
        await recorder.waitUntilFinished()
        #expect(log.routeChangeReasons == [.newDeviceAvailable, .override, .oldDeviceUnavailable])
        let unplugged = try require(log.events.withLock { $0.last })
        guard case .routeChange(.oldDeviceUnavailable, let previous) = unplugged else { Issue.record("\(unplugged)"); return }
        #expect(previous.inputs.map(\.uid) == [usb])
        #expect(audioSession.currentRoute.inputs.map(\.uid) == [rig.id("sim:mic")], "falls back to the built-in mic")
        // The AsyncSequence saw the same three.
        var reasons: [AudioSessionRouteChangeReason] = []
        for _ in 0..<3 { if case .routeChange(let reason, _)? = await stream.next() { reasons.append(reason) } }
        #expect(reasons == [.newDeviceAvailable, .override, .oldDeviceUnavailable])

        #expect(recorder.error == .deviceDisconnected(usb))
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.first?["codec_name"] as? String == "pcm_s16le")
        let (samples, rate) = try AudioTestSupport.decodeMono(path)
        print("USB recording until unplugged: \(Double(samples.count) / Double(rate)) s, recordedDuration \(recorder.recordedDuration) s")
        #expect(samples.count >= rate / 2)
        #expect(abs(try AudioSessionTestSupport.toneFrequency(samples, rate: rate) - 2000) < 1, "the USB mic's 2 kHz tone")
    }

    /// Activating a category that does not mix interrupts the other active session; deactivating
    /// with notifyOthers ends the interruption (shouldResume).
    @Test func activatingANonMixingSessionInterruptsTheOther() throws {
        // Their own interruption domain: sessions of tests running in parallel stay out of it.
        let domain = AudioInterruptionDomain()
        let a = AudioSession(registry: try DeviceRig(suffix: "interrupta").registry, interruptionDomain: domain)
        let b = AudioSession(registry: try DeviceRig(suffix: "interruptb").registry, interruptionDomain: domain)
        let log = AudioSessionEventLog(a)
        try a.setCategory(.playback)
        try a.setActive(true)
        try b.setCategory(.ambient)
        try b.setActive(true)
        #expect(log.interruptions.isEmpty, "ambient mixes")
        try b.setCategory(.playAndRecord)
        try b.setActive(true)
        #expect(log.interruptions == [.began])
        #expect(!a.isActive)
        try b.setActive(false, notifyOthers: true)
        #expect(log.interruptions == [.began, .ended(shouldResume: true)])
        #expect(log.routeChangeReasons == [.categoryChange])
    }
}

/// Counts the audio buffers a session delivers (their sizes), until it has `limit` of them.
final class BufferSizeProbe: CaptureOutput, Sendable {
    let attachment = OutputAttachment()
    let sizes = Locked<[Int]>([])
    let limit: Int
    init(limit: Int) { self.limit = limit }
    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .audio }
    var demand: OutputDemand { sizes.withLock { $0.count } < limit ? .ready : .idle }
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let full = sizes.withLock { s -> Bool in
            if s.count < limit, let buffer = sample.audioBuffer { s.append(buffer.frameLength) }
            return s.count >= limit
        }
        if full { attachment.demandChanged() }
    }
    func sessionDidStop() {}
}

@Suite struct AudioSessionIOBufferTests {
    /// preferredIOBufferDuration 5 ms makes a capture session's microphone deliver 240-frame buffers
    /// at 48 kHz (1024 without a preference).
    @Test func thePreferredIOBufferDurationSetsTheMicrophonesBufferSize() async throws {
        let rig = try DeviceRig(suffix: "iobuffer")
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        #expect(abs(audioSession.ioBufferDuration - 1024.0 / 48_000) < 1e-9)
        for (duration, expected) in [(0.0, 1024), (0.005, 240)] {
            try audioSession.setPreferredIOBufferDuration(duration)
            let session = CaptureSession(pace: .virtual)
            try session.addInput(CaptureDeviceInput(device: rig.device("sim:mic")))
            let probe = BufferSizeProbe(limit: 10)
            try session.addOutput(probe)
            try session.startRunning()
            try await eventually("probe.sizes.withLock { $0.count } >= 10", timeout: .seconds(30)) { probe.sizes.withLock { $0.count } >= 10 }
            session.stopRunning()
            #expect(probe.sizes.withLock { $0 } == Array(repeating: expected, count: 10), "preferred \(duration) s")
        }
        #expect(abs(audioSession.ioBufferDuration - 0.005) < 1e-9)
        #expect(throws: CaptureError.self) { try audioSession.setPreferredIOBufferDuration(-1) }
    }
}

@Suite struct AudioSessionInterruptionTests {
    /// An interruption (another session that does not mix becomes active) pauses a recording of the
    /// interrupted session, as AVAudioRecorder does: its time stands still; record() resumes it after
    /// the interruption ends.
    @Test func anInterruptionPausesTheRecorder() async throws {
        let domain = AudioInterruptionDomain()
        let rig = try DeviceRig(suffix: "interruptrecorder")
        let mine = AudioSession(registry: rig.registry, interruptionDomain: domain)
        let other = AudioSession(registry: try DeviceRig(suffix: "interruptother").registry, interruptionDomain: domain)
        try mine.setActive(true)
        let path = try TestSupport.temporaryDirectory() + "/interrupted.wav"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav), microphone: rig.id("sim:mic"),
                                         registry: rig.registry, pace: .virtual)
        #expect(recorder.record())
        try await eventually("recorder.currentTime >= 0.3", timeout: .seconds(30)) { recorder.currentTime >= 0.3 }
        try other.setActive(true)
        #expect(!recorder.isRecording, "paused by the interruption")
        let pausedAt = recorder.currentTime
        try await Task.sleep(for: .milliseconds(50))
        #expect(recorder.currentTime == pausedAt)
        try other.setActive(false, notifyOthers: true)
        #expect(recorder.record())
        try await eventually("recorder.currentTime >= pausedAt + 0.3", timeout: .seconds(30)) { recorder.currentTime >= pausedAt + 0.3 }
        recorder.stop()
        await recorder.waitUntilFinished()
        #expect(recorder.error == nil)
        print("interrupted at \(pausedAt) s, recorded \(recorder.recordedDuration) s")
        #expect(recorder.recordedDuration >= pausedAt + 0.3)
    }
}
