import ArgumentParser
import CaptureKit
import Foundation

extension FlashMode: ExpressibleByArgument {}

struct PhotoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photo", abstract: "Take a JPEG still from a camera.",
        discussion: "The rotation is written as the EXIF orientation; the pixels stay as the camera delivered them.")

    @Option(help: "Camera unique ID (e.g. sim:back).")
    var camera: String

    @Option(help: "JPEG quality 0.0-1.0.")
    var quality: Double = 0.9

    @Option(help: "Flash: off, on or auto (the camera's torch fires for the captured frame).")
    var flash: FlashMode = .off

    @Option(help: "Clockwise rotation recorded as EXIF orientation: 0, 90, 180 or 270.")
    var rotation: Int = 0

    @Option(help: "Frame size WxH; picks the camera format of that size.")
    var size: String?

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    @Flag(help: "Print the summary as JSON.")
    var json = false

    @Flag(help: "Replace OUTPUT if it is a regular file (atomically); a folder, link, FIFO or device there is never replaced.")
    var overwrite = false

    @Argument(help: "Output file (.jpg or .jpeg).")
    var output: String

    struct Summary: Codable {
        var output: String
        var camera: String
        var width: Int
        var height: Int
        var bytes: Int
        var exifOrientation: Int
        var timestamp: Double
        var flash: Bool
    }

    func validate() throws {
        guard (0...1).contains(quality) else { throw ValidationError("--quality must be between 0.0 and 1.0, not \(quality)") }
        guard [0, 90, 180, 270].contains(rotation) else { throw ValidationError("--rotation must be 0, 90, 180 or 270, not \(rotation)") }
        if let size, Dimensions(parsing: size) == nil { throw ValidationError("--size must look like 1280x720, not '\(size)'") }
        // The photo is a JPEG: a name that says otherwise (.png, .mp4) would mislabel its bytes.
        let ext = (output as NSString).pathExtension.lowercased()
        guard ext == "jpg" || ext == "jpeg" else {
            throw ValidationError("the output must be named .jpg or .jpeg (photo writes a JPEG), not '\(ext.isEmpty ? (output as NSString).lastPathComponent : "." + ext)'")
        }
    }

    func run() async throws {
        do { try OutputPath.checkNew(output, existing: .init(overwrite: overwrite)) } catch { throw CommandFailure(error, overwritable: true) }
        let registry = CaptureKit.makeRegistry(seed: seed)
        let session = CaptureSession(pace: .realtime)
        let photoOutput = PhotoOutput()
        let photo: CapturePhoto
        do {
            try session.setSessionPreset(.inputPriority)
            let device = try registry.device(uniqueID: camera)
            try session.addInput(CaptureDeviceInput(device: device))
            if let dimensions = size.flatMap(Dimensions.init(parsing:)) {
                guard let format = device.format(matching: dimensions, frameRate: nil) else {
                    throw CaptureError.formatNotSupported("\(camera) has no \(dimensions) format")
                }
                try device.lockForConfiguration()
                defer { device.unlockForConfiguration() }
                try device.setActiveFormat(format)
            }
            try session.addOutput(photoOutput)
            try photoOutput.attachment.connections.first?.setVideoRotationAngle(rotation)
            try session.startRunning()
            defer { session.stopRunning() }
            photo = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CapturePhoto, any Error>) in
                let delegate = ContinuationPhotoDelegate(continuation)
                do {
                    try photoOutput.capturePhoto(with: PhotoSettings(quality: quality, flashMode: flash), delegate: delegate)
                } catch {
                    delegate.resume(nil, error)
                }
            }
        } catch let error as CaptureError {
            throw CommandFailure(error)
        }
        let bytes = photo.fileDataRepresentation()
        do {
            try OutputPath.write(bytes, to: output, existing: .init(overwrite: overwrite))
        } catch {
            throw CommandFailure(error, overwritable: true)
        }
        let summary = Summary(output: output, camera: camera, width: photo.resolvedSettings.photoDimensions.width,
                              height: photo.resolvedSettings.photoDimensions.height, bytes: bytes.count,
                              exifOrientation: Int(photo.exifOrientation), timestamp: photo.timestamp.seconds,
                              flash: photo.resolvedSettings.isFlashEnabled)
        if json {
            print(encodeJSON(summary, command: "photo"))
        } else {
            print("Wrote \(output): \(summary.width)x\(summary.height) JPEG, \(summary.bytes) bytes, EXIF orientation \(summary.exifOrientation), flash \(summary.flash ? "fired" : "off")")
        }
    }
}

/// Resumes a continuation once, from the delegate's finish callback.
private final class ContinuationPhotoDelegate: PhotoCaptureDelegate {
    private let continuation: Locked<CheckedContinuation<CapturePhoto, any Error>?>

    init(_ continuation: CheckedContinuation<CapturePhoto, any Error>) {
        self.continuation = Locked(continuation)
    }

    func resume(_ photo: CapturePhoto?, _ error: (any Error)?) {
        let c = continuation.withLock { c in
            defer { c = nil }
            return c
        }
        if let photo { c?.resume(returning: photo) } else { c?.resume(throwing: error ?? CaptureError.noDataRecorded) }
    }

    func photoOutput(_ output: PhotoOutput, didFinishProcessingPhoto photo: CapturePhoto?, error: CaptureError?) {
        resume(photo, error)
    }
}
