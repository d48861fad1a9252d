import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Records the order of a photo request's delegate phases.
final class PhaseRecorder: PhotoCaptureDelegate {
    let phases = Locked<[String]>([])
    let photo = Locked<CapturePhoto?>(nil)
    let error = Locked<CaptureError?>(nil)

    func photoOutput(_ output: PhotoOutput, willBeginCaptureFor settings: ResolvedPhotoSettings) { phases.withLock { $0.append("willBegin") } }
    func photoOutput(_ output: PhotoOutput, willCapturePhotoFor settings: ResolvedPhotoSettings) { phases.withLock { $0.append("willCapture") } }
    func photoOutput(_ output: PhotoOutput, didCapturePhotoFor settings: ResolvedPhotoSettings) { phases.withLock { $0.append("didCapture") } }
    func photoOutput(_ output: PhotoOutput, didFinishProcessingPhoto photo: CapturePhoto?, error: CaptureError?) {
        phases.withLock { $0.append("didFinishProcessing") }
        self.photo.withLock { $0 = photo }
        self.error.withLock { $0 = error }
    }
    func photoOutput(_ output: PhotoOutput, didFinishCaptureFor settings: ResolvedPhotoSettings, error: CaptureError?) {
        phases.withLock { $0.append("didFinishCapture") }
    }

    func waitForFinish() async {
        await waitUntil(timeout: .seconds(30)) { phases.withLock { $0.contains("didFinishCapture") } }
    }
}

@Suite struct PhotoOutputTests {
    private func rig() throws -> (CaptureSession, PhotoOutput) {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let output = PhotoOutput()
        try session.addOutput(output)
        try session.startRunning()
        return (session, output)
    }

    @Test func phasesRunInOrderAndTheRotationBecomesExifOrientation() async throws {
        let (session, output) = try rig()
        defer { session.stopRunning() }
        try #require(output.attachment.connections.first).setVideoRotationAngle(90)
        let recorder = PhaseRecorder()
        try output.capturePhoto(with: PhotoSettings(quality: 0.8), delegate: recorder)
        await recorder.waitForFinish()
        #expect(recorder.phases.withLock { $0 } == ["willBegin", "willCapture", "didCapture", "didFinishProcessing", "didFinishCapture"])
        let photo = try #require(recorder.photo.withLock { $0 })
        #expect(photo.exifOrientation == 6)
        let jpeg = photo.fileDataRepresentation()
        #expect(ExifOrientation.read(from: jpeg) == 6)
        #expect(photo.resolvedSettings.photoDimensions == Dimensions(width: 640, height: 480))
        // libturbojpeg decodes it (pixels unrotated, stamp readable) …
        let decoded = try JPEGCodec().decode(jpeg)
        #expect(decoded.width == 640 && decoded.height == 480)
        let index = FrameStampReader.frameIndex(in: LumaPlane(
            base: UnsafeRawBufferPointer(start: decoded.baseAddress(ofPlane: 0), count: decoded.bytesPerRow[0] * 480),
            width: 640, height: 480, bytesPerRow: decoded.bytesPerRow[0]))
        #expect(index == UInt32(photo.timestamp.value * 30 / Int64(photo.timestamp.timescale)))
        // … and so does ffmpeg, which also sees the EXIF orientation.
        let path = try TestSupport.temporaryDirectory() + "/photo.jpg"
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let check = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(check.status == 0 && check.stderr.isEmpty)
        let frames = try TestSupport.run("ffprobe", ["-v", "error", "-show_frames", "-of", "json", path])
        // ffmpeg reads the EXIF tag and turns it into a −90° (counter-clockwise) display rotation.
        #expect(frames.stdout.contains("\"rotation\": -90"), "\(frames.stdout.prefix(600))")
    }

    @Test func requestsAreValidatedWhenMade() throws {
        let (session, output) = try rig()
        defer { session.stopRunning() }
        let settings = PhotoSettings()
        let recorder = PhaseRecorder()
        try output.capturePhoto(with: settings, delegate: recorder)
        #expect(throws: CaptureError.self) { try output.capturePhoto(with: settings, delegate: recorder) }
        #expect(throws: CaptureError.self) { try output.capturePhoto(with: PhotoSettings(quality: 1.5), delegate: recorder) }
        #expect(output.isFlashSupported, "sim:back has a torch")
        // A copy is a new request.
        try output.capturePhoto(with: PhotoSettings(from: settings), delegate: recorder)
        let idle = PhotoOutput()
        #expect(throws: CaptureError.noInputs) { try idle.capturePhoto(with: PhotoSettings(), delegate: recorder) }

        // The front camera has no torch, so no flash.
        let front = CaptureSession(pace: .virtual)
        try front.setSessionPreset(.vga640x480)
        try front.addInput(CaptureDeviceInput(device: CaptureKit.makeRegistry().device(uniqueID: "sim:front")))
        let frontPhoto = PhotoOutput()
        try front.addOutput(frontPhoto)
        try front.startRunning()
        defer { front.stopRunning() }
        #expect(!frontPhoto.isFlashSupported)
        #expect(throws: CaptureError.self) { try frontPhoto.capturePhoto(with: PhotoSettings(flashMode: .on), delegate: recorder) }
    }

