// AVAssetWriter's two public classes and their status machine; the serial engine that encodes and
// muxes is in AssetWriterEngine.swift, the settings dictionaries in AssetWriterSettings.swift.
import CaptureCore
import Dispatch
import Foundation

/// Writes media samples to a file through inputs with their own output settings (AVAssetWriter).
///
/// Encoding and muxing are `MovieWriter`'s; this class adds what AVAssetWriter has on top: a
/// session window (`startSession(atSourceTime:)` … `endSession(atSourceTime:)`), validated
/// output settings per input, a track transform, and real back-pressure. Appended samples go to
/// a bounded queue per input and are encoded on the writer's own serial queue; an input is
/// ready for more only while its queue has room. The file and its header are created once every
/// input has delivered its first sample (the encoders need the sources' formats).
public final class AssetWriter: Sendable {
    public enum Status: String, Sendable, Hashable { case unknown, writing, completed, failed, cancelled }

    public let path: String
    public let fileType: MediaFileType
    let queue = DispatchQueue(label: "CaptureKit.AssetWriter")
    private let state = Locked(State())
    /// Used on `queue` (and once by `startWriting` before anything is queued); the lock is never
    /// contended and lets the compiler check that the engine stays there.
    private let engine: Locked<WriterEngine>

    struct State {
        var status = Status.unknown
        var error: CaptureError?
        var inputs: [AssetWriterInput] = []
        var sessionStart: MediaTime?
        var sessionEnd: MediaTime?
        var fragmentInterval = MediaTime.invalid
        var outputFaults = OutputFaults()
        var finishing = false
    }

    /// A writer for `path`; the file must not exist yet and its folder must (AVAssetWriter's rule).
    public init(path: String, fileType: MediaFileType) throws(CaptureError) {
        try OutputPath.checkNew(path)
        self.path = path
        self.fileType = fileType
        engine = Locked(WriterEngine(path: path, fileType: fileType))
    }

    /// A writer for a file URL, with the type from its extension when none is given.
    public convenience init(url: URL, fileType: MediaFileType? = nil) throws(CaptureError) {
        guard let type = fileType ?? MediaFileType(pathExtension: url.pathExtension) else {
            throw .invalidArgument("\(url.path): give a file type or end the name in .mp4, .mov, .m4a or .wav")
        }
        try self.init(path: url.path, fileType: type)
    }

    public var status: Status { state.withLock { $0.status } }
    /// Why the writer failed (nil otherwise).
    public var error: CaptureError? { state.withLock { $0.error } }
    public var inputs: [AssetWriterInput] { state.withLock { $0.inputs } }

    /// Fragment interval for MP4/MOV (invalid = one moov at the end, the default here).
    public var movieFragmentInterval: MediaTime {
        get { state.withLock { $0.fragmentInterval } }
        set { state.withLock { if $0.status == .unknown { $0.fragmentInterval = newValue } } }
    }

    /// Disk and encoder faults to apply to this file (tests and simulated runs; a scenario's
    /// `FaultTimeline.outputFaults`), as `MovieFileOutput.outputFaults` does. Set before
    /// `startWriting()`; none by default.
    public var outputFaults: OutputFaults {
        get { state.withLock { $0.outputFaults } }
        set { state.withLock { if $0.status == .unknown { $0.outputFaults = newValue } } }
    }

    /// Whether `input` may be added now; `addInputError` says why not.
    public func canAdd(_ input: AssetWriterInput) -> Bool { addInputError(input) == nil }

