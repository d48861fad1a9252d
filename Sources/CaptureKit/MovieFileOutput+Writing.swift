// The recording's write side: each sample is placed by the recording's `RecordingTimeline`, then
// encoded and muxed by its `MovieWriter`, holding only the `writing` lock (the writer queue in real
// time, the delivery thread in virtual pace); `state` is taken only to decide and to publish progress.
import CaptureCore
import CaptureMedia
import CaptureSimulator
import Dispatch
import Foundation

extension MovieFileOutput {
    struct Active {
        let request: Request
        let writer: MovieWriter
        /// Where each sample goes in the file: from the first frame's PTS, with the paused spans
        /// cut out. Its video tick is 1/90000 s for common rates, so the camera's own timestamps,
        /// jitter included, go into the file rather than being snapped to the frame grid.
        var timeline: RecordingTimeline
        /// Video frames are copied (`appendCompressedVideo`), not encoded.
        let passthrough: Bool
        let videoCodec: String?
        /// The format of the file's video (its first frame's): a frame of another size or pixel
        /// format (a live format change) ends the recording (`sessionConfigurationChanged`).
        var videoFormat: FormatDescription?
        var invalidFrames = 0
        var invalidFrameProblem: String?
        /// With video, the newest audio that arrived while paused (the timeline says which to
        /// hold): the buffer that straddles the resuming frame's PTS comes before that frame, and
        /// its part from that PTS on belongs in the file.
        var pausedAudio: [SampleBuffer] = []
    }

    /// Whether a sample passes a pause: written, written as the first after a resume, or left out.
    enum PauseGate { case open, resume, closed }

    /// Owned by whoever writes samples (see `writing`).
    struct Writing {
        /// The open file; set exactly while `State.phase` is `.recording`.
        var active: Active?
        /// Audio that arrived while waiting for the first video frame; the part at or after that
        /// frame's PTS is written once recording begins (real-time audio often arrives first).
        var audioBacklog: [SampleBuffer] = []
        /// Compressed frames skipped as damaged while waiting for the first good one.
        var invalidBeforeStart: (count: Int, problem: String?) = (0, nil)
    }

    /// Writes one sample where samples are written (see `writing`). `state` is locked only to read
    /// what to do and to publish progress, never while encoding or muxing.
    func process(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let demandChanged = writing.withLock { w in
            handle(step(sample, &w), &w)
        }
        if demandChanged { attachment.demandChanged() }
    }

