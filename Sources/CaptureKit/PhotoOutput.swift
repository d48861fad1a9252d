import CaptureCore
import CaptureMedia
import Dispatch
import Synchronization

/// Flash for a still (AVCaptureDevice.FlashMode).
public enum FlashMode: String, Sendable, Hashable, CaseIterable { case off, on, auto }

/// One photo request's settings (AVCapturePhotoSettings). Every request needs a fresh object:
/// reusing one is a programmer error (`invalidArgument`).
public final class PhotoSettings: Sendable {
    private static let counter = Atomic<Int64>(0)

    public let uniqueID: Int64
    /// JPEG quality 0…1.
    public let quality: Double
    public let flashMode: FlashMode
    /// Ask for the active format's high-resolution still size (needs the output's
    /// `isHighResolutionCaptureEnabled`, as in AVFoundation).
    public let isHighResolutionPhotoEnabled: Bool

    public init(quality: Double = 0.9, flashMode: FlashMode = .off, isHighResolutionPhotoEnabled: Bool = false) {
        uniqueID = Self.counter.wrappingAdd(1, ordering: .relaxed).newValue
        self.quality = quality
        self.flashMode = flashMode
        self.isHighResolutionPhotoEnabled = isHighResolutionPhotoEnabled
    }

    /// A new settings object with the same choices (AVCapturePhotoSettings(from:)).
    public convenience init(from other: PhotoSettings) {
        self.init(quality: other.quality, flashMode: other.flashMode, isHighResolutionPhotoEnabled: other.isHighResolutionPhotoEnabled)
    }
}

/// What a request turned into once validated (AVCaptureResolvedPhotoSettings).
public struct ResolvedPhotoSettings: Sendable, Hashable {
    public let uniqueID: Int64
    public let photoDimensions: Dimensions
    public let isFlashEnabled: Bool
    public let expectedPhotoCount = 1
}

/// A captured still (AVCapturePhoto).
public struct CapturePhoto: Sendable {
    public let resolvedSettings: ResolvedPhotoSettings
    /// PTS of the frame the photo was taken from.
    public let timestamp: MediaTime
    /// EXIF orientation written into the file (1 = upright).
    public let exifOrientation: UInt16
    private let jpeg: [UInt8]

    init(resolvedSettings: ResolvedPhotoSettings, timestamp: MediaTime, exifOrientation: UInt16, jpeg: [UInt8]) {
        self.resolvedSettings = resolvedSettings
        self.timestamp = timestamp
        self.exifOrientation = exifOrientation
        self.jpeg = jpeg
    }

    /// The JPEG file's bytes.
    public func fileDataRepresentation() -> [UInt8] { jpeg }
}

/// The phases of one photo request (AVCapturePhotoCaptureDelegate), called in this order on the
/// output's delegate queue: willBeginCapture, willCapturePhoto, didCapturePhoto,
/// didFinishProcessingPhoto (always, with a photo or an error), didFinishCapture.
public protocol PhotoCaptureDelegate: AnyObject, Sendable {
    func photoOutput(_ output: PhotoOutput, willBeginCaptureFor settings: ResolvedPhotoSettings)
    func photoOutput(_ output: PhotoOutput, willCapturePhotoFor settings: ResolvedPhotoSettings)
    func photoOutput(_ output: PhotoOutput, didCapturePhotoFor settings: ResolvedPhotoSettings)
    func photoOutput(_ output: PhotoOutput, didFinishProcessingPhoto photo: CapturePhoto?, error: CaptureError?)
    func photoOutput(_ output: PhotoOutput, didFinishCaptureFor settings: ResolvedPhotoSettings, error: CaptureError?)
}

extension PhotoCaptureDelegate {
    public func photoOutput(_ output: PhotoOutput, willBeginCaptureFor settings: ResolvedPhotoSettings) {}
    public func photoOutput(_ output: PhotoOutput, willCapturePhotoFor settings: ResolvedPhotoSettings) {}
    public func photoOutput(_ output: PhotoOutput, didCapturePhotoFor settings: ResolvedPhotoSettings) {}
    public func photoOutput(_ output: PhotoOutput, didFinishCaptureFor settings: ResolvedPhotoSettings, error: CaptureError?) {}
}

