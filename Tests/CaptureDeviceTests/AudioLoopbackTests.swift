import CaptureKit
import Foundation
import Testing

/// The audio half on snd-aloop (inside ci/vm-run): CaptureKit plays into `hw:Loopback,0,0` and a
/// program reads `hw:Loopback,1,0`, sample for sample.
@Suite(.serialized, .enabled(if: DeviceEnvironment.available, DeviceEnvironment.skipReason))
struct AudioLoopbackTests {
    static let rate = 48_000

    /// `.build/release/capture` when it exists (CAPTUREKIT_CAPTURE_TOOL overrides), else the debug one beside the tests.
    static var fastestCaptureTool: String {
        if let chosen = ProcessInfo.processInfo.environment["CAPTUREKIT_CAPTURE_TOOL"], FileManager.default.isExecutableFile(atPath: chosen) { return chosen }
        let debug = DeviceEnvironment.captureTool
        let release = URL(fileURLWithPath: debug).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("release/capture").path
        return FileManager.default.isExecutableFile(atPath: release) ? release : debug
    }

    /// Collects a pipe's output on a thread of its own, so a test can wait for a line while the tool runs.
    final class PipeCollector: Sendable {
        private let state = Locked((data: Data(), done: false))
        /// Taken around each update and each check, so a waiter never misses a wake-up.
        private let condition = NSCondition()
        init(_ pipe: Pipe) {
            let handle = pipe.fileHandleForReading
            Thread { [state, condition] in
                while true {
                    let chunk = handle.availableData
                    condition.lock()
                    state.withLock { if chunk.isEmpty { $0.done = true } else { $0.data.append(chunk) } }
                    condition.broadcast()
                    condition.unlock()
                    if chunk.isEmpty { break }
                }
            }.start()
        }
        var text: String { state.withLock { String(decoding: $0.data, as: UTF8.self) } }
        /// Waits (up to `seconds`) until the output contains `marker`: woken by each chunk read.
        func wait(for marker: String, seconds: Double = 60) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            condition.lock(); defer { condition.unlock() }
            while !text.contains(marker) {
                if state.withLock({ $0.done }) || !condition.wait(until: deadline) { return text.contains(marker) }
            }
            return true
        }
        /// The whole output once the pipe closed (the tool exited).
        func finalText() -> String {
            condition.lock(); defer { condition.unlock() }
            while !state.withLock({ $0.done }) { condition.wait() }
            return text
        }
    }

    /// Mono samples of a WAV (or any file with audio) as float.
    static func decode(_ path: String) throws -> [Float] {
        var samples: [Float] = []
        try MediaFileReader(path: path).decode(video: nil, audio: { chunk, channels, _, _ in
            samples += channels == 1 ? chunk : stride(from: 0, to: chunk.count, by: channels).map { chunk[$0] }
        })
        return samples
    }

    /// Must-show 1: `capture simulate` plays sim:mic into hw:Loopback,0,0; arecord (alsa-utils, not
    /// CaptureKit) records 5 s from hw:Loopback,1,0; the analyzer finds the 1 kHz tone and 4–5
    /// bursts spaced 1.000 s ± 2 ms. The simulator's own report (late writes, underruns) is printed.
    @Test func arecordHearsTheSimulatedMicrophoneOnTheLoopback() throws {
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: DeviceEnvironment.captureTool)
        // 0.25 s written ahead: the single emulated vCPU (TCG) stalls the writer for more than the default 0.1 s.
        tool.arguments = ["simulate", "--microphone", "sim:mic", "--audio-to", DeviceEnvironment.loopbackPlayback, "--audio-latency", "0.25", "--duration", "60"]
        let stdout = Pipe(), stderr = Pipe()
        tool.standardOutput = stdout
        tool.standardError = stderr
        let messagesPipe = PipeCollector(stderr), summaryPipe = PipeCollector(stdout)
        try tool.run()
        defer { if tool.isRunning { tool.terminate(); tool.waitUntilExit() } }
        // The writer has opened the PCM (setting the format the capture side then shares) and its
        // session runs: from here arecord hears the tone from its first sample.
        #expect(messagesPipe.wait(for: "writing sim:mic"), "capture simulate never started: \(messagesPipe.text)")
        // The writer's PCM runs (was: a fixed 0.3 s sleep).
        try DeviceEnvironment.eventuallyBlocking("capture simulate to play into the loopback", within: .seconds(30)) {
            DeviceEnvironment.loopbackIsPlaying
        }
        let out = dir + "/arecord.wav"
        let r = try DeviceEnvironment.run("timeout", ["-k", "5", "40", "arecord", "-q", "-D", DeviceEnvironment.loopbackCapture,
                                                     "-f", "S16_LE", "-r", "48000", "-c", "1", "-d", "5", out])
        tool.interrupt()
        tool.waitUntilExit()
        let summary = summaryPipe.finalText(), messages = messagesPipe.finalText()
        print("capture simulate: \(messages)\(summary)")
        #expect(r.status == 0, "arecord: \(r.stderr)")
        #expect(tool.terminationStatus == 0)
        #expect(summary.contains("dropped by the microphone: 0"))
        let samples = try Self.decode(out)
        #expect(samples.count == 5 * Self.rate, "arecord recorded \(samples.count) frames")
        let tone = try #require(ToneAnalysis.dominantFrequency(samples: samples, sampleRate: Self.rate))
        let onsets = ToneAnalysis.burstOnsets(samples: samples, sampleRate: Self.rate, startTime: 0)
        let spacings = zip(onsets.dropFirst(), onsets).map { $0 - $1 }
        print("arecord on \(DeviceEnvironment.loopbackCapture): \(samples.count) frames, tone \(tone) Hz, level \(ToneAnalysis.rmsDBFS(samples)) dBFS, "
              + "bursts at \(onsets.map { String(format: "%.4f", $0) }.joined(separator: " ")) s, spacings \(spacings.map { String(format: "%.5f", $0) }.joined(separator: " ")) s")
        #expect(abs(tone - 1000) < 2)
        #expect((4...5).contains(onsets.count))
        for spacing in spacings { #expect(abs(spacing - 1) <= 0.002, "spacing \(spacing) s") }
    }

    /// Must-show 3: `AudioPlayer` plays a WAV (seeded noise, so the correlation has one peak) into
    /// hw:Loopback,0,0 while CaptureKit's ALSA backend records hw:Loopback,1,0 (an AudioRecorder on
    /// it): the normalized cross-correlation of the recording against the source peaks ≥ 0.99.
    @Test func audioPlayerIntoTheLoopbackIsRecordedBackByTheALSABackend() async throws {
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 2 s of noise at about −12 dBFS, mono S16.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15  // xorshift64*: the same noise every run
        func nextUnit() -> Double {
            state ^= state >> 12; state ^= state << 25; state ^= state >> 27
            return Double((state &* 0x2545_F491_4F6C_DD1D) >> 11) / Double(1 << 53)
        }
        let source = (0..<(2 * Self.rate)).map { _ in Float(Int16((nextUnit() * 2 - 1) * 8192)) / 32768 }
        let sourcePath = dir + "/noise.wav"
        try Self.writeWAV(source, to: sourcePath)

        let registry = DeviceRegistry(drivers: [ALSADriver()])
        let recordedPath = dir + "/recorded.wav"
        let recorder = try AudioRecorder(path: recordedPath, settings: AudioRecorderSettings(format: .wav),
                                         microphone: DeviceEnvironment.loopbackCapture, registry: registry, pace: .realtime)
        let format = try #require(recorder.microphone.activeFormat.audioFormat)
        #expect(recorder.record())
        // The recorder's capture PCM runs before the player starts (was: a fixed 0.3 s sleep).
        try await DeviceEnvironment.eventually("the recorder to capture from the loopback", within: .seconds(30)) {
            DeviceEnvironment.loopbackIsCapturing
        }
        let sink = try ALSAPlaybackDevice(name: DeviceEnvironment.loopbackPlayback,
                                          format: AudioStreamFormat(sampleRate: format.sampleRate, channelCount: format.channelCount, sampleFormat: .float32))
        let player = try AudioPlayer(path: sourcePath, output: sink, pace: .realtime, audioSession: AudioSession(registry: registry, interruptionDomain: AudioInterruptionDomain()))
        #expect(player.play(), "\(String(describing: player.error))")
        await player.waitUntilStopped()  // after the card drained: the last sample has been played
        // Half a second more of the recording (its own clock, not the wall's: a slow vCPU reads
        // late), so the loopback's tail has reached it (was: a fixed 0.5 s sleep).
        let tail = recorder.currentTime + 0.5
        try await DeviceEnvironment.eventually("0.5 s more of the recording after the playback", within: .seconds(30)) {
            recorder.currentTime >= tail
        }
        recorder.stop()
        await recorder.waitUntilFinished()
        #expect(player.error == nil)
        #expect(recorder.error == nil)
        let recorded = try Self.decode(recordedPath)
        let (peak, lag) = Self.crossCorrelationPeak(source: source, recording: recorded)
        print("AudioPlayer → \(DeviceEnvironment.loopbackPlayback) → ALSA backend on \(DeviceEnvironment.loopbackCapture) (\(format)): "
              + "recorded \(recorded.count) frames, underruns \(sink.underrunCount), cross-correlation peak \(peak) at lag \(lag) frames (\(Double(lag) / Double(Self.rate)) s)")
        #expect(peak >= 0.99)
    }

    /// The normalized cross-correlation's peak and its lag: the lag is first estimated where the
    /// recording first exceeds a quarter of the source's peak (the noise starts abruptly), then
    /// refined over ±64 frames.
    static func crossCorrelationPeak(source: [Float], recording: [Float]) -> (Double, Int) {
        let threshold = (source.map(abs).max() ?? 0) / 4
        let firstSource = source.firstIndex { abs($0) >= threshold } ?? 0
        guard let firstRecorded = recording.firstIndex(where: { abs($0) >= threshold }) else { return (0, 0) }
        let estimate = firstRecorded - firstSource
        let sourceEnergy = source.reduce(0.0) { $0 + Double($1) * Double($1) }
        var best = (0.0, 0)
        source.withUnsafeBufferPointer { s in
            recording.withUnsafeBufferPointer { r in
                for lag in max(0, estimate - 64)...max(0, estimate + 64) {
                    guard lag + s.count <= r.count else { break }
                    var dot = 0.0, energy = 0.0
                    for i in 0..<s.count {
                        let y = Double(r[lag + i])
                        dot += Double(s[i]) * y
                        energy += y * y
                    }
                    let value = energy > 0 ? dot / (sourceEnergy * energy).squareRoot() : 0
                    if value > best.0 { best = (value, lag) }
                }
            }
        }
        return best
    }

    static func writeWAV(_ samples: [Float], to path: String) throws {
        var data = Data()
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); u32(UInt32(36 + samples.count * 2)); data.append(contentsOf: Array("WAVE".utf8))
        data.append(contentsOf: Array("fmt ".utf8)); u32(16); u16(1); u16(1); u32(UInt32(rate)); u32(UInt32(rate * 2)); u16(2); u16(16)
        data.append(contentsOf: Array("data".utf8)); u32(UInt32(samples.count * 2))
        for s in samples { u16(UInt16(bitPattern: Int16((s * 32768).rounded()))) }
        try data.write(to: URL(fileURLWithPath: path))
    }

    /// Must-show 2: `capture simulate` with camera and microphone together (one real-time session:
    /// sim:back → the v4l2loopback node, sim:mic → hw:Loopback,0,0); ffmpeg records both
    /// (`-f v4l2 -i NODE -f alsa -i hw:Loopback,1,0`) and `capture inspect` on ffmpeg's file reports
    /// the A/V offset at each marker — ffmpeg's own capture sync, reported, not judged.
    @Test func ffmpegRecordsTheVirtualCameraAndMicrophoneAndInspectMeasuresTheirSync() throws {
        let node = try DeviceEnvironment.requireLoopback()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tool = Process()
        // Under TCG's one emulated vCPU the debug build renders about 2 of 15 frames a second (and
        // starves the microphone), the release build about 10: so 5 fps, and the release build
        // (`swift build -c release`) when there is one, as for ci/vm/record-vivid-fixture.
        tool.executableURL = URL(fileURLWithPath: Self.fastestCaptureTool)
        tool.arguments = ["simulate", "--camera", "sim:back", "--to", node, "--format", "640x480@5:YUYV",
                          "--microphone", "sim:mic", "--audio-to", DeviceEnvironment.loopbackPlayback, "--audio-latency", "0.25", "--duration", "90"]
        let stdout = Pipe(), stderr = Pipe()
        tool.standardOutput = stdout
        tool.standardError = stderr
        try tool.run()
        defer { if tool.isRunning { tool.terminate(); tool.waitUntilExit() } }
        try DeviceEnvironment.waitForCapture(node)
        // Both halves run before ffmpeg opens them: the camera node offers capture (above) and the
        // writer plays into the loopback (was: a fixed 1 s sleep).
        try DeviceEnvironment.eventuallyBlocking("capture simulate to play into the loopback", within: .seconds(30)) {
            DeviceEnvironment.loopbackIsPlaying
        }
        let movie = dir + "/ffmpeg.mkv"
        let r = try DeviceEnvironment.run("timeout", ["-k", "5", "60", "ffmpeg", "-hide_banner", "-loglevel", "error",
                                                     "-f", "v4l2", "-input_format", "yuyv422", "-i", node,
                                                     "-f", "alsa", "-sample_rate", "48000", "-channels", "1", "-i", DeviceEnvironment.loopbackCapture,
                                                     "-t", "6", "-c:v", "mjpeg", "-q:v", "4", "-c:a", "pcm_s16le", movie])
        tool.interrupt()
        let summary = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let messages = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        tool.waitUntilExit()
        print("capture simulate (camera + microphone): \(messages)\(summary)")
        #expect(r.status == 0, "ffmpeg: \(r.stderr)")
        let inspect = try DeviceEnvironment.run(DeviceEnvironment.captureTool, ["inspect", movie])
        print("capture simulate binary: \(Self.fastestCaptureTool)")
        print("capture inspect \(movie):\n\(inspect.stdout)\(inspect.stderr)")
        let offsets = inspect.stdout.split(separator: "\n").filter { $0.contains("offset ") && $0.contains("ms") }
        #expect(offsets.count >= 3, "markers with an A/V offset: \(offsets)")
    }

    /// The real mixer code on snd-aloop: its capture PCMs are `loopback` ports; the card has no
    /// capture volume and no capture-source selector, so the gain is not settable (a typed error)
    /// and there are no data sources.
    @Test func theLoopbackCardsCapturePCMsAreLoopbackPortsWithoutAMixerGain() throws {
        let session = AudioSession(registry: DeviceRegistry(drivers: [ALSADriver()]), interruptionDomain: AudioInterruptionDomain())
        let port = try #require(session.availableInputs.first { $0.uid == DeviceEnvironment.loopbackCapture })
        print("hw:Loopback ports: \(session.availableInputs.map(\.description))")
        #expect(port.portType == .loopback)
        #expect(port.dataSources == nil)
        try session.setPreferredInput(port)
        #expect(session.currentRoute.inputs.map(\.uid) == [DeviceEnvironment.loopbackCapture])
        #expect(!session.isInputGainSettable)
        #expect(throws: CaptureError.self) { try session.setInputGain(0.5) }
        #expect(session.sampleRate == 48_000)
    }
}
