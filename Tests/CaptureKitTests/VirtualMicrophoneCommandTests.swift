import CaptureKit
import Foundation
import Testing

/// `capture simulate --microphone … --audio-to …` and `capture audio play --device …` on the host,
/// through the real libasound: ALSA's `null` playback PCM takes the samples (snd-aloop, where
/// another program hears them, is exercised in the VM: Tests/CaptureDeviceTests/AudioLoopbackTests).
@Suite struct VirtualMicrophoneCommandTests {
    @Test func simulateWritesTheMicrophoneToAnALSAPlaybackPCM() throws {
        let result = try TestSupport.run(CommandLineTests.binary, ["simulate", "--microphone", "sim:mic", "--audio-to", "null", "--duration", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("writing sim:mic (48000 Hz, 1 ch) to null as S16_LE"), "\(result.stderr)")
        // One second of 1024-frame buffers in real time, however loaded the machine.
        let line = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("Wrote ") && $0.contains("audio frames") })
        let frames = try #require(Int(line.split(separator: " ")[1]))
        print("simulate → null: \(result.stdout)")
        #expect(frames >= 40_000 && frames <= 60_000, "\(line)")
        #expect(result.stdout.contains("dropped by the microphone: 0"))
    }

    @Test func aMissingPlaybackPCMAndBadArgumentsFailWithTypedErrors() throws {
        let missing = try TestSupport.run(CommandLineTests.binary, ["simulate", "--microphone", "sim:mic", "--audio-to", "hw:CaptureKitNone,0,0", "--duration", "1"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("hw:CaptureKitNone,0,0"), "\(missing.stderr)")
        let unpaired = try TestSupport.run(CommandLineTests.binary, ["simulate", "--microphone", "sim:mic"])
        #expect(unpaired.status != 0 && unpaired.stderr.contains("--microphone and --audio-to go together"), "\(unpaired.stderr)")
        let source = try TestSupport.run(CommandLineTests.binary, ["simulate", "--microphone", "sim:mic", "--audio-to", "null", "--data-source", "Top", "--duration", "1"])
        #expect(source.status != 0 && source.stderr.contains("has no data source 'Top' (it has: Front, Back, Bottom)"), "\(source.stderr)")
    }

    @Test func audioPlayPlaysToAnALSADevice() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let wav = dir + "/tone.wav"
        let recorder = try AudioRecorder(path: wav, settings: AudioRecorderSettings(format: .wav), registry: CaptureKit.makeRegistry(), pace: .virtual)
        #expect(recorder.record(forDuration: 0.25))
        await recorder.waitUntilFinished()
        let result = try TestSupport.run(CommandLineTests.binary, ["audio", "play", wav, "--device", "null"])
        #expect(result.status == 0, "\(result.stderr)")
        print("audio play → null: \(result.stdout)")
        #expect(result.stdout.contains("to null: 12000 frames at 48000 Hz"), "\(result.stdout)")
        #expect(result.stdout.contains("underruns"))
    }
}
