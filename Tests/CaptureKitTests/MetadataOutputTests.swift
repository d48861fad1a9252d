import CaptureKit
import CaptureKitTesting
import Dispatch
import Foundation
import Testing

/// Collects every batch a metadata output delivers (on its own serial queue).
final class MetadataCollector: MetadataOutputObjectsDelegate {
    let batches = Locked<[[MetadataObject]]>([])
    let queue = DispatchQueue(label: "MetadataCollector")
    func metadataOutput(_ output: MetadataOutput, didOutput objects: [MetadataObject], from connection: CaptureConnection) {
        batches.withLock { $0.append(objects) }
    }
    /// Waits for callbacks already queued.
    func drain() -> [[MetadataObject]] {
        queue.sync {}
        return batches.withLock { $0 }
    }
}

/// One virtual-time scan of a simulated camera: the output's batches, the simulator's truth and
/// the output's statistics.
struct MetadataScan {
    var batches: [[MetadataObject]]
    var truth: [SceneTruthFrame]
    var statistics: MetadataOutput.Statistics
    var frameSize: Dimensions

    /// Objects found in the frame at `pts`.
    func objects(at pts: MediaTime) -> [MetadataObject] {
        batches.last { $0.first?.time == pts } ?? []
    }

    static func run(device id: String = "sim:back", preset: SessionPreset = .hd1280x720, controls: [(String, String)],
                    types: [MetadataObjectType], frames: Int) async throws -> MetadataScan {
        let scenario = SimulatorScenario()
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 4, scenario: scenario)])
        let device = try registry.device(uniqueID: id)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(preset)
        try session.addInput(CaptureDeviceInput(device: device))
        let output = MetadataOutput()
        try session.addOutput(output)
        try output.setMetadataObjectTypes(types)
        let collector = MetadataCollector()
        output.setMetadataObjectsDelegate(collector, queue: collector.queue)
        try device.lockForConfiguration()
        for (key, value) in controls { try device.applyControl(key: key, value: value) }
        device.unlockForConfiguration()
        try session.startRunning()
        // Virtual time: frames are detected in order on the delivery thread, so once `frames`
        // are counted the first `frames` are done.
        try await eventually("\(frames) frames detected", timeout: .seconds(600)) { output.statistics.framesDetected >= frames }
        session.stopRunning()
        let size = device.activeFormat.dimensions ?? Dimensions(width: 0, height: 0)
        return MetadataScan(batches: collector.drain(), truth: Array(scenario.sceneTruth(for: id).prefix(frames)),
                            statistics: output.statistics, frameSize: size)
    }
}

/// Intersection over union of a normalised detection box and a truth box in pixels.
func iou(_ box: CGRect, _ truth: PixelRectD, _ size: Dimensions) -> Double {
    let w = Double(size.width), h = Double(size.height)
    let a = CGRect(x: box.minX * w, y: box.minY * h, width: box.width * w, height: box.height * h)
    let b = CGRect(x: truth.x, y: truth.y, width: truth.width, height: truth.height)
    let i = a.intersection(b)
    guard !i.isNull else { return 0 }
    let inter = i.width * i.height
    return inter / (a.width * a.height + b.width * b.height - inter)
}

@Suite struct MetadataOutputTests {
    /// Sharp focus for the simulator's default subject distance (1 m; closest focus 0.1 m).
    static let sharp = [("scene.subjectDistance", "1"), ("focus.lensPosition", "0.9")]

