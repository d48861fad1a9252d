import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Seeds 002 and 003's audio flows, translated to Swift line by line (virtual time).
@Suite struct AudioSeedFlowTests {
    /// Seed 003, "record narration from the front microphone while filming with the back camera":
    /// configure the audio session, find the built-in mic port and its front data source, prefer
    /// them, then a capture session with the back camera and the default microphone records a movie.
    /// Measured: the movie's audio is the front mic's 500 Hz tone (the default mic hears 1 kHz) and
    /// its video is the back camera's 640x480.
    @Test func seed003FrontMicrophoneNarrationWithTheBackCamera() async throws {
        let rig = try DeviceRig(suffix: "seed003")

        // Configure the audio session
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        try audioSession.setCategory(.playAndRecord)
        try audioSession.setActive(true)

        // Find the desired input port
        let inputs = audioSession.availableInputs
        var builtInMic: AudioSessionPortDescription?
        for port in inputs where port.portType == .builtInMic {
            builtInMic = port
            break
        }

        // Find the desired microphone
        for source in builtInMic?.dataSources ?? [] where source.orientation == .front {
            try builtInMic?.setPreferredDataSource(source)
            try audioSession.setPreferredInput(builtInMic)
            break
        }
        #expect(audioSession.currentRoute.inputs.first?.selectedDataSource?.orientation == .front)

        // The capture session: back camera + microphone → movie file
        let captureSession = CaptureSession(pace: .virtual)
        try captureSession.setSessionPreset(.inputPriority)
        let cameraDevice = try require(rig.registry.defaultDevice(deviceType: .builtInWideAngleCamera, mediaType: .video, position: .back))
        let micDevice = try require(rig.registry.defaultDevice(for: .audio))
        #expect(cameraDevice.uniqueID == rig.id("sim:back"))
        let cameraDeviceInput = try CaptureDeviceInput(device: cameraDevice)
        let micDeviceInput = try CaptureDeviceInput(device: micDevice)
        if captureSession.canAddInput(cameraDeviceInput) { try captureSession.addInput(cameraDeviceInput) }
        if captureSession.canAddInput(micDeviceInput) { try captureSession.addInput(micDeviceInput) }
        let movieFileOutput = MovieFileOutput()
        movieFileOutput.maxRecordedDuration = MediaTime(seconds: 2, preferredTimescale: 600)
        if captureSession.canAddOutput(movieFileOutput) { try captureSession.addOutput(movieFileOutput) }
        try captureSession.startRunning()

        // Start recording
        let outputURL = try TestSupport.temporaryDirectory() + "/narration.mp4"
        let summary = try await movieFileOutput.record(to: outputURL)
        captureSession.stopRunning()

        let streams = try TestSupport.probeStreams(outputURL)
        let video = try require(streams.first { $0["codec_type"] as? String == "video" })
        #expect(video["width"] as? Int == 640 && video["height"] as? Int == 480)
        #expect(streams.contains { $0["codec_type"] as? String == "audio" })
        let (samples, rate) = try AudioTestSupport.decodeMono(outputURL)
        let narrationHz = try AudioSessionTestSupport.toneFrequency(samples, rate: rate)
        print("seed 003: \(summary.duration) s movie, narration tone \(narrationHz) Hz (front mic 500 Hz, default bottom 1000 Hz)")
        #expect(abs(narrationHz - 500) < 1)
    }

