import CaptureCore
import CaptureDetection
import CaptureMedia
import Dispatch
import Foundation

/// Receives what a metadata output finds (AVCaptureMetadataOutputObjectsDelegate).
public protocol MetadataOutputObjectsDelegate: AnyObject, Sendable {
    /// One batch per frame that had objects in it; an empty batch once when every object has
    /// left the view. Runs on the delegate's queue, in frame order.
    func metadataOutput(_ output: MetadataOutput, didOutput objects: [MetadataObject], from connection: CaptureConnection)
}

/// Faces and machine-readable codes from a session's video (AVCaptureMetadataOutput), found by
/// real detectors: ZBar for codes, OpenCV's frontal-face cascade (Debian `opencv-data`) for faces.
///
/// - `availableMetadataObjectTypes` is empty until the output is in a session with a video input.
/// - Detection reads the luma plane (no RGB); only `rectOfInterest` is searched.
/// - Real time: detection runs on the output's own queue. A frame arriving while the detector is
///   still busy is skipped (counted in `statistics`), so capture and recording never wait for it.
/// - Virtual time: every frame is detected, in order, on the delivery thread (the session waits),
///   so results are a function of the frames alone — deterministic, like the rest of the
///   simulator's virtual clock.
public final class MetadataOutput: CaptureOutput {
    public let attachment = OutputAttachment()

    /// How much detection kept up.
    public struct Statistics: Sendable, Hashable {
        /// Video frames the output saw while it had types and a consumer.
        public var framesOffered = 0
        /// Frames the detectors ran on.
        public var framesDetected = 0
        /// Frames skipped because the detector was still busy (real time only).
        public var framesSkipped = 0
        /// Frames detected per second of media (PTS span from the first to the last detected frame).
        public var detectionRate: Double = 0
        /// Batches delivered (including the empty "objects left" batches).
        public var batchesDelivered = 0
        /// PTS of the first and the last detected frame.
        public var firstFrameTime: MediaTime?
        public var lastFrameTime: MediaTime?
        /// Media seconds detected so far (last − first PTS; 0 before two frames).
        public var mediaSeconds: Double {
            guard let a = firstFrameTime, let b = lastFrameTime else { return 0 }
            return (b - a).seconds
        }
    }

    private struct State {
        var types: [MetadataObjectType] = []
        var rect = CGRect(x: 0, y: 0, width: 1, height: 1)
        var delegate: (any MetadataOutputObjectsDelegate)?
        var queue: DispatchQueue?
        var streams: [Int: MetadataBatchSequence.Feed] = [:]
        var nextStream = 0
        var busy = false
        var stats = Statistics()
        var firstPTS: MediaTime?
        var lastPTS: MediaTime?
        var hadObjects = false
    }

    private struct Detectors {
        var scanner: CodeScanner?
        var faces: FaceDetector?
        var tracker = FaceTracker()
        var jpeg: JPEGCodec?
        var converter: PixelConverter?
    }

    private let state = Locked(State())
    private let detectors = Locked(Detectors())
    private let detectionQueue = DispatchQueue(label: "CaptureKit.MetadataOutput.detection")

    /// Faces are searched in an image about this many rows high: frames are shrunk by
    /// k = max(1, height ÷ 360) (720p: ½, 1080p: ⅓), k² less work; the smallest face found is then
    /// about 24·k pixels (the cascade's window), 72 px at 1080p.
    public static let faceSearchHeight = 360