    private func step(_ sample: SampleBuffer, _ w: inout Writing) -> Outcome? {
        enum Plan {
            case ignore
            case wait(Request, State)
            case write(PauseGate, Limits)
        }
        let plan = state.withLock { s -> Plan in
            switch s.phase {
            case .idle:
                return .ignore
            case .waiting(let request):
                return .wait(request, s)
            case .recording:
                guard let active = w.active else { return .ignore }
                guard s.isPaused else { return .write(.open, Limits(s)) }
                // Resume on a video frame (on audio for audio-only files).
                guard s.resumeRequested && active.timeline.resumes(on: sample.mediaType) else { return .write(.closed, Limits(s)) }
                s.isPaused = false
                s.resumeRequested = false
                return .write(.resume, Limits(s))
            }
        }
        switch plan {
        case .ignore:
            return nil
        case .wait(let request, let s):
            let hasVideo = request.connections.contains { $0.mediaType == .video }
            // Start on a video frame when there is video, so the file opens on a keyframe.
            guard sample.mediaType == .video || !hasVideo else {
                w.audioBacklog.append(sample)
                // Keep about half a second: enough to cover any buffer spanning the start.
                let horizon = sample.presentationTime - MediaTime(value: 1, timescale: 2)
                w.audioBacklog.removeAll { $0.presentationTime + $0.duration < horizon }
                return nil
            }
            if let problem = invalidFirstFrame(sample) {
                // This first frame is damaged: start with the next good one.
                w.invalidBeforeStart.count += 1
                w.invalidBeforeStart.problem = w.invalidBeforeStart.problem ?? problem
                return nil
            }
            let backlog = w.audioBacklog
            w.audioBacklog = []
            let limits = Limits(s)
            var active: Active
            do throws(CaptureError) {
                active = try begin(request, with: sample, state: s)
            } catch {
                w = Writing()
                state.withLock { $0.phase = .idle }
                return .failed(request, error)
            }
            active.invalidFrames = w.invalidBeforeStart.count
            active.invalidFrameProblem = w.invalidBeforeStart.problem
            w.invalidBeforeStart = (0, nil)
            state.withLock { $0.phase = .recording(request) }
            var result = write(sample, into: &active, gate: .open, limits: limits)
            for audio in backlog {
                guard result == nil else { break }
                result = write(audio, into: &active, gate: .open, limits: limits)
            }
            w.active = active
            publishProgress(of: active)
            return .started(request, then: result)
        case .write(let gate, let limits):
            guard var active = w.active else { return nil }
            w.active = nil  // keep the one reference (no copy of the struct's storage on write)
            if sample.mediaType == .video, gate != .closed {
                let delay = encodeDelay.withLock { $0 }
                if delay > .zero { Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18) }
            }
            let result = write(sample, into: &active, gate: gate, limits: limits)
            w.active = active
            publishProgress(of: active)
            return result
        }
    }

    private func publishProgress(of active: Active) {
        let progress = (active.timeline.duration, active.writer.bytesWritten)
        state.withLock { s in
            if case .recording = s.phase { s.progress = progress }
        }
    }

    struct Limits {
        var duration: MediaTime
        var fileSize: Int64
        var minFreeSpace: Int64
        var freeSpace: @Sendable (String) -> Int64?

        init(_ s: State) {
            duration = s.maxRecordedDuration
            fileSize = s.maxRecordedFileSize
            minFreeSpace = s.minFreeDiskSpaceLimit
            freeSpace = s.freeDiskSpace
        }
    }

    indirect enum Outcome {
        case started(Request, then: Outcome?)
        case failed(Request, CaptureError)
        case stop(CaptureError?, reason: String)
    }

    /// Reports an outcome; returns whether the output's demand changed (a recording ended).
    func handle(_ outcome: Outcome?, _ w: inout Writing) -> Bool {
        switch outcome {
        case nil:
            return false
        case .started(let request, let then):
            delegateQueue.async { request.delegate.fileOutput(self, didStartRecordingTo: request.path, from: request.connections) }
            return handle(then, &w)
        case .failed(let request, let error):
            finish(request, summary: .empty(request.path, reason: "error"), error: error)
            return true
        case .stop(let error, let reason):
            return end(&w, error: error, reason: reason, waitingError: .noDataRecorded)
        }
    }

    /// Why a first compressed video frame is not a whole JPEG (nil: fine, or not compressed), copied
    /// or encoded alike: the file starts with the next good one.
    private func invalidFirstFrame(_ sample: SampleBuffer) -> String? {
        guard let pixels = sample.pixelBuffer, pixels.format.isCompressed else { return nil }
        return pixels.withCompressedData { JPEGFrameCheck.inspect($0).problem }
    }

    private func begin(_ request: Request, with sample: SampleBuffer, state s: State) throws(CaptureError) -> Active {
        let container = MovieContainer(pathExtension: (request.path as NSString).pathExtension) ?? .mp4
        var videoSettings: VideoEncoderSettings?
        var passthroughSettings: VideoPassthroughSettings?
        var videoCodec: String?
        var frameDuration = MediaTime.invalid
        var options = MovieWriter.Options()
        let interval = s.movieFragmentInterval
        options.fragmentInterval = interval.isNumeric && interval > .zero ? interval : nil
        options.defragmentsOnFinish = !s.keepsMovieFragments
        options.faults = s.outputFaults
        // Unset: a simulated input's scenario supplies them (its fault timeline's output faults).
        if options.faults.isEmpty, let scenario = request.connections.lazy
            .compactMap({ ($0.input.device.backingDriver as? SimulatorDriver)?.scenario }).first {
            options.faults = scenario.faults.outputFaults
        }
        // The first frame's own format: a device may deliver decoded frames for a compressed
        // format (an MJPEG camera gives I420), so the connection's format is not what arrives.
        if let video = request.connections.first(where: { $0.mediaType == .video }),
           case .video(let pixelFormat, let dimensions) = sample.formatDescription {
            let settings = s.connectionSettings[ObjectIdentifier(video)] ?? s.settings
            frameDuration = video.videoFrameDuration
            let mode = settings.resolvedVideoMode(sourceFormat: pixelFormat, container: container)
            if mode == .passthrough {
                guard pixelFormat.isCompressed else {
                    throw .passthroughUnavailable("\(video.input.device.uniqueID) delivers raw \(pixelFormat) frames, and only compressed (MJPEG) frames can be copied; choose the camera's MJPG format or encode (h264)")
                }
                passthroughSettings = VideoPassthroughSettings(format: pixelFormat, dimensions: dimensions, frameDuration: frameDuration,
                                                               timeBase: TrackTimeBase.fine(for: frameDuration))
                videoCodec = "mjpeg"
            } else {
                let codec = settings.codec
                // iFrame presets: every frame a keyframe (Apple's editing-friendly recording).
                let keyframes = attachment.sessionPreset.isIFrame ? 1 : settings.keyframeInterval
                videoSettings = VideoEncoderSettings(dimensions: dimensions, inputPixelFormat: pixelFormat, frameDuration: frameDuration,
                                                     preset: settings.preset, bitrate: settings.videoBitrate,
                                                     keyframeInterval: keyframes, codec: codec)
                videoSettings?.timeBase = TrackTimeBase.fine(for: frameDuration)
                videoCodec = codec.rawValue
            }
            options.rotation = video.videoRotationAngle
            options.mirrored = video.isVideoMirrored
        }
        var audioSettings: AudioEncoderSettings?
        var rate: Int32 = 1
        if let audio = request.connections.first(where: { $0.mediaType == .audio }),
           case .audio(let format) = audio.formatDescription {
            let settings = s.connectionSettings[ObjectIdentifier(audio)] ?? s.settings
            audioSettings = AudioEncoderSettings(input: format, bitrate: settings.audioBitrate)
            rate = Int32(format.sampleRate)
        }
        let writer = try MovieWriter(path: request.path, container: container, video: videoSettings,
                                     videoPassthrough: passthroughSettings, audio: audioSettings, options: options)
        if let hook = packetHook.withLock({ $0 }) {
            // File time back to the session's clock (the bench records without pauses).
            let origin = sample.presentationTime.seconds
            writer.videoPacketWritten = { hook(origin + $0) }
        }
        let hasVideo = videoSettings != nil || passthroughSettings != nil
        let timeline = RecordingTimeline(origin: sample.presentationTime,
                                         videoTick: hasVideo ? TrackTimeBase.fine(for: frameDuration) : nil,
                                         audioRate: audioSettings != nil ? rate : nil)
        return Active(request: request, writer: writer, timeline: timeline,
                      passthrough: passthroughSettings != nil, videoCodec: videoCodec,
                      videoFormat: hasVideo ? sample.formatDescription : nil)
    }

    /// Writes one sample where the timeline puts it; returns `.stop` when a limit is reached or
    /// writing failed.
    private func write(_ sample: SampleBuffer, into active: inout Active, gate: PauseGate, limits: Limits) -> Outcome? {
        active.timeline.end = limits.duration
        switch gate {
        case .open: break
        case .closed: active.timeline.pause()
        case .resume:
            // The paused span, from where the file stopped to this sample, is cut (for audio too, to
            // the sample): the file continues seamlessly with this sample.
            active.timeline.resume(at: sample.presentationTime)
        }
        do throws(CaptureError) {
            switch sample.payload {
            case .pixels(let buffer):
                if let recorded = active.videoFormat, sample.formatDescription != recorded {
                    // AVFoundation: a format change of a running device ends the movie with
                    // AVErrorSessionConfigurationChanged, the file finished and playable. A
                    // frame-rate change keeps the format and continues the file.
                    let device = active.request.connections.first { $0.mediaType == .video }?.input.device.uniqueID ?? "the camera"
                    return .stop(.sessionConfigurationChanged(device: device, from: "\(recorded)", to: "\(sample.formatDescription)"),
                                 reason: "configurationChanged")
                }
                if gate == .resume {
                    // The held audio straddling this frame's PTS gives the file its samples from that PTS on.
                    let held = active.pausedAudio
                    active.pausedAudio = []
                    for audio in held {
                        if case .audio(let samples) = audio.payload { try writeAudio(audio, samples, into: &active) }
                    }
                }
                let slot: RecordingTimeline.VideoSlot
                switch active.timeline.placeVideo(at: sample.presentationTime) {
                case .write(let placed): slot = placed
                case .pastEnd: return .stop(.recordingLimitReached(.maximumDuration), reason: "maximumDuration")
                case .paused, .beforeStart, .noTrack: return nil
                }
                do {
                    if active.passthrough {
                        try active.writer.appendCompressedVideo(buffer, frameIndex: slot.tick)
                    } else {
                        try active.writer.appendVideo(buffer, frameIndex: slot.tick)
                    }
                } catch .invalidCompressedFrame(let problem) {
                    // A damaged camera frame (truncated on the bus, say), copied or decoded to be
                    // encoded, is left out and counted, as AVFoundation drops it: the previous frame
                    // shows until the next good one, whose PTS is unchanged; the recording goes on.
                    active.invalidFrames += 1
                    active.invalidFrameProblem = active.invalidFrameProblem ?? "frame at \(slot.fileTime.seconds) s: \(problem)"
                    return nil
                }
                active.timeline.didWriteVideo(slot, duration: sample.duration)
            case .audio(let buffer):
                guard active.timeline.hasAudio else { return nil }
                if gate == .closed {
                    // Paused: with video, audio runs on to the paused video's end (the last written
                    // frame's), sample-accurately; the newest buffers wait for the resuming frame.
                    let held = try writeAudio(sample, buffer, into: &active)
                    if held { active.pausedAudio = Array((active.pausedAudio + [sample]).suffix(4)) }
                    return nil
                }
                try writeAudio(sample, buffer, into: &active)
                if active.timeline.audioReachedEnd {
                    return .stop(.recordingLimitReached(.maximumDuration), reason: "maximumDuration")
                }
            }
        } catch {
            return .stop(error, reason: Self.stopReason(for: error))
        }
        return checkSizeAndSpace(active, limits)
    }

    /// Writes what the timeline takes of an audio buffer: audio is one continuous run from the
    /// file's start (overlap cut, gaps silent), so every sample lands at its own PTS relative to the
    /// first video frame. Returns whether the buffer is to be held for a resume.
    @discardableResult
    private func writeAudio(_ sample: SampleBuffer, _ buffer: AudioPCMBuffer, into active: inout Active) throws(CaptureError) -> Bool {
        let placement = active.timeline.placeAudio(at: sample.presentationTime, frameCount: buffer.frameLength)
        try active.writer.appendAudio(buffer, as: placement, counting: &active.timeline)
        return placement.holdForResume
    }

    /// The size and free-space limits, checked after every written sample.
    private func checkSizeAndSpace(_ active: Active, _ limits: Limits) -> Outcome? {
        if limits.fileSize > 0 {
            // Keep room for what finishing adds: the last packets and the index (~32 bytes a sample).
            let samples = Int64(active.writer.videoFramesWritten) + active.timeline.audioSamples / 1024
            let reserve = 4096 + samples * 32 + active.writer.bytesWritten / max(1, Int64(active.writer.videoFramesWritten) + 1)
            if active.writer.bytesWritten + reserve >= limits.fileSize {
                return .stop(.recordingLimitReached(.maximumFileSize), reason: "maximumFileSize")
            }
        }
        if limits.minFreeSpace > 0, let free = limits.freeSpace(active.request.path), free < limits.minFreeSpace {
            return .stop(.recordingLimitReached(.diskFull), reason: "diskFull")
        }
        return nil
    }
}