    @Test func contractBeforeAndAfterAttaching() throws {
        let output = MetadataOutput()
        #expect(output.availableMetadataObjectTypes.isEmpty)
        #expect(output.metadataObjectTypes.isEmpty)
        #expect(throws: CaptureError.metadataObjectTypeNotAvailable(type: "qr", available: [])) {
            try output.setMetadataObjectTypes([.qr])
        }
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 0)])
        let session = CaptureSession(pace: .virtual)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addOutput(output)
        let available = output.availableMetadataObjectTypes
        #expect(available.contains(.qr) && available.contains(.ean13) && available.contains(.face) && available.contains(.code128))
        try output.setMetadataObjectTypes([.qr, .face])
        #expect(output.metadataObjectTypes == [.qr, .face])
        do {
            try output.setMetadataObjectTypes([MetadataObjectType(rawValue: "com.example.DataMatrix")])
            Issue.record("an unavailable type was accepted")
        } catch {
            guard case .metadataObjectTypeNotAvailable(let type, let list) = error else { Issue.record("\(error)"); return }
            #expect(type == "com.example.DataMatrix" && list.contains("qr") && list.contains("face"))
            #expect(error.description.contains("available: qr"))
        }
        #expect(output.rectOfInterest == CGRect(x: 0, y: 0, width: 1, height: 1))
        try output.setRectOfInterest(CGRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5))
        #expect(output.rectOfInterest == CGRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5))
        for bad in [CGRect(x: -0.1, y: 0, width: 0.5, height: 0.5), CGRect(x: 0.6, y: 0, width: 0.5, height: 1),
                    CGRect(x: 0, y: 0, width: 0, height: 1), CGRect(x: Double.nan, y: 0, width: 1, height: 1)] {
            #expect(throws: CaptureError.self) { try output.setRectOfInterest(bad) }
        }
        #expect(output.rectOfInterest == CGRect(x: 0.25, y: 0.25, width: 0.5, height: 0.5))
    }

    /// Must-show 1: a QR code moving across a 1280x720 scene for 10 s (300 frames at 30 fps).
    @Test func movingQRCodeIsReadWhereverFullyVisible() async throws {
        let text = "https://capturekit.example/issue/13"
        let scan = try await MetadataScan.run(controls: Self.sharp + [("scene.qrCode", text), ("scene.qrCode.x", "0"),
                                                                     ("scene.qrCode.motion", "0.25")],
                                              types: [.qr], frames: 300)
        #expect(scan.truth.count == 300)
        var visible = 0, read = 0, wrong = 0, partial = 0
        var ious: [Double] = []
        for frame in scan.truth {
            let codes = scan.objects(at: frame.presentationTime).filter { $0.type == .qr }
            wrong += codes.filter { $0.stringValue != text }.count
            guard let truth = frame.items.first, truth.isFullyVisible else { partial += 1; continue }
            visible += 1
            if let code = codes.first(where: { $0.stringValue == text }) {
                read += 1
                ious.append(iou(code.bounds, truth.bounds, scan.frameSize))
                #expect(code.corners.count == 4)
            }
        }
        let rate = Double(read) / Double(max(visible, 1))
        let minIoU = ious.min() ?? 0
        print("QR: \(read)/\(visible) fully visible frames read (\(rate * 100) %), \(partial) partly visible, IoU min \(minIoU) mean \(ious.reduce(0, +) / Double(max(ious.count, 1))), wrong strings \(wrong), detection rate \(scan.statistics.detectionRate) fps")
        #expect(visible >= 150, "the path keeps the code fully in view for most of the run")
        #expect(partial > 0, "the path also takes the code partly out of view")
        #expect(rate >= 0.98)
        #expect(minIoU >= 0.8)
        #expect(wrong == 0)
    }

    /// Must-show 1: defocus beyond a threshold makes the code unreadable (the blur is the camera
    /// model's, applied after the code is drawn).
    @Test func defocusedQRCodeIsNotRead() async throws {
        var readByBlur: [(Double, Int)] = []
        for lens in ["0.9", "0.8", "0.7", "0.6"] {
            let scan = try await MetadataScan.run(controls: [("scene.subjectDistance", "1"), ("focus.lensPosition", lens),
                                                             ("scene.qrCode", "defocus")],
                                                  types: [.qr], frames: 20)
            let read = scan.truth.filter { frame in scan.objects(at: frame.presentationTime).contains { $0.stringValue == "defocus" } }.count
            readByBlur.append((abs(0.9 - Double(lens)!) * 1280 / 32, read))
        }
        print("QR read per 20 frames by blur radius (px): \(readByBlur)")
        #expect(readByBlur[0].1 == 20, "sharp: every frame")
        #expect(readByBlur[3].1 == 0, "blur radius 12 px: never")
    }

    /// Must-show 1 and 2: nothing is found in 300 frames of the plain scene (colour bars, grey
    /// card, the moving box).
    @Test func plainSceneHasNoFalseCodesOrFaces() async throws {
        let scan = try await MetadataScan.run(controls: Self.sharp, types: [.qr, .ean13, .ean8, .code128, .code39, .face], frames: 300)
        let found = scan.batches.flatMap { $0 }
        print("plain scene: \(found.count) objects in 300 frames, detection rate \(scan.statistics.detectionRate) fps")
        #expect(found.isEmpty)
        #expect(scan.statistics.framesDetected >= 300)
    }
}