    public init() {}

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }

    // MARK: Types

    /// Every type the detectors can find: the codes ZBar decodes, and faces when OpenCV's cascade is
    /// installed.
    public static var supportedMetadataObjectTypes: [MetadataObjectType] {
        MetadataObjectType.codes.map(\.0) + (FaceDetector.defaultCascadePath() != nil ? [.face] : [])
    }

    /// Empty until the output is in a session with a video input; then `supportedMetadataObjectTypes`.
    public var availableMetadataObjectTypes: [MetadataObjectType] {
        attachment.connections.contains { $0.mediaType == .video } ? Self.supportedMetadataObjectTypes : []
    }

    /// The types to look for (default none: AVFoundation's default).
    public var metadataObjectTypes: [MetadataObjectType] { state.withLock { $0.types } }

    /// Sets the types to look for; each must be in `availableMetadataObjectTypes`, else this throws
    /// naming the type and what is available (AVFoundation raises an exception).
    public func setMetadataObjectTypes(_ types: [MetadataObjectType]) throws(CaptureError) {
        let available = availableMetadataObjectTypes
        for type in types where !available.contains(type) {
            throw .metadataObjectTypeNotAvailable(type: type.name, available: available.map(\.name))
        }
        var unique: [MetadataObjectType] = []
        for t in types where !unique.contains(t) { unique.append(t) }
        let symbologies = Set(MetadataObjectType.codes.filter { unique.contains($0.0) }.flatMap(\.2))
        let wantsFaces = unique.contains(.face)
        // The detectors are made under their lock (they are not Sendable: one thread at a time).
        try detectors.withLock { (d: inout Detectors) throws(CaptureError) in
            if !wantsFaces { d.faces = nil } else if d.faces == nil { d.faces = try FaceDetector() }
            d.scanner = symbologies.isEmpty ? nil : try CodeScanner(symbologies: symbologies)
        }
        state.withLock { $0.types = unique }
        attachment.demandChanged()
    }

    // MARK: Region

    /// The normalised region searched (native orientation, origin top-left; default the whole frame).
    public var rectOfInterest: CGRect { state.withLock { $0.rect } }

    /// Sets the region; it must lie within 0…1 and have a positive size.
    public func setRectOfInterest(_ rect: CGRect) throws(CaptureError) {
        let r = rect.standardized
        guard r.origin.x.isFinite, r.origin.y.isFinite, r.width.isFinite, r.height.isFinite,
              r.minX >= 0, r.minY >= 0, r.maxX <= 1.000_001, r.maxY <= 1.000_001, r.width > 0, r.height > 0 else {
            throw .invalidArgument("rectOfInterest \(rect) must be a normalised rectangle inside (0, 0, 1, 1) with a positive width and height")
        }
        state.withLock { $0.rect = r }
    }

    // MARK: Consumers

    public func setMetadataObjectsDelegate(_ delegate: (any MetadataOutputObjectsDelegate)?, queue: DispatchQueue?) {
        state.withLock {
            $0.delegate = delegate
            $0.queue = delegate == nil ? nil : (queue ?? DispatchQueue(label: "CaptureKit.MetadataOutput.delegate"))
        }
        attachment.demandChanged()
    }

    /// The same batches as the delegate gets, as an AsyncSequence. Virtual time: the session waits
    /// while a reader has `MetadataBatchSequence.unreadLimit` batches unread (nothing is lost, and a
    /// reader that changes the scene sees the change in time); real time: unbounded (batches are small).
    public func metadataObjectBatches() -> MetadataBatchSequence {
        let (stream, continuation) = AsyncStream<[MetadataObject]>.makeStream()
        let feed = MetadataBatchSequence.Feed(continuation: continuation) { [weak self] in self?.attachment.demandChanged() }
        let id = state.withLock { s in
            s.nextStream += 1
            s.streams[s.nextStream] = feed
            return s.nextStream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
            self?.attachment.demandChanged()
        }
        attachment.demandChanged()
        return MetadataBatchSequence(stream: stream, feed: feed)
    }

    public var statistics: Statistics {
        state.withLock { s in
            var st = s.stats
            st.firstFrameTime = s.firstPTS
            st.lastFrameTime = s.lastPTS
            if let a = s.firstPTS, let b = s.lastPTS, b > a {
                st.detectionRate = Double(st.framesDetected - 1) / (b - a).seconds
            }
            return st
        }
    }

    // MARK: CaptureOutput

    public var demand: OutputDemand {
        state.withLock { s in
            if s.types.isEmpty || (s.delegate == nil && s.streams.isEmpty) { return .idle }
            return s.streams.values.contains { $0.unreadCount >= MetadataBatchSequence.unreadLimit } ? .busy : .ready
        }
    }

    public func sessionDidStop() {
        // Real time: let a detection in flight publish first, so every batch of this run is
        // queued to the delegate once the session has stopped.
        detectionQueue.sync {}
        // A stop clears the view: the next run starts with no objects.
        state.withLock { $0.hadObjects = false }
        detectors.withLock { $0.tracker = FaceTracker() }
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard connection.mediaType == .video, let pixels = sample.pixelBuffer else { return }
        enum Plan { case ignore, skip, detect(types: [MetadataObjectType], rect: CGRect) }
        let realtime = attachment.pace == .realtime
        let plan: Plan = state.withLock { s in
            guard !s.types.isEmpty, s.delegate != nil || !s.streams.isEmpty else { return .ignore }
            s.stats.framesOffered += 1
            if realtime {
                if s.busy { s.stats.framesSkipped += 1; return .skip }
                s.busy = true
            }
            return .detect(types: s.types, rect: s.rect)
        }
        guard case .detect(let types, let rect) = plan else { return }
        let frame = Dimensions(width: pixels.width, height: pixels.height)
        let region = PixelRegion(x: Int((rect.minX * Double(frame.width)).rounded()), y: Int((rect.minY * Double(frame.height)).rounded()),
                                 width: Int((rect.width * Double(frame.width)).rounded()),
                                 height: Int((rect.height * Double(frame.height)).rounded()))
        // Planar and YUYV luma is copied now, so the device's buffer goes back at once; other
        // formats (MJPEG, RGB) are converted on the detection queue.
        let luma = LumaImage.copy(from: pixels, region: region)
        let work: @Sendable () -> Void = { [self] in
            let objects = detect(luma: luma, pixels: luma == nil ? pixels : nil, region: region, types: types, sample: sample)
            publish(objects, at: sample.presentationTime, connection)
        }
        if realtime {
            detectionQueue.async {
                work()
                self.state.withLock { $0.busy = false }
            }
        } else {
            work()
        }
    }

    // MARK: Detection

    private func detect(luma: LumaImage?, pixels: PixelBuffer?, region: PixelRegion, types: [MetadataObjectType],
                        sample: SampleBuffer) -> [MetadataObject]? {
        detectors.withLock { d -> [MetadataObject]? in
            var image = luma
            if image == nil, let pixels { image = Self.lumaByConverting(pixels, region: region, &d) }
            guard let image else { return nil }
            let frame = image.frameSize
            let w = Double(frame.width), h = Double(frame.height)
            func normal(_ b: PixelBox) -> CGRect { CGRect(x: b.x / w, y: b.y / h, width: b.width / w, height: b.height / h) }
            var objects: [MetadataObject] = []
            if let scanner = d.scanner {
                for code in scanner.scan(image) {
                    guard let type = MetadataObjectType.codes.first(where: { $0.2.contains(code.symbology) })?.0, types.contains(type) else { continue }
                    // UPC-A is EAN-13 with a leading zero (as AVFoundation reports it).
                    let value = code.symbology == .upca ? "0" + code.value : code.value
                    objects.append(MetadataObject(type: type, time: sample.presentationTime, duration: sample.duration,
                                                  bounds: normal(code.bounds), stringValue: value,
                                                  corners: code.points.map { CGPoint(x: $0.x / w, y: $0.y / h) }))
                }
            }
            if types.contains(.face), let faces = d.faces {
                let k = max(1, frame.height / Self.faceSearchHeight)
                let found = (try? faces.detect(image, downscale: k)) ?? []
                for (id, face) in d.tracker.assign(found) {
                    let b = normal(face.bounds)
                    objects.append(MetadataObject(type: .face, time: sample.presentationTime, duration: sample.duration, bounds: b,
                                                  corners: [CGPoint(x: b.minX, y: b.minY), CGPoint(x: b.maxX, y: b.minY),
                                                            CGPoint(x: b.maxX, y: b.maxY), CGPoint(x: b.minX, y: b.maxY)],
                                                  faceID: id))
                }
            }
            return objects
        }
    }

    /// MJPEG: decoded; other formats: converted to I420; then the luma region is copied.
    private static func lumaByConverting(_ pixels: PixelBuffer, region: PixelRegion, _ d: inout Detectors) -> LumaImage? {
        do {
            if pixels.format == .mjpeg {
                if d.jpeg == nil { d.jpeg = try JPEGCodec() }
                let bytes = pixels.withCompressedData { [UInt8]($0) }
                return LumaImage.copy(from: try d.jpeg!.decode(bytes), region: region)
            }
            let size = Dimensions(width: pixels.width, height: pixels.height)
            if d.converter?.source.format != pixels.format || d.converter?.source.dimensions != size {
                d.converter = try PixelConverter(from: pixels.format, size, to: .yuv420, size)
            }
            let out = PixelBuffer(format: .yuv420, width: size.width, height: size.height)
            try d.converter!.convert(pixels, into: out)
            return LumaImage.copy(from: out, region: region)
        } catch {
            return nil
        }
    }

    private func publish(_ found: [MetadataObject]?, at pts: MediaTime, _ connection: CaptureConnection) {
        guard let objects = found else { return }
        let (deliver, delegate, queue, streams) = state.withLock { s in
            s.stats.framesDetected += 1
            if s.firstPTS == nil { s.firstPTS = pts }
            s.lastPTS = pts
            let deliver = !objects.isEmpty || s.hadObjects
            s.hadObjects = !objects.isEmpty
            if deliver { s.stats.batchesDelivered += 1 }
            return (deliver, s.delegate, s.queue, Array(s.streams.values))
        }
        guard deliver else { return }
        for stream in streams { stream.yield(objects) }
        if !streams.isEmpty { attachment.demandChanged() }
        if let delegate, let queue {
            queue.async { delegate.metadataOutput(self, didOutput: objects, from: connection) }
        }
    }
}

