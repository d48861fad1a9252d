import ArgumentParser
import CaptureKit
import Foundation

struct AudioCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audio",
        abstract: "Record audio with a level meter, or play a file.",
        subcommands: [AudioRecordCommand.self, AudioPlayCommand.self])
}

extension AudioRecorderSettings.Format: ExpressibleByArgument {}

struct AudioRecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record", abstract: "Record a microphone to WAV (16-bit PCM) or M4A (AAC).")

    @Option(help: "Microphone unique ID (sim:mic, or loop:mic to hear the simulated speaker).")
    var microphone: String

    @Option(help: "Seconds to record.")
    var duration: Double

    @Option(help: "wav or m4a (default: from OUT's extension).")
    var format: AudioRecorderSettings.Format?

    @Flag(help: "Show a live level bar (average and peak dBFS) on standard error.")
    var meter = false

    @Option(help: "virtual (as fast as possible) or realtime.")
    var pace: CapturePace = .realtime

    @Flag(help: "Replace OUT if it is a regular file (atomically, when the recording finishes); a folder, link, FIFO or device there is never replaced.")
    var overwrite = false

    @Argument(help: "Output file (.wav or .m4a).")
    var output: String

    @OptionGroup var status: StatusOptions

    func run() async throws {
        guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be a positive number of seconds") }
        let ext = (output as NSString).pathExtension.lowercased()
        guard let chosen = format ?? AudioRecorderSettings.Format(rawValue: ext) else {
            throw ValidationError("give --format wav|m4a or end OUT in .wav or .m4a")
        }
        // The library replaces a regular file as AVAudioRecorder does; the CLI asks for --overwrite.
        do { try OutputPath.checkNew(output, existing: .init(overwrite: overwrite)) } catch { throw CommandFailure(error, overwritable: true) }
        let recorder: AudioRecorder
        do {
            recorder = try AudioRecorder(path: output, settings: AudioRecorderSettings(format: chosen), microphone: microphone, pace: pace)
        } catch { throw CommandFailure(error) }
        // --meter is its own live display; otherwise the status line (which reads the meters itself).
        let statusMode: StatusOptions.Mode = meter ? .none : status.mode
        recorder.isMeteringEnabled = meter || statusMode != .none
        guard recorder.record(forDuration: duration) else { throw CommandFailure(recorder.error ?? .invalidState("could not start recording")) }
        let stop = StopSignals { recorder.stop() }
        defer { stop.cancel() }
        let started = Date()
        let reporter = StatusReporter(mode: statusMode) { [output] in
            guard recorder.isRecording else { return nil }
            recorder.updateMeters()
            return CaptureStatus(elapsed: Date().timeIntervalSince(started), mediaSeconds: recorder.currentTime,
                                 fileSize: StatusReporter.fileSize(output), audioLevelDBFS: recorder.peakPower(forChannel: 0))
        }
        defer { reporter?.stop() }
        while recorder.isRecording {
            try? await Task.sleep(for: .milliseconds(100))
            if meter {
                recorder.updateMeters()
                let average = recorder.averagePower(forChannel: 0), peak = recorder.peakPower(forChannel: 0)
                printError(Self.bar(average: average, peak: peak, time: recorder.currentTime))
            }
        }
        await recorder.waitUntilFinished()
        reporter?.stop()
        if let error = recorder.error { throw CommandFailure(error) }
        print(String(format: "recorded %.3f s to %@", recorder.recordedDuration, output))
    }

    /// `[#########-------|    ]  -9.0 dB avg  -6.0 dB peak` over −60…0 dBFS.
    static func bar(average: Float, peak: Float, time: Double) -> String {
        let width = 40
        func column(_ db: Float) -> Int { Int((max(0, min(60, db + 60)) / 60 * Float(width)).rounded()) }
        let filled = column(average), mark = min(width - 1, column(peak))
        let cells = (0..<width).map { $0 < filled ? "#" : ($0 == mark ? "|" : "-") }.joined()
        return String(format: "%6.2f s [%@] %6.1f dB avg %6.1f dB peak", time, cells, average, peak)
    }
}

struct AudioPlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play an audio file to the simulated speaker (which loop:mic hears) or an ALSA playback device.",
        discussion: "--device hw:CARD,DEV (or any ALSA playback PCM name, e.g. default, plughw:0,0) plays in real time on the card, stereo 48 kHz; underruns are recovered and counted. With snd-aloop, hw:Loopback,0,0 is heard on hw:Loopback,1,0.")

    @Argument(help: "Audio file (WAV, M4A, or any file with an audio track).")
    var file: String

    @Option(help: "Output device: loop:speaker (the simulated speaker) or an ALSA playback PCM (hw:CARD,DEV).")
    var device = "loop:speaker"

    @Option(help: "Volume 0…1.")
    var volume: Float = 1

    @Option(help: "Playback rate 0.5…2 (the pitch changes with it).")
    var rate: Float = 1

    @Option(help: "Extra plays after the first; -1 = until interrupted.")
    var loops = 0

    @Option(help: "virtual (as fast as possible) or realtime.")
    var pace: CapturePace = .realtime

    @OptionGroup var status: StatusOptions

    func run() async throws {
        guard (0...1).contains(volume) else { throw ValidationError("--volume must be within 0…1") }
        guard (0.5...2).contains(rate) else { throw ValidationError("--rate must be within 0.5…2") }
        let player: AudioPlayer
        let alsa: ALSAPlaybackDevice?
        do {
            if device == "loop:speaker" {
                alsa = nil
                player = try AudioPlayer(path: file, speaker: .shared, pace: pace)
            } else {
                let sink = try ALSAPlaybackDevice(name: device)
                alsa = sink
                player = try AudioPlayer(path: file, output: sink, pace: .realtime)
            }
        } catch { throw CommandFailure(error) }
        player.volume = volume
        player.enableRate = rate != 1
        player.rate = rate
        player.numberOfLoops = loops
        player.isMeteringEnabled = true
        let stop = StopSignals { player.stop() }
        defer { stop.cancel() }
        let before = player.output.playedFrameCount
        guard player.play() else { throw CommandFailure(player.error ?? .invalidState("could not start playback")) }
        let started = Date()
        let reporter = StatusReporter(mode: status.mode) {
            guard player.isPlaying else { return nil }
            // No level here: reading the meters would reset what the final summary's average and peak cover.
            return CaptureStatus(elapsed: Date().timeIntervalSince(started), mediaSeconds: player.currentTime)
        }
        defer { reporter?.stop() }
        await player.waitUntilStopped()
        reporter?.stop()
        if let error = player.error { throw CommandFailure(error) }
        player.updateMeters()
        let frames = player.output.playedFrameCount - before
        print(String(format: "played %@ (%.3f s) to %@: %d frames at %d Hz, average %.1f dB, peak %.1f dB", file, player.duration, device,
                     frames, player.output.format.sampleRate, player.averagePower(forChannel: 0), player.peakPower(forChannel: 0))
              + (alsa.map { ", underruns \($0.underrunCount)" } ?? ""))
    }
}