    func addInputError(_ input: AssetWriterInput) -> CaptureError? {
        state.withLock { s -> CaptureError? in
            if s.status != .unknown { return .invalidState("inputs can only be added before startWriting()") }
            if s.inputs.contains(where: { $0 === input }) || input.writer != nil { return .invalidState("the input is already attached to a writer") }
            if input.mediaType == .video {
                if !fileType.canHoldVideo { return .invalidArgument("a \(fileType.rawValue) file cannot hold video") }
                if s.inputs.contains(where: { $0.mediaType == .video }) { return .invalidArgument("this writer takes one video input") }
                if input.videoSettings == nil {
                    return .invalidArgument("video pass-through (nil output settings) is not supported: CaptureKit's frames are uncompressed; give output settings")
                }
            } else {
                if s.inputs.contains(where: { $0.mediaType == .audio }) { return .invalidArgument("this writer takes one audio input") }
                if let codec = input.audioSettings?.codec {
                    if fileType == .wav && !codec.isPCM { return .invalidArgument("a wav file holds linear PCM, not \(codec.rawValue)") }
                    if (fileType == .mp4 || fileType == .m4a) && codec.isPCM {
                        return .invalidArgument("a \(fileType.rawValue) file cannot hold linear PCM here; use mov or wav, or AAC")
                    }
                } else if fileType == .mp4 || fileType == .m4a {
                    return .invalidArgument("audio pass-through writes linear PCM, which a \(fileType.rawValue) file cannot hold; give AAC settings or use mov/wav")
                }
            }
            return nil
        }
    }

    public func add(_ input: AssetWriterInput) throws(CaptureError) {
        if let error = addInputError(input) { throw error }
        input.attach(to: self)
        state.withLock { $0.inputs.append(input) }
    }

    /// Starts writing; on failure the status is `failed` and `error` says why. Returns success.
    @discardableResult
    public func startWriting() -> Bool {
        let outcome: Result<[AssetWriterInput], CaptureError> = state.withLock { s in
            guard s.status == .unknown else { return .failure(.invalidState("startWriting() was already called (status \(s.status.rawValue))")) }
            guard !s.inputs.isEmpty else { return .failure(.noInputs) }
            do throws(CaptureError) { try OutputPath.checkNew(path) } catch { return .failure(error) }
            return .success(s.inputs)
        }
        switch outcome {
        case .failure(let error):
            fail(error)
            return false
        case .success(let inputs):
            var options = MovieWriter.Options(
                fragmentInterval: movieFragmentInterval.isNumeric ? movieFragmentInterval : nil,
                rotation: inputs.first { $0.mediaType == .video }?.transform.rightAngleRotation?.degrees ?? 0,
                mirrored: inputs.first { $0.mediaType == .video }?.transform.rightAngleRotation?.mirrored ?? false)
            options.faults = outputFaults
            engine.withLock { $0.configure(inputs: inputs, options: options) }
            for input in inputs { input.freeze() }
            state.withLock { $0.status = .writing }
            return true
        }
    }

    /// Samples from `time` on are written; a sample at T plays at T − time.
    public func startSession(atSourceTime time: MediaTime) {
        guard time.isNumeric else { fail(.invalidArgument("the session start must be a numeric time")); return }
        let ok = state.withLock { s -> Bool in
            guard s.status == .writing, s.sessionStart == nil else { return false }
            s.sessionStart = time
            return true
        }
        if ok { queue.async { self.engine.withLock { $0.sessionStart = time } } }
    }

    /// Samples at or after `time` are not written; the file ends there.
    public func endSession(atSourceTime time: MediaTime) {
        let ok = state.withLock { s -> Bool in
            guard s.status == .writing, let start = s.sessionStart, time.isNumeric, time >= start else { return false }
            s.sessionEnd = time
            return true
        }
        if ok { queue.async { self.engine.withLock { $0.sessionEnd = time } } }
    }

    var sessionStarted: Bool { state.withLock { $0.sessionStart != nil } }