/// A metadata output's batches as an AsyncSequence that tells the output how many are unread.
public struct MetadataBatchSequence: AsyncSequence, Sendable {
    public typealias Element = [MetadataObject]
    /// Unread batches at which a virtual-time session waits for the reader.
    public static let unreadLimit = 4

    let stream: AsyncStream<[MetadataObject]>
    let feed: Feed

    final class Feed: Sendable {
        let continuation: AsyncStream<[MetadataObject]>.Continuation
        private let unread = Locked(0)
        let onRead: @Sendable () -> Void
        init(continuation: AsyncStream<[MetadataObject]>.Continuation, onRead: @escaping @Sendable () -> Void) {
            self.continuation = continuation
            self.onRead = onRead
        }
        var unreadCount: Int { unread.withLock { $0 } }
        func yield(_ batch: [MetadataObject]) {
            if case .enqueued = continuation.yield(batch) { unread.withLock { $0 += 1 } }
        }
        func didRead() {
            unread.withLock { $0 -= 1 }
            onRead()
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<[MetadataObject]>.Iterator
        let feed: Feed
        public mutating func next() async -> [MetadataObject]? {
            let batch = await base.next()
            if batch != nil { feed.didRead() }
            return batch
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), feed: feed) }
}

extension MetadataOutput {
    /// The object in the coordinates of `connection`'s pictures: rotated clockwise by its
    /// `videoRotationAngle`, then mirrored left-right if `isVideoMirrored` — what a
    /// `VideoDataOutput` on that connection delivers and what a player shows of a movie recorded
    /// through it. CaptureKit's equivalent of AVCaptureVideoPreviewLayer's
    /// `transformedMetadataObject(for:)` (there is no preview layer; coordinates stay normalised,
    /// 0…1, origin top-left; multiply by the delivered frame's size for pixels).
    public static func transformedMetadataObject(_ object: MetadataObject, for connection: CaptureConnection) -> MetadataObject {
        transformedMetadataObject(object, rotationAngle: connection.videoRotationAngle, mirrored: connection.isVideoMirrored)
    }

    /// The same for an explicit clockwise rotation (0, 90, 180, 270) and mirroring.
    public static func transformedMetadataObject(_ object: MetadataObject, rotationAngle: Int, mirrored: Bool) -> MetadataObject {
        func map(_ p: CGPoint) -> CGPoint {
            var q: CGPoint
            switch ((rotationAngle % 360) + 360) % 360 {
            case 90: q = CGPoint(x: 1 - p.y, y: p.x)
            case 180: q = CGPoint(x: 1 - p.x, y: 1 - p.y)
            case 270: q = CGPoint(x: p.y, y: 1 - p.x)
            default: q = p
            }
            if mirrored { q.x = 1 - q.x }
            return q
        }
        var out = object
        let b = object.bounds
        let corners = [CGPoint(x: b.minX, y: b.minY), CGPoint(x: b.maxX, y: b.maxY)].map(map)
        out.bounds = CGRect(x: min(corners[0].x, corners[1].x), y: min(corners[0].y, corners[1].y),
                            width: abs(corners[0].x - corners[1].x), height: abs(corners[0].y - corners[1].y))
        out.corners = object.corners.map(map)
        return out
    }
}