    /// Seed 002: set the session to play and record, record with metering, pause, resume, stop, and
    /// play the file back (AVAudioPlayer with a delegate and metering). Measured: meters while
    /// recording (−12 dBFS sine: average −15.05 dB, peak −12 dB), nothing recorded while paused,
    /// the file's length equals `recordedDuration`, and playback meters and plays the 1 kHz tone
    /// for as long as was recorded.
    @Test func seed002RecordWithMeteringPauseResumeStopAndPlayBack() async throws {
        let rig = try DeviceRig(suffix: "seed002")
        // Its own interruption domain: in the process-wide one, seed 003 activating its own
        // play-and-record session beside this test interrupted (paused) this recorder, which then
        // recorded nothing for 60 s (CI: meters −160 dB, paused at 0.0 s).
        let audioSession = AudioSession(registry: rig.registry, interruptionDomain: AudioInterruptionDomain())
        try audioSession.setCategory(.playAndRecord)
        try audioSession.setActive(true)

        // The recorder
        let path = try TestSupport.temporaryDirectory() + "/myRecord.m4a"
        let audioRecorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .m4a, sampleRate: 48_000, channelCount: 1),
                                              microphone: rig.id("sim:mic"), registry: rig.registry, pace: .virtual)
        audioRecorder.isMeteringEnabled = true
        #expect(audioRecorder.prepareToRecord())

        // Record, reading the meters while it records
        #expect(audioRecorder.record())
        try await eventually("audioRecorder.currentTime >= 0.5", timeout: .seconds(60)) { audioRecorder.currentTime >= 0.5 }
        audioRecorder.updateMeters()
        let average = audioRecorder.averagePower(forChannel: 0), peak = audioRecorder.peakPower(forChannel: 0)

        // Pause: time stands still
        audioRecorder.pause()
        let pausedAt = audioRecorder.currentTime
        #expect(!audioRecorder.isRecording)
        try await Task.sleep(for: .milliseconds(50))
        #expect(audioRecorder.currentTime == pausedAt)

        // Resume, then stop
        #expect(audioRecorder.record())
        try await eventually("audioRecorder.currentTime >= pausedAt + 0.5", timeout: .seconds(60)) { audioRecorder.currentTime >= pausedAt + 0.5 }
        audioRecorder.stop()
        await audioRecorder.waitUntilFinished()
        #expect(audioRecorder.error == nil)
        let recorded = audioRecorder.recordedDuration
        print("seed 002: meters while recording average \(average) dB, peak \(peak) dB; paused at \(pausedAt) s; recorded \(recorded) s")
        #expect(abs(average - -15.05) < 0.5)
        #expect(abs(peak - -12) < 0.5)
        #expect(recorded >= pausedAt + 0.5)

        // Play it back
        let speaker = SimulatedSpeaker()
        let audioPlayer = try AudioPlayer(path: path, speaker: speaker, audioSession: audioSession)
        let delegate = RecorderDelegateSpy()
        audioPlayer.numberOfLoops = 0
        audioPlayer.delegate = delegate
        audioPlayer.isMeteringEnabled = true
        #expect(audioPlayer.prepareToPlay())
        #expect(abs(audioPlayer.duration - recorded) < 0.001, "file \(audioPlayer.duration) s vs recorded \(recorded) s")
        #expect(audioPlayer.play())
        await audioPlayer.waitUntilStopped()
        try await eventually("!delegate.finishes.withLock { $0.isEmpty }", timeout: .seconds(30)) { !delegate.finishes.withLock { $0.isEmpty } }
        #expect(delegate.finishes.withLock { $0 } == [true])
        audioPlayer.updateMeters()
        let played = speaker.playedSamples
        let playedSeconds = Double(played.count) / 48_000
        // The tone of each stretch recorded in one go, measured apart: the microphone's phase need not
        // continue across the pause, and a window straddling that seam biases the peak (a window
        // over 0.16–0.84 s with the pause at 0.469 s read 1001.13 Hz once in CI).
        let seam = Int((pausedAt * 48_000).rounded()), margin = 2400
        // (Under CI's load the recorder has been seen paused at 0.064 s: a stretch can be short or empty.)
        let stretches = [(margin, seam - margin), (seam + margin, played.count - margin)]
            .filter { $0.1 - $0.0 >= 9600 }.map { $0.0..<$0.1 }
        let playedHz = try stretches.map { try require(ToneAnalysis.dominantFrequency(samples: played, sampleRate: 48_000, range: $0)) }
        print("seed 002 playback: \(playedSeconds) s, \(playedHz) Hz before and after the pause, average \(audioPlayer.averagePower(forChannel: 0)) dB")
        #expect(abs(playedSeconds - recorded) < 0.01)
        // The stretch after the pause is at least 0.5 s; the one before it is measured when it is 0.2 s or more.
        #expect(stretches.last?.lowerBound == seam + margin)
        #expect(!playedHz.isEmpty && playedHz.allSatisfy { abs($0 - 1000) < 1 }, "\(playedHz)")
        #expect(abs(audioPlayer.averagePower(forChannel: 0) - -15.05) < 0.5)
    }
}