@Suite struct FaceMetadataTests {
    /// Must-show 2: the astronaut photograph moving across the frame, upright, face ≥ 120 px high.
    @Test func movingFaceIsDetectedWithOneStableID() async throws {
        let scan = try await MetadataScan.run(controls: MetadataOutputTests.sharp + [("scene.face", "on"), ("scene.face.x", "0.1"),
                                                                                    ("scene.face.motion", "0.1")],
                                              types: [.face], frames: 300)
        var eligible = 0, detected = 0, extra = 0
        var ious: [Double] = []
        var ids = Set<Int>()
        for frame in scan.truth {
            let faces = scan.objects(at: frame.presentationTime).filter { $0.type == .face }
            guard let truth = frame.items.first(where: { $0.kind == .face }), truth.isFullyVisible, truth.bounds.height >= 120 else { continue }
            eligible += 1
            let scored = faces.map { ($0, iou($0.bounds, truth.bounds, scan.frameSize)) }
            if let best = scored.max(by: { $0.1 < $1.1 }), best.1 >= 0.5 {
                detected += 1
                ious.append(best.1)
                if let id = best.0.faceID { ids.insert(id) }
            }
            extra += scored.filter { $0.1 < 0.5 }.count
        }
        let rate = Double(detected) / Double(max(eligible, 1))
        print("faces: \(detected)/\(eligible) eligible frames (\(rate * 100) %), IoU min \(ious.min() ?? 0) mean \(ious.reduce(0, +) / Double(max(ious.count, 1))), IDs \(ids.sorted()), boxes off the face \(extra), truth height \(scan.truth.first?.items.first?.bounds.height ?? 0) px, detection rate \(scan.statistics.detectionRate) fps")
        #expect(eligible >= 200)
        #expect(rate >= 0.9)
        #expect(ids.count == 1)
        #expect(extra == 0)
    }
}

/// Seed 004's face-detection controller, line by line: the recording session gains an
/// AVCaptureMetadataOutput for faces (and QR codes), a delegate on a serial queue keeps one layer
/// per faceID and drops the ones that left; the movie records at the same time.
private final class FaceDetectionController: MetadataOutputObjectsDelegate, CaptureFileOutputRecordingDelegate {
    /// faceID → the face's latest bounds (the seed's faceLayers dictionary).
    let faceLayers = Locked<[Int: CGRect]>([:])
    let seenFaceIDs = Locked<Set<Int>>([])
    let codes = Locked<[String]>([])
    let emptyBatches = Locked(0)
    let finished = Locked<(summary: RecordingSummary, error: CaptureError?)?>(nil)

