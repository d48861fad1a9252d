import CaptureKit
import Foundation
import Testing

/// `capture scan` and `capture record --metadata`, through the built binary.
@Suite struct ScanCommandLineTests {
    static let scene = ["--control", "scene.subjectDistance=1", "--control", "focus.lensPosition=0.9",
                        "--control", "scene.qrCode=hello cli", "--control", "scene.qrCode.x=0.75",
                        "--control", "scene.face=on", "--control", "scene.face.x=0.25"]

    static func lines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
        }
    }

    @Test func scanPrintsCodesAndFacesAsJSONLines() throws {
        let result = try TestSupport.run(CommandLineTests.binary, ["scan", "--camera", "sim:back", "--format", "1280x720@30",
                                                                   "--types", "qr,face", "--duration", "1", "--json"] + Self.scene)
        #expect(result.status == 0, "\(result.stderr)")
        let records = try Self.lines(result.stdout)
        let summary = try #require(records.last?["summary"] as? [String: Any])
        let objects = records.dropLast()
        let codes = objects.filter { $0["type"] as? String == "qr" }
        let faces = objects.filter { $0["type"] as? String == "face" }
        #expect(codes.count >= 30 && codes.allSatisfy { $0["value"] as? String == "hello cli" })
        #expect(faces.count >= 30 && Set(faces.compactMap { $0["faceID"] as? Int }) == [1])
        // The code is centred at x = 0.75, a third of the frame high.
        let box = try #require(codes.first?["bounds"] as? [Double])
        #expect(abs(box[0] + box[2] / 2 - 0.75) < 0.01 && abs(box[3] - 1.0 / 3) < 0.01, "\(box)")
        #expect(summary["objects"] as? Int == objects.count)
        #expect((summary["framesDetected"] as? Int ?? 0) >= 30 && summary["framesSkipped"] as? Int == 0)
        #expect(summary["detectionRate"] as? Double == 30)
    }

    @Test func scanTextOutputAndErrors() throws {
        let text = try TestSupport.run(CommandLineTests.binary, ["scan", "--camera", "sim:back", "--format", "640x480@30",
                                                                 "--types", "qr", "--duration", "0.5",
                                                                 "--control", "scene.qrCode=text mode", "--control", "focus.lensPosition=0.9",
                                                                 "--control", "scene.subjectDistance=1"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("qr \"text mode\" box"))
        #expect(text.stdout.contains("scanned"))
        let plain = try TestSupport.run(CommandLineTests.binary, ["scan", "--camera", "sim:back", "--format", "640x480@30",
                                                                  "--duration", "1", "--json"])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(try Self.lines(plain.stdout).count == 1, "the plain scene: only the summary")
        let badType = try TestSupport.run(CommandLineTests.binary, ["scan", "--camera", "sim:back", "--types", "qr,aztec"])
        #expect(badType.status != 0 && badType.stderr.contains("aztec") && badType.stderr.contains("ean13"))
        let badDevice = try TestSupport.run(CommandLineTests.binary, ["scan", "--camera", "sim:nope"])
        #expect(badDevice.status != 0 && badDevice.stderr.contains("sim:nope"))
    }

    @Test func recordWithMetadataWritesJSONLinesNextToTheMovie() throws {
        let dir = try TestSupport.temporaryDirectory()
        let movie = dir + "/meta.mp4"
        let result = try TestSupport.run(CommandLineTests.binary, ["record", "--camera", "sim:back", "--size", "1280x720", "--fps", "30",
                                                                   "--duration", "2", "--pace", "virtual", "--preset", "ultrafast",
                                                                   "--metadata", "--json", movie] + Self.scene)
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["metadataFile"] as? String == dir + "/meta.metadata.jsonl")
        let lines = try Self.lines(try String(contentsOfFile: dir + "/meta.metadata.jsonl", encoding: .utf8))
        #expect(summary["metadataObjects"] as? Int == lines.count)
        let times = Set(lines.compactMap { $0["movieTime"] as? Double })
        // Every recorded frame (60) has the code and the face.
        #expect(lines.count == 120, "\(lines.count) objects")
        #expect(times.min() == 0 && abs((times.max() ?? 0) - 59.0 / 30) < 1e-6)
        #expect(lines.filter { $0["type"] as? String == "qr" }.allSatisfy { $0["value"] as? String == "hello cli" })

        // capture inspect outlines them on the contact sheet (the .metadata.jsonl beside the movie).
        let sheet = dir + "/sheet.jpg"
        let inspect = try TestSupport.run(CommandLineTests.binary, ["inspect", "--contact-sheet", sheet, "--json", movie])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as? [String: Any])
        let thumbnails = try #require(report["thumbnails"] as? [[String: Any]])
        #expect(report["metadataBoxesDrawn"] as? Int == thumbnails.count * 2, "a QR box and a face box on every thumbnail")
        // The QR box's top edge on the first thumbnail has the code colour (green: luma 150, Cb 44).
        let first = try #require(thumbnails.first)
        let qr = try #require(lines.first { $0["type"] as? String == "qr" && $0["movieTime"] as? Double == 0 })
        let box = try #require(qr["bounds"] as? [Double])
        let tw = Double(first["width"] as? Int ?? 0), th = Double(first["height"] as? Int ?? 0)
        let px = (first["x"] as? Int ?? 0) + Int((box[0] + box[2] / 2) * tw), py = (first["y"] as? Int ?? 0) + Int(box[1] * th) + 1
        let image = try JPEGCodec().decode(Array(try Data(contentsOf: URL(fileURLWithPath: sheet))))
        let luma = image.baseAddress(ofPlane: 0).load(fromByteOffset: py * image.bytesPerRow[0] + px, as: UInt8.self)
        #expect(abs(Int(luma) - 150) < 30, "luma \(luma) at (\(px), \(py))")
        let without = try TestSupport.run(CommandLineTests.binary, ["inspect", "--json", movie])
        #expect(!without.stdout.contains("metadataBoxesDrawn"), "no sheet, no boxes")
    }
}

