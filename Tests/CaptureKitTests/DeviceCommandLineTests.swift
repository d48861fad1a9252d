import CaptureKit
import Foundation
import Testing

/// `capture controls`, `capture formats`, `record --control/--format`, and user profiles, run as
/// a separate process like a user would.
@Suite struct DeviceCommandLineTests {
    static var binary: String { CommandLineTests.binary }

    private func json(_ result: TestSupport.ToolResult) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    }

    @Test func controlsListsEveryKeyWithSupportRangeAndValue() throws {
        let result = try TestSupport.run(Self.binary, ["controls", "sim:back", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let controls = try #require((try json(result) as? [String: Any])?["controls"] as? [[String: Any]])
        let byKey = Dictionary(uniqueKeysWithValues: controls.compactMap { c in (c["key"] as? String).map { ($0, c) } })
        for key in CaptureDevice.controlKeys { #expect(byKey[key] != nil, "\(key) missing") }
        #expect(byKey["exposure.iso"]?["allowed"] as? String == "29…928")
        #expect(byKey["focus.mode"]?["current"] as? String == "continuousAutoFocus")
        #expect(byKey["torch.mode"]?["supported"] as? Bool == true)
        let front = try TestSupport.run(Self.binary, ["controls", "sim:front", "--json"])
        let frontControls = try #require((try json(front) as? [String: Any])?["controls"] as? [[String: Any]])
        #expect(frontControls.first { $0["key"] as? String == "torch.mode" }?["supported"] as? Bool == false)
        #expect(frontControls.first { $0["key"] as? String == "focus.lensPosition" }?["supported"] as? Bool == false)
        let text = try TestSupport.run(Self.binary, ["controls", "sim:webcam"])
        #expect(text.status == 0 && text.stdout.contains("whiteBalance.temperature") && text.stdout.contains("2800…6500 K"))
        let missing = try TestSupport.run(Self.binary, ["controls", "sim:nope"])
        #expect(missing.status != 0 && missing.stderr.contains("sim:nope"))
    }

    @Test func formatsListsRatesExposureAndISO() throws {
        let result = try TestSupport.run(Self.binary, ["formats", "sim:back", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let formats = try #require((try json(result) as? [String: Any])?["formats"] as? [[String: Any]])
        let hd = try #require(formats.first { $0["name"] as? String == "420f 1280x720" })
        #expect(hd["maxFrameRate"] as? Double == 240 && hd["minFrameRate"] as? Double == 5)
        #expect(hd["minISO"] as? Double == 29 && hd["maxISO"] as? Double == 928)
        #expect(hd["maxExposureDuration"] as? Double == 0.2)
        #expect(formats.filter { ($0["name"] as? String)?.hasPrefix("420") == true && ($0["name"] as? String)?.hasSuffix("1920x1080") == true && $0["videoHDR"] as? Bool == true }.count == 4)
        #expect(formats.first?["active"] as? Bool == true)
        let text = try TestSupport.run(Self.binary, ["formats", "sim:webcam"])
        #expect(text.stdout.contains("MJPG 1920x1080 @ 5 fps, 10 fps, 15 fps, 20 fps, 25 fps, 30 fps"), "\(text.stdout)")
    }

    @Test func badControlsExitNonZeroNamingKeyValueAndRange() throws {
        let dir = try TestSupport.temporaryDirectory()
        func record(_ extra: [String], camera: String = "sim:back") throws -> TestSupport.ToolResult {
            try TestSupport.run(Self.binary, ["record", "--camera", camera, "--duration", "0.2", "--pace", "virtual"] + extra
                                + [dir + "/\(UUID().uuidString).mp4"])
        }
        let unknown = try record(["--control", "focus.sharpness=3"])
        #expect(unknown.status != 0 && unknown.stderr.contains("focus.sharpness") && unknown.stderr.contains("focus.lensPosition"))
        let range = try record(["--control", "exposure.iso=5000"])
        #expect(range.status != 0 && range.stderr.contains("exposure.iso") && range.stderr.contains("5000") && range.stderr.contains("29…928"))
        let fraction = try record(["--control", "exposure.duration=1/2"])
        #expect(fraction.status != 0 && fraction.stderr.contains("exposure.duration") && fraction.stderr.contains("0.2 s"), "\(fraction.stderr)")
        let unsupported = try record(["--control", "torch.mode=on"], camera: "sim:front")
        #expect(unsupported.status != 0 && unsupported.stderr.contains("torch.mode") && unsupported.stderr.contains("on"), "\(unsupported.stderr)")
        let badMode = try record(["--control", "focus.mode=sharp"])
        #expect(badMode.status != 0 && badMode.stderr.contains("focus.mode = sharp") && badMode.stderr.contains("continuousAutoFocus"))
        let malformed = try record(["--control", "zoom.factor"])
        #expect(malformed.status != 0 && malformed.stderr.contains("KEY=VALUE"))
        let format = try record(["--format", "1920x1080@240"])
        #expect(format.status != 0 && format.stderr.contains("1920x1080@240") && format.stderr.contains("5-240 fps"))
    }

    @Test func formatAndControlsReachTheRecording() throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/hd60.mp4"
        let result = try TestSupport.run(Self.binary, [
            "record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual", "--preset", "ultrafast",
            "--format", "1280x720@60:420f", "--control", "zoom.factor=2", "--control", "scene.illuminant=3000", "--json", path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try json(result) as? [String: Any])
        #expect((summary["recording"] as? [String: Any])?["videoFrames"] as? Int == 30)
        #expect((summary["cameraFormat"] as? String)?.contains("@ 60 fps") == true)
    }

    /// Must-show 2 through a recorded file: doubling the exposure doubles the grey card's linear
    /// luma in the decoded H.264.
    @Test func exposureDoublingSurvivesEncodingAndDecoding() throws {
        let dir = try TestSupport.temporaryDirectory()
        var grey: [Double] = []
        for duration in ["1/200", "1/100"] {
            let path = dir + "/exposure-\(grey.count).mp4"
            let result = try TestSupport.run(Self.binary, [
                "record", "--camera", "sim:back", "--duration", "0.3", "--pace", "virtual", "--preset", "ultrafast",
                "--control", "exposure.duration=\(duration)", "--control", "exposure.iso=100",
                "--control", "whiteBalance.temperature=6500", "--control", "focus.lensPosition=0.9", path,
            ])
            #expect(result.status == 0, "\(result.stderr)")
            var lumas: [Double] = []
            try MediaFileReader(path: path).decode(video: { frame in
                let w = frame.width, h = frame.height, stride = frame.bytesPerRow[0]
                var sum = 0.0, n = 0.0
                for y in (2 * h / 3 + 8)..<(h - 8) {
                    for x in 8..<(w / 4 - 8) { sum += Double(frame.luma[y * stride + x]); n += 1 }
                }
                lumas.append(sum / n)
            }, audio: nil)
            #expect(lumas.count == 9)
            grey.append(SyntheticFrameRenderer.linearLight(ofLuma: lumas.reduce(0, +) / Double(lumas.count)))
        }
        let ratio = grey[1] / grey[0]
        #expect(abs(ratio - 2) <= 0.1, "decoded grey card linear luma \(grey[0]) → \(grey[1]): ratio \(ratio)")
    }

    @Test func userProfilesLoadFromTheEnvironmentAndMalformedOnesAreNamed() throws {
        let dir = try TestSupport.temporaryDirectory()
        let good = """
            {"uniqueID": "sim:doorbell", "name": "Doorbell Camera", "mediaType": "video", "position": "external",
             "formats": [{"pixelFormat": "YUYV", "width": 320, "height": 240, "frameRates": [[5, 15]],
                          "exposureDuration": [0.001, 0.1], "iso": [100, 1600]}],
             "camera": {"exposureModes": ["continuousAutoExposure", "custom"], "whiteBalanceModes": ["continuousAutoWhiteBalance"]}}
            """
        try good.write(toFile: dir + "/doorbell.json", atomically: true, encoding: .utf8)
        let list = try runWithProfiles(dir + "/doorbell.json", ["devices", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("sim:doorbell") && list.stdout.contains("sim:back"))
        let formats = try runWithProfiles(dir, ["formats", "sim:doorbell"])
        #expect(formats.stdout.contains("YUYV 320x240 @ 5-15 fps"), "\(formats.stdout)")

        let cases: [(String, String, String)] = [
            (#"{"uniqueID": "sim:x", "name": "X", "mediaType": "video", "formats": [{"pixelFormat": "NV12", "width": 640, "height": 480, "frameRates": [[30, 5]]}], "camera": {"exposureModes": ["custom"], "whiteBalanceModes": ["locked"]}}"#,
             "formats[0].frameRates[0]", "min ≤ max"),
            (#"{"uniqueID": "sim:x", "name": "X", "mediaType": "video", "formats": [{"pixelFormat": "H265", "width": 640, "height": 480, "frameRates": [[1, 5]]}]}"#,
             "formats[0].pixelFormat", "unknown pixel format"),
            (#"{"uniqueID": "sim:x", "name": "X", "mediaType": "video", "formats": [], "camera": {}}"#, "formats", "non-empty"),
            (#"{"uniqueID": "sim:x", "name": "X", "mediaType": "audio", "audio": {"sampleRate": 48000, "channels": 1, "sampleFormat": "f64"}}"#,
             "audio.sampleFormat", "f32 or s16"),
            (#"{"uniqueID": "sim:x", "nmae": "X", "mediaType": "video"}"#, "nmae", "unknown field"),
            (#"{"uniqueID": "cam0", "name": "X", "mediaType": "video"}"#, "uniqueID", "sim:"),
            (#"{"uniqueID": "sim:x", "name": "X", "mediaType": "video", "formats": [{"pixelFormat": "NV12", "width": 640, "height": 480, "frameRates": [[1, 5]]}], "camera": {"exposureModes": ["custom"], "whiteBalanceModes": ["locked"], "torchModes": ["on"]}}"#,
             "camera.torchModes", "off"),
            ("{ not json", "(document)", "not valid JSON"),
        ]
        for (i, (text, field, problem)) in cases.enumerated() {
            let file = dir + "/bad\(i).json"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            do {
                _ = try SimulatedDeviceProfile.load(file: file)
                Issue.record("case \(i) loaded")
            } catch {
                guard case .invalidProfile(let f, let fld, let p) = error else { Issue.record("case \(i): \(error)"); continue }
                #expect(f == file && fld == field && p.contains(problem), "case \(i): \(fld): \(p)")
            }
        }
        // Through the tool: a non-zero exit naming file, field and problem.
        let bad = try runWithProfiles(dir + "/bad0.json", ["devices"])
        #expect(bad.status != 0 && bad.stderr.contains("bad0.json") && bad.stderr.contains("formats[0].frameRates[0]"), "\(bad.stderr)")
    }

    private func runWithProfiles(_ profiles: String, _ arguments: [String]) throws -> TestSupport.ToolResult {
        try TestSupport.run("env", ["\(SimulatedDeviceProfile.environmentVariable)=\(profiles)", Self.binary] + arguments)
    }
}