    // - captureOutput:didOutputMetadataObjects:fromConnection:
    func metadataOutput(_ output: MetadataOutput, didOutput objects: [MetadataObject], from connection: CaptureConnection) {
        if objects.isEmpty { emptyBatches.withLock { $0 += 1 } }
        var lostFaces = Set(faceLayers.withLock { $0.keys })
        for face in objects where face.type == .face {
            guard let faceID = face.faceID else { continue }
            lostFaces.remove(faceID)
            faceLayers.withLock { $0[faceID] = face.bounds }   // layer.frame = face.bounds
            seenFaceIDs.withLock { _ = $0.insert(faceID) }
        }
        for code in objects where code.type == .qr { codes.withLock { $0.append(code.stringValue ?? "") } }
        faceLayers.withLock { layers in for id in lostFaces { layers.removeValue(forKey: id) } }
    }

    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        finished.withLock { $0 = (summary, error) }
    }
}

@Suite struct MetadataSeedFlowTests {
    @Test func seed004FacesAndCodesWhileRecording() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.hd1280x720)
        let camera = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: camera))
        let movieOutput = MovieFileOutput()
        try session.addOutput(movieOutput)

        // - setupSessionOutputs: self.metadataOutput = [[AVCaptureMetadataOutput alloc] init]
        let metadataOutput = MetadataOutput()
        #expect(session.canAddOutput(metadataOutput))
        try session.addOutput(metadataOutput)
        // metadataObjectTypes = @[AVMetadataObjectTypeFace] (and the QR codes of §2.1)
        try metadataOutput.setMetadataObjectTypes([.face, .qr])
        // setMetadataObjectsDelegate:self queue:mainQueue
        let controller = FaceDetectionController()
        let mainQueue = DispatchQueue(label: "seed004.main")
        metadataOutput.setMetadataObjectsDelegate(controller, queue: mainQueue)

        // The scene: the astronaut on the left, a QR code on the right; the face walks out at the end.
        try camera.lockForConfiguration()
        for (key, value) in [("scene.subjectDistance", "1"), ("focus.lensPosition", "0.9"),
                             ("scene.face", "on"), ("scene.face.x", "0.25"), ("scene.face.size", "0.45"),
                             ("scene.qrCode", "seed 004"), ("scene.qrCode.x", "0.75"), ("scene.qrCode.size", "0.3")] {
            try camera.applyControl(key: key, value: value)
        }
        camera.unlockForConfiguration()
        try session.startRunning()
        defer { session.stopRunning() }

        let outputURL = try TestSupport.temporaryDirectory() + "/seed004-metadata.mov"
        movieOutput.maxRecordedDuration = MediaTime(value: 2, timescale: 1)
        movieOutput.startRecording(to: outputURL, recordingDelegate: controller)
        try await eventually("45 frames detected", timeout: .seconds(600)) { metadataOutput.statistics.framesDetected >= 45 }
        // The face leaves the view (the seed removes its layer): an empty batch follows.
        try camera.applyControl(key: "scene.face", value: "off")
        try camera.applyControl(key: "scene.qrCode", value: "")
        try await eventually("the recording's finish", timeout: .seconds(600)) { controller.finished.withLock { $0 != nil } }
        mainQueue.sync {}

        let finish = try #require(controller.finished.withLock { $0 })
        #expect(finish.error?.recordingFinishedSuccessfully ?? true)
        #expect(finish.summary.videoFrames == 60)
        #expect(try TestSupport.probeStreams(outputURL).first?["codec_name"] as? String == "h264")
        #expect(controller.seenFaceIDs.withLock { $0 } == [1], "one face, one ID")
        #expect(controller.faceLayers.withLock { $0.isEmpty }, "the face's layer was removed when it left")
        #expect(controller.emptyBatches.withLock { $0 } >= 1)
        let codes = controller.codes.withLock { $0 }
        #expect(codes.count >= 40 && Set(codes) == ["seed 004"])
        print("seed 004: \(codes.count) QR reads, face IDs \(controller.seenFaceIDs.withLock { $0 }), empty batches \(controller.emptyBatches.withLock { $0 }), stats \(metadataOutput.statistics)")
    }
}