/// Takes JPEG stills from a session's video (AVCapturePhotoOutput). The photo is the next frame
/// after the request, compressed from its YUV planes by libturbojpeg; the connection's rotation
/// and mirroring are written as the EXIF orientation (the pixels stay as the sensor delivered them).
/// Flash: `.on` (or `.auto`, which the simulator treats as on) turns the device's torch on for
/// the captured frame when the device has one; asking for `.on` without one is an error.
/// High resolution: with `isHighResolutionCaptureEnabled` and a request asking for it, the still
/// has the active format's high-resolution size. The simulator has one sensor mode per format,
/// so it scales the captured frame up to that size with libswscale (bicubic): the size and
/// framing are a real camera's, the extra detail is not.
public final class PhotoOutput: CaptureOutput {
    public let attachment = OutputAttachment()
    private let delegateQueue = DispatchQueue(label: "CaptureKit.PhotoOutput.delegate")
    private let state = Locked(State())
    private let codec = Locked<JPEGCodec?>(nil)

    struct Pending: Sendable {
        let settings: PhotoSettings
        let resolved: ResolvedPhotoSettings
        let finish: @Sendable (CapturePhoto?, CaptureError?) -> Void
        let phase: @Sendable (Phase) -> Void
        var flashArmed = false
    }

    enum Phase: Sendable { case willCapture, didCapture }

    private struct State {
        var pending: [Pending] = []
        var usedIDs: Set<Int64> = []
        var highResolutionEnabled = false
    }

    /// Whether requests may ask for high-resolution stills (AVCapturePhotoOutput.isHighResolutionCaptureEnabled).
    public var isHighResolutionCaptureEnabled: Bool {
        get { state.withLock { $0.highResolutionEnabled } }
        set { state.withLock { $0.highResolutionEnabled = newValue } }
    }