    @Test func flashLightsTheCapturedFrame() async throws {
        let (session, output) = try rig()
        defer { session.stopRunning() }
        func meanLuma(_ flash: FlashMode) async throws -> Double {
            let recorder = PhaseRecorder()
            try output.capturePhoto(with: PhotoSettings(flashMode: flash), delegate: recorder)
            await recorder.waitForFinish()
            let image = try JPEGCodec().decode(try #require(recorder.photo.withLock { $0 }).fileDataRepresentation())
            // Mean of the bars region (below the stamp, above the marker band).
            var sum = 0, count = 0
            for y in stride(from: 40, to: 300, by: 4) {
                for x in stride(from: 0, to: 640, by: 4) {
                    sum += Int(image.baseAddress(ofPlane: 0).load(fromByteOffset: y * image.bytesPerRow[0] + x, as: UInt8.self))
                    count += 1
                }
            }
            return Double(sum) / Double(count)
        }
        let dark = try await meanLuma(.off)
        let lit = try await meanLuma(.on)
        let after = try await meanLuma(.off)
        #expect(lit > dark + 3, "flash: \(lit) vs \(dark)")
        // The torch goes back off after the photo (auto exposure may still be settling, so only "darker").
        #expect(after < lit - 3, "after the photo: \(after) vs flash \(lit)")
    }

    @Test func qualityChangesTheFileAndStopFailsPendingRequests() async throws {
        let (session, output) = try rig()
        let high = PhaseRecorder(), low = PhaseRecorder()
        try output.capturePhoto(with: PhotoSettings(quality: 0.95), delegate: high)
        await high.waitForFinish()
        try output.capturePhoto(with: PhotoSettings(quality: 0.3), delegate: low)
        await low.waitForFinish()
        let h = try #require(high.photo.withLock { $0 }).fileDataRepresentation().count
        let l = try #require(low.photo.withLock { $0 }).fileDataRepresentation().count
        #expect(l < h)
        session.stopRunning()
        let late = PhaseRecorder()
        #expect(throws: CaptureError.sessionNotRunning) { try output.capturePhoto(with: PhotoSettings(), delegate: late) }
    }

    @Test func legacyStillImageCallReturnsJPEG() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let still = StillImageOutput(quality: 0.7)
        try session.addOutput(still)
        try session.startRunning()
        defer { session.stopRunning() }
        let connection = try #require(still.attachment.connections.first)
        let data: [UInt8] = try await withCheckedThrowingContinuation { continuation in
            still.captureStillImageAsynchronously(from: connection) { result in continuation.resume(with: result) }
        }
        #expect(data.prefix(2) == [0xFF, 0xD8])
        let image = try JPEGCodec().decode(data)
        #expect(image.width == 640 && image.height == 480)
    }

    @Test func highResolutionStillsUseTheFormatsStillSize() async throws {
        // The 1080p formats of the phone profile take 3264x1836 stills.
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.hd1920x1080)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let output = PhotoOutput()
        try session.addOutput(output)
        try session.startRunning()
        defer { session.stopRunning() }
        let device = try #require(output.connection(with: .video)).input.device
        let high = try #require(device.activeFormat.highResolutionStillImageDimensions)
        #expect(high == Dimensions(width: 3264, height: 1836))
        let recorder = PhaseRecorder()
        #expect(throws: CaptureError.self) {
            try output.capturePhoto(with: PhotoSettings(isHighResolutionPhotoEnabled: true), delegate: recorder)
        }
        output.isHighResolutionCaptureEnabled = true
        try output.capturePhoto(with: PhotoSettings(isHighResolutionPhotoEnabled: true), delegate: recorder)
        await recorder.waitForFinish()
        let photo = try #require(recorder.photo.withLock { $0 })
        #expect(photo.resolvedSettings.photoDimensions == high)
        let decoded = try JPEGCodec().decode(photo.fileDataRepresentation())
        #expect(decoded.width == high.width && decoded.height == high.height)
    }
}
