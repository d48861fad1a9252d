import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Issue 3's "must show": every simulated control changes the delivered pixels like hardware.
@Suite struct CameraPhysicsTests {
    typealias S = DeviceTestSupport

    @Test func doublingExposureDoublesLinearLumaUntilClippingAndLongExposuresLengthenFrames() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let durations = [MediaTime(value: 1, timescale: 200), MediaTime(value: 1, timescale: 100), MediaTime(value: 1, timescale: 50),
                         MediaTime(value: 1, timescale: 25), MediaTime(value: 2, timescale: 25)]
        try S.fixCamera(device, duration: durations[0], iso: 100)
        let frames = try await S.capture(device, frames: 3 * durations.count) { n, _ in
            guard n % 3 == 2, (n + 1) / 3 < durations.count else { return }
            S.configure(device) { () throws(CaptureError) in
                try device.setExposureModeCustom(duration: durations[(n + 1) / 3], iso: CaptureDevice.currentISO)
            }
        }
        let grey = (0..<durations.count).map { frames[3 * $0 + 1].greyLinear }
        print("Exposure: grey card linear luma at 1/200, 1/100, 1/50, 1/25, 2/25 s (ISO 100): \(grey.map { String(format: "%.4f", $0) })")
        for i in 0..<3 {
            let ratio = grey[i + 1] / grey[i]
            #expect(abs(ratio - 2) <= 0.1, "exposure \(durations[i]) → \(durations[i + 1]): linear grey \(grey[i]) → \(grey[i + 1]), ratio \(ratio)")
        }
        // 2/25 s would give 0.18 × 8 = 1.44: clipped.
        #expect(grey[4] <= 1.0 && grey[4] / grey[3] < 1.5, "clipping: \(grey[3]) → \(grey[4])")
        // 1/25 s and 2/25 s exceed the 1/30 s frame duration: frames lengthen to the exposure.
        #expect(frames[11].presentationTime - frames[10].presentationTime == MediaTime(value: 1, timescale: 25))
        #expect(frames[14].presentationTime - frames[13].presentationTime == MediaTime(value: 2, timescale: 25))
        #expect(frames[4].presentationTime - frames[3].presentationTime == MediaTime(value: 1, timescale: 30))
        #expect(frames.allSatisfy { $0.stamp == UInt32($0.index) })
    }

    @Test func torchRaisesLumaAndFallsOffWithDistance() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try S.fixCamera(device)
        let levels = S.Recorder(device.observe(.torchLevel))
        let frames = try await S.capture(device, frames: 15) { n, _ in
            if n == 4 { S.configure(device) { () throws(CaptureError) in try device.setTorchModeOn(level: 1) } }
            if n == 9 { try? device.setValue(.real(3), for: .sceneSubjectDistance) }
        }
        let off = frames[3].greyLinear, near = frames[7].greyLinear, far = frames[12].greyLinear
        print("Torch: grey card linear luma off \(off), on at 1 m \(near), on at 3 m \(far)")
        #expect(near > off * 1.3, "torch on at 1 m: \(off) → \(near)")
        #expect(far > off && far < near, "torch at 3 m: \(far) between \(off) and \(near)")
        let observed = await levels.waitFor(count: 2)
        levels.cancel()
        #expect(observed.map(\.value) == [.real(0), .real(1)])
        #expect(observed.last?.presentationTime == frames[5].presentationTime)
    }

    @Test func whiteBalanceLockedShiftsRedOverBlueAndContinuousAWBBringsItBack() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try S.fixCamera(device)
        try device.lockForConfiguration()
        try device.setWhiteBalanceModeLocked(temperatureAndTint: TemperatureAndTint(temperature: 6500))
        device.unlockForConfiguration()
        let adjusting = S.Recorder(device.observe(.isAdjustingWhiteBalance))
        let frames = try await S.capture(device, frames: 60) { n, _ in
            if n == 3 { try? device.setValue(.real(3000), for: .sceneIlluminant) }
            if n == 7 { S.configure(device) { () throws(CaptureError) in try device.setWhiteBalanceMode(.continuousAutoWhiteBalance) } }
        }
        let daylight = frames[2].greyRedOverBlue
        let tungsten = frames[6].greyRedOverBlue
        #expect(abs(daylight - 1) < 0.05, "6500 K, unity gains: R/B \(daylight)")
        #expect(tungsten > 2 * daylight, "3000 K with white balance locked must look warm: R/B \(daylight) → \(tungsten)")
        let settled = try #require(frames.indices.first { n in
            n > 8 && frames[n...].allSatisfy { abs($0.greyRedOverBlue / daylight - 1) < 0.05 }
        }, "continuous AWB never brought R/B back: \(frames.map(\.greyRedOverBlue))")
        let convergence = settled - 8
        #expect(convergence <= 20, "AWB took \(convergence) frames")
        print("AWB: R/B \(daylight) → \(tungsten) (locked at 3000 K) → back within 5 % after \(convergence) frames")
        let flags = await adjusting.waitFor(count: 3)
        adjusting.cancel()
        #expect(flags.map(\.value).contains(.bool(true)) && flags.last?.value == .bool(false), "\(flags.map(\.value))")
        #expect(device.temperatureAndTintValues(for: device.deviceWhiteBalanceGains).temperature < 3500)
    }

    @Test func defocusLowersSharpnessMonotonicallyAndContinuousAFRestoresIt() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try S.fixCamera(device)
        let positions = [0.9, 0.75, 0.6, 0.45, 0.3]
        let completionPTS = Locked<[MediaTime]>([])
        let focusing = S.Recorder(device.observe(.isAdjustingFocus))
        let frames = try await S.capture(device, frames: 80) { n, _ in
            if n % 3 == 2, (n + 1) / 3 < positions.count {
                S.configure(device) { () throws(CaptureError) in
                    try device.setFocusModeLocked(lensPosition: positions[(n + 1) / 3]) { pts in completionPTS.mutate { $0.append(pts) } }
                }
            }
            if n == 14 { S.configure(device) { () throws(CaptureError) in try device.setFocusMode(.continuousAutoFocus) } }
        }
        // Virtual time loses nothing: the script's frame numbers are the camera's.
        #expect(frames.map(\.index) == Array(0..<Int64(frames.count)), "frames lost: \(frames.map(\.index))")
        let sharpness = (0..<positions.count).map { frames[3 * $0 + 1].sharpness }
        for i in 1..<positions.count {
            #expect(sharpness[i] < sharpness[i - 1], "lens \(positions[i - 1]) → \(positions[i]): sharpness \(sharpness[i - 1]) → \(sharpness[i])")
        }
        let restored = try #require(frames.indices.first { n in n > 15 && frames[n...].allSatisfy { $0.sharpness >= 0.95 * sharpness[0] } },
                                    "continuous AF did not restore sharpness: \(frames.map(\.sharpness)); lens \(device.lensPosition)")
        print("AF: sharpness \(sharpness.map { String(format: "%.2f", $0) }) ; continuous AF restored it after \(restored - 15) frames")
        #expect(restored - 15 <= 40)
        #expect(abs(device.lensPosition - 0.9) <= 0.05, "lens settled at \(device.lensPosition)")
        // Completion handlers ran in order with the PTS of the first frame at each new position.
        let reported = await waitForCount(completionPTS, 4)
        #expect(reported == (1..<positions.count).map { frames[3 * $0].presentationTime })
        let flags = await focusing.waitFor(count: 3)
        focusing.cancel()
        #expect(flags.map(\.value).contains(.bool(true)) && flags.last?.value == .bool(false), "\(flags.map(\.value))")
    }

    @Test func continuousAutoExposureConvergesToMidGreyAndBiasShiftsIt() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try device.setValue(.real(0.25), for: .sceneLuminance)
        let adjusting = S.Recorder(device.observe(.isAdjustingExposure))
        let frames = try await S.capture(device, frames: 50) { n, _ in
            if n == 29 { S.configure(device) { () throws(CaptureError) in try device.setExposureTargetBias(1) } }
        }
        // The metering target: 18 % grey, luma 16 + 219 · 0.18^(1/2.2).
        let target = 16 + 219 * pow(0.18, 1 / SyntheticFrameRenderer.gamma)
        let settled = try #require(frames.indices.first { n in frames[n..<30].allSatisfy { abs($0.centreLuma - target) < 6 } },
                                   "AE never settled: \(frames.map(\.centreLuma))")
        print("AE: centre luma \(frames[0].centreLuma) → \(frames[29].centreLuma) (target \(target)) within \(settled) frames")
        #expect(settled <= 15)
        #expect(frames[49].centreLuma > frames[29].centreLuma + 10, "bias +1 EV: \(frames[29].centreLuma) → \(frames[49].centreLuma)")
        let flags = await adjusting.waitFor(count: 3)
        adjusting.cancel()
        #expect(flags.first?.value == .bool(true) && flags.map(\.value).contains(.bool(false)))
    }

    @Test func noiseGrowsWithISOAtTheSameBrightness() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try S.fixCamera(device, duration: MediaTime(value: 1, timescale: 30), iso: 30)
        let settings: [(MediaTime, Double)] = [(MediaTime(value: 1, timescale: 100), 100), (MediaTime(value: 1, timescale: 400), 400),
                                               (MediaTime(value: 1, timescale: 900), 900)]
        let frames = try await S.capture(device, frames: 12) { n, _ in
            if n % 3 == 2, (n + 1) / 3 <= settings.count {
                let (d, iso) = settings[(n + 1) / 3 - 1]
                S.configure(device) { () throws(CaptureError) in try device.setExposureModeCustom(duration: d, iso: iso) }
            }
        }
        let noise = (0..<4).map { frames[3 * $0 + 1].greyStdDev }
        let brightness = (0..<4).map { frames[3 * $0 + 1].greyLuma }
        #expect(noise[0] < 0.3, "base ISO is clean: σ \(noise[0])")
        for i in 1..<4 { #expect(noise[i] > noise[i - 1], "σ by ISO 30/100/400/900: \(noise)") }
        #expect(brightness.allSatisfy { abs($0 - brightness[0]) < 2 }, "same exposure product, same brightness: \(brightness)")
    }

    @Test func zoomJumpsAndRampsAndTheMarkersSurviveEveryEffect() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let zooms = S.Recorder(device.observe(.zoomFactor))
        let frames = try await S.capture(device, frames: 60) { n, _ in
            if n == 2 {
                S.configure(device) { () throws(CaptureError) in
                    try device.setVideoZoomFactor(2)
                    try device.setFocusModeLocked(lensPosition: 0.3)
                    try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 800), iso: 800)
                    try device.setTorchModeOn(level: 0.5)
                }
            }
            if n == 5 { S.configure(device) { () throws(CaptureError) in try device.ramp(toVideoZoomFactor: 8, withRate: 4) } }
        }
        #expect(frames[3].hash != frames[1].hash)
        #expect(frames[3].greyLuma != frames[1].greyLuma)
        // The stamp decodes on every frame and the flash is on frame 30 only, through zoom, blur, noise and torch.
        #expect(frames.allSatisfy { $0.stamp == UInt32($0.index) }, "\(frames.map(\.stamp))")
        #expect(frames.filter(\.flash).map(\.index) == [30])
        // 2 → 8 is two powers of two; at 4 per second that takes 0.5 s = 15 frames.
        let observed = await zooms.waitFor(count: 18, seconds: 2)
        zooms.cancel()
        let values = observed.compactMap { $0.value.doubleValue }
        #expect(values.first == 1 && values.last == 8, "\(values)")
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
        #expect(zip(observed, observed.dropFirst()).allSatisfy { $0.presentationTime < $1.presentationTime })
        #expect((17...18).contains(observed.count), "1, 2, then 15 ramp steps (16 with rounding): \(values)")
        #expect(!device.isRampingVideoZoom && device.videoZoomFactor == 8)
    }

    @Test func sameScenarioWithTheSameChangesGivesIdenticalFrames() async throws {
        func run(seed: UInt64) async throws -> [UInt64] {
            let rig = try DeviceRig(seed: seed, suffix: "determinism-\(seed)")
            let device = try rig.device("sim:back")
            return try await S.capture(device, frames: 30) { n, _ in
                switch n {
                case 4: S.configure(device) { () throws(CaptureError) in try device.setTorchModeOn(level: 0.7) }
                case 9: S.configure(device) { () throws(CaptureError) in try device.setFocusModeLocked(lensPosition: 0.5) }
                case 14: try? device.setValue(.real(3200), for: .sceneIlluminant)
                case 19: S.configure(device) { () throws(CaptureError) in try device.ramp(toVideoZoomFactor: 2, withRate: 8) }
                case 22: S.configure(device) { () throws(CaptureError) in try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 500), iso: 640) }
                default: break
                }
            }.map(\.hash)
        }
        let a = try await run(seed: 11)
        let b = try await run(seed: 11)
        let c = try await run(seed: 12)
        #expect(a == b, "same seed, same changes at the same frames: identical frames")
        #expect(Set(a).count == a.count, "every frame differs from the others")
        #expect(a != c)
    }

    private func waitForCount(_ box: Locked<[MediaTime]>, _ count: Int) async -> [MediaTime] {
        await waitUntil(timeout: .seconds(10)) { box.value.count >= count }
        return box.value
    }
}