    public init() {}

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }

    public var demand: OutputDemand { state.withLock { $0.pending.isEmpty ? .idle : .ready } }

    public func sessionDidStop() {
        let pending = state.withLock { s -> [Pending] in
            defer { s.pending = [] }
            return s.pending
        }
        for request in pending { request.finish(nil, .sessionNotRunning) }
    }

    /// Whether the video device can flash (it has a torch control).
    public var isFlashSupported: Bool {
        guard let connection = videoConnection, let device = try? connection.input.device.driverDevice() else { return false }
        return device.controls.contains { $0.id == .torchMode }
    }

    private var videoConnection: CaptureConnection? {
        attachment.connections.first { $0.mediaType == .video && $0.isActive }
    }

    /// Requests a photo; settings and delegate are validated now (errors throw), the phases follow.
    public func capturePhoto(with settings: PhotoSettings, delegate: any PhotoCaptureDelegate) throws(CaptureError) {
        let resolved = try validate(settings)
        let pending = Pending(
            settings: settings, resolved: resolved,
            finish: { [weak self] photo, error in
                guard let self else { return }
                self.delegateQueue.async {
                    delegate.photoOutput(self, didFinishProcessingPhoto: photo, error: error)
                    delegate.photoOutput(self, didFinishCaptureFor: resolved, error: error)
                }
            },
            phase: { [weak self] phase in
                guard let self else { return }
                self.delegateQueue.async {
                    switch phase {
                    case .willCapture: delegate.photoOutput(self, willCapturePhotoFor: resolved)
                    case .didCapture: delegate.photoOutput(self, didCapturePhotoFor: resolved)
                    }
                }
            })
        delegateQueue.async { delegate.photoOutput(self, willBeginCaptureFor: resolved) }
        enqueue(pending)
    }

    /// Shared with the legacy still-image output: queue a validated request.
    func enqueue(_ pending: Pending) {
        var request = pending
        if request.resolved.isFlashEnabled, let device = videoConnection.flatMap({ try? $0.input.device.driverDevice() }) {
            // The flash is the torch, on for the captured frame (frames already made stay dark).
            request.flashArmed = (try? device.setValue(.menu("on"), for: .torchMode)) != nil
        }
        state.withLock { $0.pending.append(request) }
        attachment.demandChanged()
    }

    func validate(_ settings: PhotoSettings) throws(CaptureError) -> ResolvedPhotoSettings {
        guard (0...1).contains(settings.quality) else {
            throw .invalidArgument("photo quality \(settings.quality) is outside 0.0–1.0")
        }
        guard let connection = videoConnection else { throw .noInputs }
        guard attachment.isSessionRunning else { throw .sessionNotRunning }
        if settings.flashMode == .on && !isFlashSupported {
            throw .invalidArgument("flash mode on: \(connection.input.device.uniqueID) has no flash; check isFlashSupported")
        }
        let fresh = state.withLock { s in s.usedIDs.insert(settings.uniqueID).inserted }
        guard fresh else {
            throw .invalidArgument("photo settings \(settings.uniqueID) were already used; create a new PhotoSettings per request")
        }
        guard var dimensions = connection.input.device.activeFormat.dimensions else { throw .noInputs }
        if settings.isHighResolutionPhotoEnabled {
            guard isHighResolutionCaptureEnabled else {
                throw .invalidArgument("high-resolution photo requested but the output's isHighResolutionCaptureEnabled is false")
            }
            if let high = connection.input.device.activeFormat.highResolutionStillImageDimensions { dimensions = high }
        }
        return ResolvedPhotoSettings(uniqueID: settings.uniqueID, photoDimensions: dimensions,
                                     isFlashEnabled: settings.flashMode != .off && isFlashSupported)
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer else { return }
        let request = state.withLock { s -> Pending? in s.pending.isEmpty ? nil : s.pending.removeFirst() }
        guard let request else { return }
        attachment.demandChanged()
        request.phase(.willCapture)
        request.phase(.didCapture)
        if request.flashArmed, let device = try? connection.input.device.driverDevice() {
            try? device.setValue(.menu("off"), for: .torchMode)
        }
        let orientation = ExifOrientation.value(rotation: connection.videoRotationAngle, mirrored: connection.isVideoMirrored)
        do throws(CaptureError) {
            var still = pixels
            let size = request.resolved.photoDimensions
            if size.width != pixels.width || size.height != pixels.height {
                let scaled = PixelBuffer(format: .yuv420, width: size.width, height: size.height)
                try PixelConverter(from: pixels.format, Dimensions(width: pixels.width, height: pixels.height),
                                   to: .yuv420, size).convert(pixels, into: scaled)
                still = scaled
            }
            let image = still
            let jpeg = try codec.withLock { (c: inout JPEGCodec?) throws(CaptureError) -> [UInt8] in
                if c == nil { c = try JPEGCodec() }
                return try c!.encode(image, quality: request.settings.quality)
            }
            let tagged = try ExifOrientation.inserting(orientation, into: jpeg)
            request.finish(CapturePhoto(resolvedSettings: request.resolved, timestamp: sample.presentationTime,
                                        exifOrientation: orientation, jpeg: tagged), nil)
        } catch {
            request.finish(nil, error)
        }
    }
}

/// The legacy still-image API from seed 000 (AVCaptureStillImageOutput): JPEG data for the next frame.
public final class StillImageOutput: CaptureOutput {
    private let photo = PhotoOutput()
    /// JPEG quality 0…1 (AVVideoQualityKey in `outputSettings`).
    public let quality: Double

    public init(quality: Double = 0.9) {
        self.quality = quality
    }

    public var attachment: OutputAttachment { photo.attachment }
    public func accepts(_ mediaType: MediaType) -> Bool { photo.accepts(mediaType) }
    public var demand: OutputDemand { photo.demand }
    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) { photo.receive(sample, from: connection) }
    public func sessionDidStop() { photo.sessionDidStop() }

    /// Captures the next frame as JPEG; the handler gets the bytes or the reason it could not.
    public func captureStillImageAsynchronously(from connection: CaptureConnection,
                                                completionHandler: @escaping @Sendable (Result<[UInt8], CaptureError>) -> Void) {
        let settings = PhotoSettings(quality: quality)
        do throws(CaptureError) {
            guard connection.output === self else { throw .invalidArgument("the connection does not belong to this output") }
            let resolved = try photo.validate(settings)
            photo.enqueue(PhotoOutput.Pending(settings: settings, resolved: resolved,
                                              finish: { photo, error in
                                                  if let photo { completionHandler(.success(photo.fileDataRepresentation())) }
                                                  else { completionHandler(.failure(error ?? .noDataRecorded)) }
                                              },
                                              phase: { _ in }))
        } catch {
            completionHandler(.failure(error))
        }
    }
}
