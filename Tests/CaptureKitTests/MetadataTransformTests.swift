import CaptureDetection
import CaptureKit
import CaptureKitTesting
import Dispatch
import Foundation
import Testing

/// Scans the rotated, mirrored frames a video data output delivers, with the same ZBar wrapper.
private final class RotatedFrameScanner: VideoDataOutputSampleBufferDelegate {
    let found = Locked<[MediaTime: CGRect]>([:])
    let scanner = Locked<CodeScanner?>(nil)
    let queue = DispatchQueue(label: "RotatedFrameScanner")

    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer, let luma = LumaImage.copy(from: pixels) else { return }
        let codes = scanner.withLock { s -> [DetectedCode] in
            if s == nil { s = try? CodeScanner(symbologies: [.qr]) }
            return s?.scan(luma) ?? []
        }
        guard let code = codes.first else { return }
        let w = Double(pixels.width), h = Double(pixels.height)
        found.withLock { $0[sample.presentationTime] = CGRect(x: code.bounds.x / w, y: code.bounds.y / h,
                                                               width: code.bounds.width / w, height: code.bounds.height / h) }
    }
}

@Suite struct MetadataTransformTests {
    /// Must-show 3: boxes found in the native frames, transformed for a connection rotated 90° (and
    /// mirrored), match the codes found in the rotated frames themselves.
    @Test(arguments: [(90, false), (90, true), (270, true), (180, false)])
    func transformedBoxesMatchRotatedFrames(angle: Int, mirrored: Bool) async throws {
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 1)])
        let device = try registry.device(uniqueID: "sim:back")
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.hd1280x720)
        try session.addInput(CaptureDeviceInput(device: device))
        let frames = VideoDataOutput()
        try session.addOutput(frames)
        let connection = try #require(frames.connection(with: .video))
        try connection.setVideoRotationAngle(angle)
        try connection.setVideoMirrored(mirrored)
        let scanner = RotatedFrameScanner()
        frames.setSampleBufferDelegate(scanner, queue: scanner.queue)
        let metadata = MetadataOutput()
        try session.addOutput(metadata)
        try metadata.setMetadataObjectTypes([.qr])
        let collector = MetadataCollector()
        metadata.setMetadataObjectsDelegate(collector, queue: collector.queue)
        try device.lockForConfiguration()
        for (key, value) in [("scene.subjectDistance", "1"), ("focus.lensPosition", "0.9"), ("scene.qrCode", "rotate me"),
                             ("scene.qrCode.x", "0.3"), ("scene.qrCode.y", "0.4"), ("scene.qrCode.size", "0.3")] {
            try device.applyControl(key: key, value: value)
        }
        device.unlockForConfiguration()
        try session.startRunning()
        try await eventually("10 frames detected and delivered", timeout: .seconds(600)) { metadata.statistics.framesDetected >= 10 && frames.deliveredFrameCount >= 10 }
        session.stopRunning()
        scanner.queue.sync {}
        let rotated = scanner.found.withLock { $0 }
        var compared = 0
        for batch in collector.drain() {
            guard let object = batch.first, let truth = rotated[object.time] else { continue }
            let mapped = MetadataOutput.transformedMetadataObject(object, for: connection)
            let i = mapped.bounds.intersection(truth)
            let overlap = i.isNull ? 0 : i.width * i.height / (mapped.bounds.width * mapped.bounds.height + truth.width * truth.height - i.width * i.height)
            #expect(overlap >= 0.9, "\(angle)° mirrored \(mirrored): \(mapped.bounds) vs \(truth)")
            // The native box is elsewhere: the transform is not the identity here.
            #expect(abs(object.bounds.midX - mapped.bounds.midX) + abs(object.bounds.midY - mapped.bounds.midY) > 0.1)
            compared += 1
        }
        print("rotation \(angle)° mirrored \(mirrored): \(compared) frames compared")
        #expect(compared >= 5)
    }
}