    /// Finishes the file once every queued sample is written; the status becomes completed or failed.
    public func finishWriting() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            finishWriting { done.resume() }
        }
    }

    /// Finishes the file and calls `completion` (on the writer's queue) afterwards.
    public func finishWriting(completionHandler completion: @escaping @Sendable () -> Void) {
        let proceed = state.withLock { s -> Bool in
            guard s.status == .writing, !s.finishing else { return false }
            s.finishing = true
            return true
        }
        guard proceed else {
            if status == .unknown { fail(.invalidState("finishWriting() before startWriting()")) }
            queue.async(execute: completion)
            return
        }
        for input in inputs { input.markAsFinished() }
        queue.async {
            do throws(CaptureError) {
                try self.engine.withLock { (engine) throws(CaptureError) in try engine.finish() }
                self.state.withLock { if $0.status == .writing { $0.status = .completed } }
            } catch {
                self.fail(error)
            }
            completion()
        }
    }

    /// Stops writing and deletes the partial file.
    public func cancelWriting() {
        let proceed = state.withLock { s -> Bool in
            guard s.status == .writing || s.status == .unknown else { return false }
            s.status = .cancelled
            return true
        }
        guard proceed else { return }
        for input in inputs { input.wake() }
        queue.async { self.engine.withLock { $0.discard() } }
    }

    /// Marks the writer failed with `error` (the first reason wins) and discards queued work.
    func fail(_ error: CaptureError) {
        let changed = state.withLock { s -> Bool in
            guard s.status == .writing || s.status == .unknown else { return false }
            s.status = .failed
            s.error = error
            return true
        }
        guard changed else { return }
        for input in inputs { input.wake() }
        guard error.isWriteFailure else {
            queue.async { self.engine.withLock { $0.discard() } }
            return
        }
        // The disk refused a write: keep the complete fragments (the file plays to their end) and
        // say how much that is.
        queue.async {
            guard let kept = self.engine.withLock({ $0.keepCompleteFragments() }) else { return }
            self.state.withLock { $0.error = kept }
        }
    }

    /// Called by an input: queue `sample` for encoding (validation already done by the input).
    func enqueue(_ sample: SampleBuffer, from input: AssetWriterInput) {
        queue.async {
            guard self.status == .writing else { input.dequeued(); return }
            do throws(CaptureError) {
                try self.engine.withLock { (engine) throws(CaptureError) in try engine.process(sample, input: input) }
            } catch {
                self.fail(error)
            }
            input.dequeued()
        }
    }

    /// Called by an input once it will get no more samples.
    func inputFinished(_ input: AssetWriterInput) {
        queue.async {
            guard self.status == .writing else { return }
            do throws(CaptureError) {
                try self.engine.withLock { (engine) throws(CaptureError) in try engine.inputFinished(input) }
            } catch {
                self.fail(error)
            }
        }
    }
}

/// One track's feed into an `AssetWriter` (AVAssetWriterInput).
public final class AssetWriterInput: Sendable {
    public let mediaType: MediaType
    /// The settings as given (nil = pass-through).
    public let outputSettings: OutputSettings?
    let videoSettings: VideoOutputSettings?
    let audioSettings: AudioOutputSettings?
    private let state = Locked(State())

    struct State {
        weak var writer: AssetWriter?
        var frozen = false
        var expectsRealTime = false
        var transform = AffineTransform.identity
        var queued = 0
        var finished = false
        var lastTime: MediaTime?
        var format: FormatDescription?
        var pull: (queue: DispatchQueue, block: @Sendable () -> Void)?
        var pullRunning = false
        var appended = 0
        var notReadyCount = 0
    }

    /// Validates the settings up front: an unknown key, an impossible value or an unavailable
    /// codec throws an error naming it.
    public init(mediaType: MediaType, outputSettings: OutputSettings?) throws(CaptureError) {
        self.mediaType = mediaType
        self.outputSettings = outputSettings
        switch mediaType {
        case .video:
            videoSettings = try outputSettings.map { (s) throws(CaptureError) in try VideoOutputSettings(s) }
            audioSettings = nil
        case .audio:
            audioSettings = try outputSettings.map { (s) throws(CaptureError) in try AudioOutputSettings(s) }
            videoSettings = nil
        }
    }

    /// The writer this input was added to.
    public var writer: AssetWriter? { state.withLock { $0.writer } }

    /// True for capture sources; cannot change after `startWriting()`. Real-time inputs get a
    /// deeper queue (capture cannot wait long).
    public var expectsMediaDataInRealTime: Bool {
        get { state.withLock { $0.expectsRealTime } }
        set { state.withLock { if !$0.frozen { $0.expectsRealTime = newValue } } }
    }

    /// The track's preferred transform (display matrix); right angles only, set before writing.
    public var transform: AffineTransform {
        get { state.withLock { $0.transform } }
        set { state.withLock { if !$0.frozen { $0.transform = newValue } } }
    }

    /// Samples the input holds before it stops being ready.
    public var queueCapacity: Int {
        let realtime = expectsMediaDataInRealTime
        return mediaType == .video ? (realtime ? 4 : 2) : (realtime ? 16 : 4)
    }

