import ArgumentParser
import CaptureKit
import Foundation

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Write a camera's frames to a V4L2 output device (v4l2loopback) and/or a microphone's samples to an ALSA playback PCM (snd-aloop), in real time: a virtual camera and microphone.",
        discussion: """
            Any program that reads the v4l2loopback node then sees the camera — with the simulator's frame-index \
            stamp and sync markers — e.g. `capture record --camera /dev/video10` or `ffmpeg -f v4l2 -i /dev/video10`. \
            Load the module first: modprobe v4l2loopback devices=1 video_nr=10 exclusive_caps=1. \
            With --microphone sim:mic --audio-to hw:Loopback,0,0 (modprobe snd-aloop) any ALSA program hears the \
            microphone's tone and sync bursts on hw:Loopback,1,0 (mono 48 kHz S16_LE), e.g. \
            `arecord -D hw:Loopback,1,0 -f S16_LE -r 48000 -c 1 out.wav`. Camera and microphone together run in one \
            session on one clock: a synchronized virtual camera + microphone pair. \
            Runs until Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) or --duration.
            """)

    @Option(help: "Camera unique ID (e.g. sim:back, sim:webcam); needs --to.")
    var camera: String?

    @Option(help: "The V4L2 output node to write to (a v4l2loopback device, e.g. /dev/video10).")
    var to: String?

    @Option(help: "Microphone unique ID (e.g. sim:mic); needs --audio-to.")
    var microphone: String?

    @Option(name: .customLong("audio-to"), help: "The ALSA playback PCM to write the microphone to (e.g. hw:Loopback,0,0).")
    var audioTo: String?

    @Option(name: .customLong("microphone-gain"), help: "The simulated microphone's gain stage, 0…1 (default 1).")
    var microphoneGain: Float?

    @Option(name: .customLong("audio-latency"), help: "Seconds of audio written ahead of the card (the fill it keeps: its latency, and the stall it survives without an underrun; default 0.1).")
    var audioLatency: Double = 0.1

    @Option(name: .customLong("data-source"), help: "The simulated microphone's data source by name (sim:mic: Front, Back or Bottom).")
    var dataSource: String?

    @Option(help: "WxH@FPS[:FOURCC]: the size and rate, and the pixel format written (YUYV, I420/YU12, NV12 or MJPG; default: the camera's). A camera format of that size and rate is chosen (the same pixel format when it has it) and converted.")
    var format: String?

    @Option(name: .customLong("control"), help: "KEY=VALUE, repeatable: a camera control applied under the configuration lock before streaming (see `capture controls DEVICE`).")
    var controls: [String] = []

    @Option(help: "Stop after this many seconds (default: run until interrupted).")
    var duration: Double?

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    func validate() throws {
        if camera == nil, microphone == nil { throw ValidationError("give --camera ID --to /dev/videoN, --microphone ID --audio-to hw:CARD,DEV, or both") }
        if (camera == nil) != (to == nil) { throw ValidationError("--camera and --to go together") }
        if (microphone == nil) != (audioTo == nil) { throw ValidationError("--microphone and --audio-to go together") }
        if let microphoneGain, !(0...1).contains(microphoneGain) { throw ValidationError("--microphone-gain must be within 0…1") }
        if !(0.02...2).contains(audioLatency) { throw ValidationError("--audio-latency must be within 0.02…2 seconds") }
        if let duration, !(duration > 0 && duration.isFinite) { throw ValidationError("--duration must be a positive number of seconds") }
        if let format, FormatRequest(format) == nil {
            throw ValidationError("--format '\(format)' must look like 640x480@30 or 640x480@30:YUYV (pixel formats: YUYV, I420, NV12, MJPG)")
        }
    }

    @OptionGroup var status: StatusOptions

    func run() async throws {
        let registry = CaptureKit.makeRegistry(seed: seed)
        var video: (device: CaptureDevice, sink: V4L2LoopbackSink, output: VideoLoopbackOutput)?
        var audio: (device: CaptureDevice, sink: ALSAPlaybackDevice, output: AudioLoopbackOutput)?
        do throws(CaptureError) {
            if let camera, let to {
                let device = try registry.device(uniqueID: camera)
                guard device.hasMediaType(.video) else { throw .invalidArgument("\(camera) is not a camera") }
                let sinkFormat = try configure(device)
                let active = device.activeFormat
                guard let size = active.dimensions else { throw .formatNotSupported("\(camera)'s format \(active.formatDescription) has no size") }
                let sink = try V4L2LoopbackSink(path: to, pixelFormat: sinkFormat, dimensions: size, frameDuration: device.activeVideoMinFrameDuration)
                video = (device, sink, VideoLoopbackOutput(sink: sink))
            }
            if let microphone, let audioTo {
                let device = try registry.device(uniqueID: microphone)
                guard device.hasMediaType(.audio), let format = device.activeFormat.audioFormat else { throw .invalidArgument("\(microphone) is not a microphone") }
                try configureMicrophone(device, registry: registry)
                // The microphone's rate and channels, S16: what ALSA programs take by default.
                let sink = try ALSAPlaybackDevice(name: audioTo, format: format, cardSampleFormat: .int16,
                                                  bufferDuration: max(0.2, audioLatency * 4), startThreshold: audioLatency)
                try sink.beginPlayback()  // fails now (no such PCM, busy) rather than at the first buffer
                audio = (device, sink, AudioLoopbackOutput(sink: sink))
            }
        } catch {
            video?.sink.close()
            audio?.sink.endPlayback()
            throw CommandFailure(error)
        }

        let session = CaptureSession(pace: .realtime)
        let stop = Locked(false)
        let interrupt = StopSignals { stop.withLock { $0 = true } }
        defer { interrupt.cancel() }
        let start = HostClock.now()
        do throws(CaptureError) {
            try session.setSessionPreset(.inputPriority)  // keep the format chosen above
            if let video {
                try session.addInput(CaptureDeviceInput(device: video.device))
                try session.addOutput(video.output)
            }
            if let audio {
                try session.addInput(CaptureDeviceInput(device: audio.device))
                try session.addOutput(audio.output)
            }
            try session.startRunning()
        } catch {
            video?.sink.close()
            audio?.sink.endPlayback()
            throw CommandFailure(error)
        }
        let until = duration.map { "stopping after \(String(format: "%g", $0)) s" } ?? "Ctrl-C stops"
        if let video {
            let rate = 1 / video.device.activeVideoMinFrameDuration.seconds
            printError("capture simulate: writing \(video.device.uniqueID) (\(ControlOptions.describe(video.device.activeFormat)) @ \(String(format: "%g", rate)) fps) to \(to ?? "") "
                       + "('\(video.sink.cardName)') as \(video.sink.pixelFormat) \(video.sink.dimensions); " + until)
        }
        if let audio {
            printError("capture simulate: writing \(audio.device.uniqueID) (\(audio.sink.format.sampleRate) Hz, \(audio.sink.format.channelCount) ch) to \(audio.sink.uniqueID) as S16_LE "
                       + "(period \(audio.sink.grantedPeriodFrames ?? 0), buffer \(audio.sink.grantedBufferFrames ?? 0) frames); " + until)
        }
        let videoOutput = video?.output, audioOutput = audio?.output, audioRate = Double(audio?.sink.format.sampleRate ?? 48_000)
        let began = Date()
        let reporter = StatusReporter(mode: status.mode) {
            let v = videoOutput?.statistics, a = audioOutput?.statistics
            // Media written: the audio's frames, else the wall time (frames go out as they come).
            return CaptureStatus(elapsed: Date().timeIntervalSince(began), mediaSeconds: a.map { Double($0.framesWritten) / audioRate }
                                    ?? Date().timeIntervalSince(began),
                                 frames: v?.framesWritten, dropped: v.map { $0.framesDropped })
        }
        defer { reporter?.stop() }
        while !stop.withLock({ $0 }), video?.output.statistics.error == nil, audio?.output.statistics.error == nil, session.isRunning {
            if let duration, (HostClock.now() - start).seconds >= duration { break }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        reporter?.stop()
        session.stopRunning()
        video?.sink.close()
        audio?.sink.endPlayback()
        let elapsed = (HostClock.now() - start).seconds
        if let video {
            let stats = video.output.statistics
            let indices = stats.firstSequenceNumber.map { "frames \($0)–\(stats.lastSequenceNumber ?? $0)" } ?? "no frames"
            print("Wrote \(stats.framesWritten) frames (\(indices)) to \(to ?? "") as \(video.sink.pixelFormat) \(video.sink.dimensions) "
                  + "in \(String(format: "%.2f", elapsed)) s (\(String(format: "%.1f", Double(stats.framesWritten) / max(elapsed, 0.001))) fps)")
            print("  dropped by the camera: \(stats.framesDropped), late writes: \(stats.lateWrites)")
        }
        if let audio {
            let stats = audio.output.statistics
            let rate = Double(audio.sink.format.sampleRate)
            print("Wrote \(stats.framesWritten) audio frames (\(String(format: "%.3f", Double(stats.framesWritten) / rate)) s, \(stats.buffersWritten) buffers) to \(audio.sink.uniqueID) "
                  + "in \(String(format: "%.2f", elapsed)) s")
            print("  dropped by the microphone: \(stats.framesDropped), late writes: \(stats.lateWrites), underruns: \(stats.underruns)")
        }
        if let error = video?.output.statistics.error ?? audio?.output.statistics.error { throw CommandFailure(error) }
    }

    /// `--microphone-gain` and `--data-source` through the audio session of the registry.
    private func configureMicrophone(_ device: CaptureDevice, registry: DeviceRegistry) throws(CaptureError) {
        guard microphoneGain != nil || dataSource != nil else { return }
        let audioSession = AudioSession(registry: registry)
        guard let port = audioSession.availableInputs.first(where: { $0.uid == device.uniqueID }) else {
            throw .audioRouteUnavailable("\(device.uniqueID) is not an audio-session input")
        }
        try audioSession.setPreferredInput(port)
        if let dataSource {
            guard let source = port.dataSources?.first(where: { $0.dataSourceName.caseInsensitiveCompare(dataSource) == .orderedSame }) else {
                throw .audioRouteUnavailable("\(device.uniqueID) has no data source '\(dataSource)' (it has: \((port.dataSources ?? []).map(\.dataSourceName).joined(separator: ", ")))")
            }
            try port.setPreferredDataSource(source)
        }
        if let microphoneGain { try audioSession.setInputGain(microphoneGain) }
    }

    /// `--format` and `--control`s under the configuration lock; returns the pixel format to write.
    /// The camera format is the one of the requested size and rate with the requested pixel format,
    /// else an uncompressed one of that size and rate (converted by the sink).
    private func configure(_ device: CaptureDevice) throws(CaptureError) -> PixelFormat {
        let entries = try ControlOptions.parse(controls)
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        var written: PixelFormat?
        if let format, let request = FormatRequest(format) {
            written = request.fourcc.flatMap(PixelFormat.init(name:))
            let duration = request.frameDuration
            let candidates = device.formats.filter { $0.dimensions == request.dimensions && $0.supports(frameDuration: duration) }
            let choice = candidates.first { written != nil && $0.pixelFormat == written } ?? candidates.first { $0.pixelFormat?.isCompressed == false }
            guard let choice else {
                let available = device.formats.map { "\(ControlOptions.describe($0)) @ \($0.frameRateRanges.map(\.description).joined(separator: ", "))" }
                throw .formatNotSupported("\(device.uniqueID) has no uncompressed format \(request.dimensions) at \(request.frameRate) fps (it has: \(available.joined(separator: "; ")))")
            }
            try device.setActiveFormat(choice)
            try device.setActiveVideoMaxFrameDuration(duration)
            try device.setActiveVideoMinFrameDuration(duration)
        }
        try ControlOptions.applyControls(entries, to: device)
        if let written { return written }
        let camera = device.activeFormat.pixelFormat ?? .yuv420
        return V4L2LoopbackSink.supportedPixelFormats.contains(camera) ? camera : .yuv420
    }
}
