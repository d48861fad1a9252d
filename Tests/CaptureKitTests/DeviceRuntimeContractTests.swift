import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// The AVFoundation device contract on the simulator: authorization, discovery, hot plug,
/// completion handlers, notifications, white-balance conversions, MJPEG frames.
@Suite struct DeviceRuntimeContractTests {
    typealias S = DeviceTestSupport

    // MARK: Authorization

    @Test func authorizationIsScriptableAndCapturingWithoutItThrows() async throws {
        let scenario = SimulatorScenario(authorization: .notDetermined)
        let rig = try DeviceRig(scenario: scenario)
        #expect(rig.registry.authorizationStatus(for: .video) == .notDetermined)
        // Capturing before anyone asked: a typed error, not black frames.
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)  // the device's own format, as these tests were written
        try session.addInput(CaptureDeviceInput(device: rig.device("sim:back")))
        #expect(throws: CaptureError.notAuthorized(mediaType: "video", status: "notDetermined")) { try session.startRunning() }
        scenario.setAccessAnswer(.deny, for: .video)
        #expect(await rig.registry.requestAccess(for: .video) == false)
        #expect(rig.registry.authorizationStatus(for: .video) == .denied)
        #expect(await rig.registry.requestAccess(for: .video) == false, "asked once: the answer sticks")
        #expect(throws: CaptureError.notAuthorized(mediaType: "video", status: "denied")) { try session.startRunning() }
        scenario.setAccessAnswer(.restricted, for: .audio)
        #expect(await rig.registry.requestAccess(for: .audio) == false)
        #expect(rig.registry.authorizationStatus(for: .audio) == .restricted)
        let micSession = CaptureSession(pace: .virtual)
        try micSession.setSessionPreset(.inputPriority)  // the device's own format, as these tests were written
        try micSession.addInput(CaptureDeviceInput(device: rig.device("sim:mic")))
        #expect(throws: CaptureError.notAuthorized(mediaType: "audio", status: "restricted")) { try micSession.startRunning() }
        // A delayed grant.
        let later = SimulatorScenario(authorization: .notDetermined)
        later.setAccessAnswer(.grant, for: .video, after: .milliseconds(50))
        let laterRig = try DeviceRig(scenario: later)
        let start = Date()
        #expect(await laterRig.registry.requestAccess(for: .video))
        #expect(Date().timeIntervalSince(start) >= 0.045)
        #expect(laterRig.registry.authorizationStatus(for: .video) == .authorized)
        let frames = try await S.capture(laterRig.device("sim:back"), frames: 2)
        #expect(frames.count == 2)
    }

    // MARK: Discovery and hot-plug

    @Test func discoveryFiltersByTypeMediaAndPositionAndFollowsHotPlug() async throws {
        let rig = try DeviceRig()
        let registry = rig.registry
        #expect(throws: CaptureError.self) { _ = try DiscoverySession(deviceTypes: [], mediaType: .video, position: .unspecified, registry: registry) }
        let builtIn = try DiscoverySession(deviceTypes: [.builtInWideAngleCamera], mediaType: .video, position: .unspecified, registry: registry)
        #expect(builtIn.devices.map(\.uniqueID) == [rig.id("sim:back"), rig.id("sim:front")])
        let front = try DiscoverySession(deviceTypes: [.builtInWideAngleCamera], mediaType: .video, position: .front, registry: registry)
        #expect(front.devices.map(\.uniqueID) == [rig.id("sim:front")])
        let any = try DiscoverySession(deviceTypes: DeviceType.allCases, mediaType: nil, position: .unspecified, registry: registry)
        #expect(any.devices.count == 4)
        #expect(registry.defaultDevice(for: .audio)?.uniqueID == rig.id("sim:mic"))
        #expect(registry.defaultDevice(deviceType: .external, mediaType: .video, position: .unspecified)?.uniqueID == rig.id("sim:webcam"))
        #expect(Set(any.devices.map(\.uniqueID)).count == 4, "unique IDs")

        let webcam = try rig.device("sim:webcam")
        let events = S.Recorder(registry.deviceEvents())
        let external = try DiscoverySession(deviceTypes: [.external], mediaType: .video, position: .unspecified, registry: registry)
        let lists = S.Recorder(external.deviceUpdates())
        _ = await lists.waitFor(count: 1)
        rig.scenario.disconnect(webcam.uniqueID)
        #expect(!webcam.isConnected)
        #expect(throws: CaptureError.deviceDisconnected(webcam.uniqueID)) { try webcam.lockForConfiguration() }
        #expect(throws: CaptureError.self) { _ = try CaptureDeviceInput(device: webcam) }
        #expect(external.devices.isEmpty)
        rig.scenario.connect(webcam.uniqueID)
        #expect(!webcam.isConnected, "a disconnected device never comes back")
        let again = try rig.device("sim:webcam")
        #expect(again !== webcam && again.isConnected)
        let seen = await events.waitFor(count: 2)
        events.cancel()
        guard seen.count == 2, case .disconnected(let gone) = seen[0], case .connected(let back) = seen[1] else {
            Issue.record("events: \(seen)")
            return
        }
        #expect(gone === webcam && back === again)
        let updates = await lists.waitFor(count: 3)
        lists.cancel()
        #expect(updates.map { $0.map(\.uniqueID) } == [[webcam.uniqueID], [], [webcam.uniqueID]])
    }

    @Test func unpluggingWhileStreamingEndsTheStreamWithDeviceDisconnected() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)  // the device's own format, as these tests were written
        let events = S.Recorder(session.eventStream())
        try session.addInput(CaptureDeviceInput(device: device))
        let collector = FrameCollector(limit: 1000) { n, _ in if n == 4 { rig.scenario.disconnect(device.uniqueID) } }
        try session.addOutput(collector)
        try session.startRunning()
        let seen = await events.waitFor(count: 2, seconds: 60)
        session.stopRunning()
        events.cancel()
        #expect(collector.frames.count == 5, "frames 0…4; the next pull finds the device gone")
        #expect(seen.contains { if case .runtimeError(.deviceDisconnected(let id)) = $0 { return id == device.uniqueID } else { return false } })
    }

    // MARK: Completion handlers, observation, subject area

    @Test func completionHandlersGetThePTSOfTheFirstFrameWithTheSettingInOrder() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let log = Locked<[String]>([])
        let times = Locked<[MediaTime]>([])
        let frames = try await S.capture(device, frames: 8) { n, _ in
            guard n == 3 else { return }
            S.configure(device) { () throws(CaptureError) in
                try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 120), iso: 200) { t in log.mutate { $0.append("exposure") }; times.mutate { $0.append(t) } }
                try device.setWhiteBalanceModeLocked(gains: WhiteBalanceGains(red: 1.2, green: 1, blue: 1.5)) { t in log.mutate { $0.append("wb") }; times.mutate { $0.append(t) } }
                try device.setExposureTargetBias(0.5) { t in log.mutate { $0.append("bias") }; times.mutate { $0.append(t) } }
            }
        }
        await waitUntil(timeout: .seconds(30)) { log.value.count >= 3 }
        #expect(log.value == ["exposure", "wb", "bias"])
        #expect(times.value == Array(repeating: frames[4].presentationTime, count: 3))
        #expect(device.deviceWhiteBalanceGains == WhiteBalanceGains(red: 1.2, green: 1, blue: 1.5))
    }

    @Test func subjectAreaChangesAreNotifiedOnlyWhileMonitoring() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try S.fixCamera(device)
        let changes = S.Recorder(device.subjectAreaChanges())
        let frames = try await S.capture(device, frames: 14) { n, _ in
            if n == 2 { try? device.setValue(.real(0.3), for: .sceneLuminance) }  // not monitoring: no notification
            if n == 5 { S.configure(device) { () throws(CaptureError) in try device.setSubjectAreaChangeMonitoringEnabled(true) } }
            if n == 9 { try? device.setValue(.real(3), for: .sceneSubjectDistance) }
        }
        let seen = await changes.waitFor(count: 1, seconds: 2)
        changes.cancel()
        #expect(seen == [frames[10].presentationTime], "\(seen)")
        #expect(device.isSubjectAreaChangeMonitoringEnabled)
    }

    @Test func whiteBalanceTemperatureAndGainsConvertBothWays() throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        for t in [2800.0, 3200, 4000, 5000, 6500, 8000] {
            for tint in [-20.0, 0, 30] {
                let gains = device.deviceWhiteBalanceGains(for: TemperatureAndTint(temperature: t, tint: tint))
                #expect(min(gains.red, gains.green, gains.blue) == 1)
                let back = device.temperatureAndTintValues(for: gains)
                #expect(abs(back.temperature - t) < 1 && abs(back.tint - tint) < 0.1, "\(t) K tint \(tint) → \(gains) → \(back)")
            }
        }
        let warm = device.deviceWhiteBalanceGains(for: TemperatureAndTint(temperature: 3000))
        #expect(warm.blue > warm.red, "tungsten light needs more blue gain")
        #expect(device.deviceWhiteBalanceGains(for: TemperatureAndTint(temperature: 6500)) == .unity)
    }

    @Test func mjpegFramesDecodeAndCarryTheFrameStamp() throws {
        // makeRegistry gives the simulator its JPEG compressor; a rig without one still refuses MJPEG.
        let webcam = try CaptureKit.makeRegistry().device(uniqueID: "sim:webcam")
        let mjpeg = try #require(webcam.format(matching: Dimensions(width: 1280, height: 720), frameRate: 15, pixelFormat: .mjpeg))
        let stream = try webcam.driverDevice().makeStream(StreamConfiguration(format: mjpeg, frameDuration: MediaTime(value: 1, timescale: 15),
                                                                              pace: .virtual))
        try stream.start(at: .zero)
        defer { stream.stop() }
        let codec = try JPEGCodec()
        for n in 0..<3 {
            let sample = try #require(try stream.nextSample())
            #expect(sample.formatDescription == .video(pixelFormat: .mjpeg, dimensions: Dimensions(width: 1280, height: 720)))
            #expect(sample.presentationTime == MediaTime(value: Int64(n), timescale: 15))
            let bytes = try #require(sample.pixelBuffer).withCompressedData { Array($0) }
            let frame = try codec.decode(bytes)
            #expect(frame.width == 1280 && frame.height == 720)
            let stamp = frame.withPlane(0) { raw in
                FrameStampReader.frameIndex(in: LumaPlane(base: raw, width: frame.width, height: frame.height, bytesPerRow: frame.bytesPerRow[0]))
            }
            #expect(stamp == UInt32(n))
        }
        let rig = try DeviceRig()
        let plain = try rig.device("sim:webcam")
        #expect(throws: CaptureError.self) {
            _ = try plain.driverDevice().makeStream(StreamConfiguration(format: try #require(plain.format(matching: Dimensions(width: 640, height: 480),
                                                                                                          frameRate: 15, pixelFormat: .mjpeg)),
                                                                        frameDuration: MediaTime(value: 1, timescale: 15), pace: .virtual))
        }
    }
}
