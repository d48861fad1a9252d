// The asset writer's encoding side: creates the file once every input has a first sample, places
// each sample with a `RecordingTimeline` (the session window) and writes it through `MovieWriter`.
import CaptureCore
import Foundation

/// The writer's encoding side, confined to the writer's serial queue: per-track scaling and audio
/// timing, then `MovieWriter` for encoding and muxing. Not `Sendable`: the writer keeps it in a `Locked`.
final class WriterEngine {
    let path: String
    let fileType: MediaFileType
    var sessionStart: MediaTime?
    var sessionEnd: MediaTime?
    private var inputs: [AssetWriterInput] = []
    private var options = MovieWriter.Options()
    private var movie: MovieWriter?
    private var held: [(SampleBuffer, AssetWriterInput)] = []
    private var firstFormats: [ObjectIdentifier: FormatDescription] = [:]
    private var finishedEmpty: Set<ObjectIdentifier> = []
    private var scaler: FrameScaler?
    private var frameDuration = MediaTime(value: 1, timescale: 30)
    private var hasVideoTrack = false
    private var audioFormat: AudioStreamFormat?
    /// Where samples go in the file (from the session start), made with the first written sample.
    private var timeline: RecordingTimeline?
    private var discarded = false

    init(path: String, fileType: MediaFileType) {
        self.path = path
        self.fileType = fileType
    }

    func configure(inputs: [AssetWriterInput], options: MovieWriter.Options) {
        self.inputs = inputs
        self.options = options
    }

    private var tracksReady: Bool {
        inputs.allSatisfy { firstFormats[ObjectIdentifier($0)] != nil || finishedEmpty.contains(ObjectIdentifier($0)) }
    }

    func process(_ sample: SampleBuffer, input: AssetWriterInput) throws(CaptureError) {
        guard !discarded else { return }
        if movie == nil {
            if firstFormats[ObjectIdentifier(input)] == nil { firstFormats[ObjectIdentifier(input)] = sample.formatDescription }
            held.append((sample, input))
            if tracksReady { try open() }
            return
        }
        try write(sample, input: input)
    }

    func inputFinished(_ input: AssetWriterInput) throws(CaptureError) {
        guard !discarded, movie == nil else { return }
        if firstFormats[ObjectIdentifier(input)] == nil { finishedEmpty.insert(ObjectIdentifier(input)) }
        if tracksReady, !held.isEmpty { try open() }
    }

    /// Creates the file with one track per input that has samples, then writes what was held.
    private func open() throws(CaptureError) {
        var video: VideoEncoderSettings?
        var audio: AudioEncoderSettings?
        for input in inputs {
            guard let format = firstFormats[ObjectIdentifier(input)] else { continue }
            switch (format, input.videoSettings, input.audioSettings) {
            case (.video, let settings?, _):
                let held = self.held.first { $0.1 === input }?.0
                if let fps = settings.expectedFrameRate {
                    frameDuration = fps == fps.rounded() ? MediaTime(value: 1, timescale: Int32(fps))
                                                         : MediaTime(seconds: 1 / fps, preferredTimescale: 90_000)
                } else if let duration = held?.duration, duration.isNumeric, duration > .zero {
                    frameDuration = duration
                }
                var s = VideoEncoderSettings(dimensions: settings.dimensions, inputPixelFormat: .yuv420,
                                             frameDuration: frameDuration, bitrate: settings.averageBitRate,
                                             keyframeInterval: settings.maxKeyFrameInterval, codec: settings.codec)
                s.timeBase = TrackTimeBase.fine(for: frameDuration)
                s.profile = settings.profile
                s.level = settings.level
                video = s
                hasVideoTrack = true
                scaler = FrameScaler(output: settings.dimensions, mode: settings.scalingMode)
            case (.audio(let stream), _, let settings):
                audioFormat = stream
                if let settings {
                    audio = settings.encoderSettings(for: stream)
                } else {
                    // Pass-through of PCM: keep the samples' own format.
                    audio = AudioEncoderSettings(input: stream, codec: stream.sampleFormat == .int16 ? .pcmS16 : .pcmFloat32)
                }
            default:
                throw .invalidArgument("the \(input.mediaType.rawValue) input received \(format) samples")
            }
        }
        movie = try MovieWriter(path: path, fileType: fileType, video: video, audio: audio, options: options)
        createdFile = true
        let pending = held
        held = []
        for (sample, input) in pending { try write(sample, input: input) }
    }

    private func write(_ sample: SampleBuffer, input: AssetWriterInput) throws(CaptureError) {
        guard let movie, let start = sessionStart else { return }
        var timeline = self.timeline ?? RecordingTimeline(
            origin: start, videoTick: hasVideoTrack ? TrackTimeBase.fine(for: frameDuration) : nil,
            audioRate: audioFormat.map { Int32($0.sampleRate) })
        // The session window: a sample at T plays at T − start; the file ends at the session's end.
        timeline.end = sessionEnd.map { $0 - start } ?? .invalid
        defer { self.timeline = timeline }
        switch sample.payload {
        case .pixels(let pixels):
            // Fine ticks (1/90000 s for common rates): each frame keeps its own presentation time.
            guard case .write(let slot) = timeline.placeVideo(at: sample.presentationTime) else { return }
            guard !slot.isNudged else {
                throw .invalidArgument("the frame at \(sample.presentationTime.seconds) s is not after the previous frame; append video in presentation order")
            }
            timeline.didWriteVideo(slot, duration: sample.duration)
            guard let scaler else { return }
            try movie.appendVideo(try scaler.scale(pixels), frameIndex: slot.tick)
        case .audio(let buffer):
            // Gaps become silence, overlaps are cut, nothing goes past the session's end.
            let placement = timeline.placeAudio(at: sample.presentationTime, frameCount: buffer.frameLength)
            try movie.appendAudio(buffer, as: placement, counting: &timeline)
        }
    }

    func finish() throws(CaptureError) {
        guard !discarded else { return }
        if movie == nil {
            guard !held.isEmpty else { throw .noDataRecorded }
            try open()
        }
        try movie?.finish()
    }

    /// After a refused write: the file is cut back to its complete fragments and kept; returns the
    /// error with what was kept.
    func keepCompleteFragments() -> CaptureError? {
        guard !discarded, let movie else { return nil }
        discarded = true
        held = []
        self.movie = nil
        do throws(CaptureError) {
            try movie.finish()
        } catch {
            return error
        }
        return nil
    }

    /// True once this engine's MovieWriter created the file: only then is it ours to remove.
    private var createdFile = false

    func discard() {
        guard !discarded else { return }
        discarded = true
        held = []
        movie = nil
        // A writer that failed before creating its file (e.g. the path was taken) removes nothing.
        if createdFile { OutputPath.removeRegularFile(path) }
    }
}