@Suite struct MetadataFixtureTests {
    /// The output works on any device: a fixture of MJPEG frames (decoded for detection) recorded
    /// from a simulated webcam showing a QR code, replayed by `fixture:PATH`, reads the same string.
    @Test func scanReadsAQRCodeFromAnMJPEGFixture() throws {
        let dir = try TestSupport.temporaryDirectory()
        let fixture = dir + "/qr.nut"
        let record = try TestSupport.run(CommandLineTests.binary, ["fixture", "record", "--camera", "sim:webcam", "--format", "640x480@30:MJPG",
                                                                  "--control", "scene.qrCode=from a fixture", "--duration", "1",
                                                                  "--pace", "virtual", fixture])
        #expect(record.status == 0, "\(record.stderr)")
        let scan = try TestSupport.run(CommandLineTests.binary, ["scan", "--camera", "fixture:" + fixture, "--types", "qr",
                                                                "--duration", "0.9", "--json"])
        #expect(scan.status == 0, "\(scan.stderr)")
        let records = try ScanCommandLineTests.lines(scan.stdout)
        let values = records.compactMap { $0["value"] as? String }
        #expect(values.count >= 25 && Set(values) == ["from a fixture"], "\(values.count) reads")
    }
}

@Suite struct MetadataDeterminismTests {
    /// Virtual time: the same scene and seed give the same batches, object for object.
    @Test func twoVirtualRunsGiveIdenticalDetections() async throws {
        func run() async throws -> [[MetadataObject]] {
            try await MetadataScan.run(controls: MetadataOutputTests.sharp + [("scene.qrCode", "again"), ("scene.qrCode.motion", "0.5"),
                                                                            ("scene.face", "on"), ("scene.face.x", "0.2")],
                                       types: [.qr, .face], frames: 40).batches.filter { ($0.first?.time ?? .invalid) < MediaTime(value: 40, timescale: 30) }
        }
        let a = try await run(), b = try await run()
        #expect(a.count >= 30)
        #expect(a == b)
    }
}