    /// Samples appended and accepted so far.
    public var appendedSampleCount: Int { state.withLock { $0.appended } }
    /// How many times `isReadyForMoreMediaData` answered false while writing.
    public var notReadyCount: Int { state.withLock { $0.notReadyCount } }

    /// True while the writer is writing and this input's queue has room.
    public var isReadyForMoreMediaData: Bool {
        let capacity = queueCapacity
        let writing = writer?.status == .writing
        return state.withLock { s in
            let ready = writing && !s.finished && s.queued < capacity
            if writing && !s.finished && !ready { s.notReadyCount += 1 }
            return ready
        }
    }

    func attach(to writer: AssetWriter) { state.withLock { $0.writer = writer } }
    func freeze() { state.withLock { $0.frozen = true } }

    /// Queues a sample for writing. Throws when the input is not ready (a programmer error: check
    /// `isReadyForMoreMediaData`), and when the sample is out of order or of another format — the
    /// writer then fails with that reason.
    public func append(_ sample: SampleBuffer) throws(CaptureError) {
        guard let writer else { throw .invalidState("the input is not attached to a writer") }
        switch writer.status {
        case .writing: break
        case .failed: throw writer.error ?? .invalidState("the writer failed")
        default: throw .invalidState("the writer is \(writer.status.rawValue); samples can be appended only while it is writing")
        }
        guard writer.sessionStarted else { throw .invalidState("call startSession(atSourceTime:) before appending samples") }
        let capacity = queueCapacity
        enum Check { case ok, notReady, finished, failure(CaptureError) }
        let check: Check = state.withLock { s in
            if s.finished { return .finished }
            if sample.mediaType != mediaType {
                return .failure(.invalidArgument("a \(sample.mediaType.rawValue) sample was appended to the \(mediaType.rawValue) input"))
            }
            if let format = s.format, format != sample.formatDescription {
                return .failure(.invalidArgument("the input's samples changed format from \(format) to \(sample.formatDescription)"))
            }
            if let last = s.lastTime, sample.presentationTime <= last {
                return .failure(.invalidArgument("\(mediaType.rawValue) sample at \(sample.presentationTime.seconds) s appended after one at \(last.seconds) s (out of order)"))
            }
            if !sample.presentationTime.isNumeric { return .failure(.invalidArgument("a sample without a numeric presentation time")) }
            if s.queued >= capacity { return .notReady }
            s.format = sample.formatDescription
            s.lastTime = sample.presentationTime
            s.queued += 1
            s.appended += 1
            return .ok
        }
        switch check {
        case .ok: writer.enqueue(sample, from: self)
        case .notReady: throw .invalidState("the \(mediaType.rawValue) input is not ready for more media data; wait for isReadyForMoreMediaData")
        case .finished: throw .invalidState("the \(mediaType.rawValue) input was marked as finished")
        case .failure(let error):
            writer.fail(error)
            throw error
        }
    }

    /// No more samples will come; the writer can finish this track.
    public func markAsFinished() {
        let (writer, first) = state.withLock { s -> (AssetWriter?, Bool) in
            defer { s.finished = true; s.pull = nil }
            return (s.writer, !s.finished)
        }
        if first { writer?.inputFinished(self) }
    }

    /// Pulls samples from `block` on `queue` whenever the input is ready: the block should append
    /// while `isReadyForMoreMediaData` holds and call `markAsFinished()` when the source ends.
    public func requestMediaDataWhenReady(on queue: DispatchQueue, using block: @escaping @Sendable () -> Void) {
        state.withLock { $0.pull = (queue, block) }
        wake()
    }

    /// A queued sample was written (or discarded).
    func dequeued() {
        state.withLock { $0.queued -= 1 }
        wake()
    }

    /// Runs the pull block if one is registered, idle and the input has room.
    func wake() {
        let capacity = queueCapacity
        let writing = writer?.status == .writing
        let pull = state.withLock { s -> (queue: DispatchQueue, block: @Sendable () -> Void)? in
            guard writing, !s.finished, !s.pullRunning, s.queued < capacity, let pull = s.pull else { return nil }
            s.pullRunning = true
            return pull
        }
        guard let pull else { return }
        pull.queue.async {
            pull.block()
            self.state.withLock { $0.pullRunning = false }
            self.wake()
        }
    }
}