@Suite struct MetadataSequenceTests {
    /// The AsyncSequence carries the same batches as the delegate, including the empty batch
    /// when the code leaves the view; the scene item controls read back.
    @Test func batchesAsAnAsyncSequenceEndWithAnEmptyBatchWhenTheCodeLeaves() async throws {
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 2)])
        let device = try registry.device(uniqueID: "sim:back")
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: device))
        let output = MetadataOutput()
        try session.addOutput(output)
        try output.setMetadataObjectTypes([.qr])
        try device.lockForConfiguration()
        try device.applyControl(key: "scene.subjectDistance", value: "1")
        try device.applyControl(key: "focus.lensPosition", value: "0.9")
        device.unlockForConfiguration()
        try device.applyControl(key: "scene.qrCode", value: "async")
        #expect(try device.value(of: .sceneQRCode) == .text("async"))
        #expect(device.controlStatuses().first { $0.key == "scene.qrCode" }?.current == "async")
        #expect(throws: CaptureError.self) { try device.applyControl(key: "scene.face", value: "maybe") }
        let batches = output.metadataObjectBatches()
        try session.startRunning()
        defer { session.stopRunning() }
        var seen = 0
        var sawEmpty = false
        for await batch in batches {
            if batch.isEmpty { sawEmpty = true; break }
            #expect(batch.count == 1 && batch[0].stringValue == "async" && batch[0].type == .qr)
            seen += 1
            if seen == 5 { try device.applyControl(key: "scene.qrCode", value: "") }
            if seen >= 40 { Issue.record("the code never left"); break }
        }
        #expect(sawEmpty && seen >= 5)
    }
}

@Suite struct SceneItemProfileTests {
    /// Scene items placed by a profile (the controls' keys without `scene.`), with the same truth.
    @Test func aProfilePlacesTheQRCodeAndTheFace() async throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Simulator/Profiles/1-back.json")
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: source)) as? [String: Any])
        json["uniqueID"] = "sim:items"
        json["scene"] = ["subjectDistance": 1, "qrCode": "from a profile", "qrCode.x": 0.7, "qrCode.size": 0.3,
                         "face": true, "face.x": 0.25]
        let profile = try SimulatedDeviceProfile.parse(try JSONSerialization.data(withJSONObject: json), file: "items.json")
        let scenario = SimulatorScenario()
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 0, profiles: [profile], scenario: scenario)])
        let device = try registry.device(uniqueID: "sim:items")
        #expect(device.controlStatuses().first { $0.key == "scene.qrCode" }?.current == "from a profile")
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.hd1280x720)
        try session.addInput(CaptureDeviceInput(device: device))
        let output = MetadataOutput()
        try session.addOutput(output)
        try output.setMetadataObjectTypes([.qr, .face])
        try device.lockForConfiguration()
        try device.applyControl(key: "focus.lensPosition", value: "0.9")
        device.unlockForConfiguration()
        let collector = MetadataCollector()
        output.setMetadataObjectsDelegate(collector, queue: collector.queue)
        try session.startRunning()
        try await eventually("5 frames detected", timeout: .seconds(600)) { output.statistics.framesDetected >= 5 }
        session.stopRunning()
        let batches = collector.drain()
        let truth = try #require(scenario.sceneTruth(for: "sim:items").first)
        #expect(truth.items.count == 2)
        let qrTruth = try #require(truth.items.first { $0.kind == .qrCode("from a profile") })
        #expect(abs(qrTruth.bounds.x + qrTruth.bounds.width / 2 - 0.7 * 1280) < 1 && abs(qrTruth.bounds.height - 216) < 1)
        #expect(batches.first?.contains { $0.stringValue == "from a profile" } == true)
        #expect(batches.first?.contains { $0.type == .face } == true)
        // A malformed item is named.
        json["scene"] = ["qrCode.size": 7]
        #expect(throws: CaptureError.invalidProfile(file: "bad.json", field: "scene.qrCode.size", problem: "must be 0.01…2 (a fraction of the frame height)")) {
            _ = try SimulatedDeviceProfile.parse(try JSONSerialization.data(withJSONObject: json), file: "bad.json")
        }
    }
}
