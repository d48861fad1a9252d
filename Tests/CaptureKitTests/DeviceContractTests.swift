// One suite per AVCaptureDevice contract rule set; authorization, discovery, completions and
// notifications are in DeviceRuntimeContractTests.swift.
import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// The AVFoundation device contract, rule by rule, on the simulator.
@Suite struct DeviceContractTests {
    typealias S = DeviceTestSupport

    // MARK: Configuration lock

    @Test func everyControlNeedsTheLockAndUnlockReleasesIt() throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let hd = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 60))
        let changes: [(String, () throws(CaptureError) -> Void)] = [
            ("format", { () throws(CaptureError) in try device.setActiveFormat(hd) }),
            ("min duration", { () throws(CaptureError) in try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 15)) }),
            ("max duration", { () throws(CaptureError) in try device.setActiveVideoMaxFrameDuration(MediaTime(value: 1, timescale: 15)) }),
            ("focus mode", { () throws(CaptureError) in try device.setFocusMode(.autoFocus) }),
            ("lens", { () throws(CaptureError) in try device.setFocusModeLocked(lensPosition: 0.5) }),
            ("focus point", { () throws(CaptureError) in try device.setFocusPointOfInterest(CapturePoint(x: 0.2, y: 0.2)) }),
            ("smooth AF", { () throws(CaptureError) in try device.setSmoothAutoFocusEnabled(true) }),
            ("exposure mode", { () throws(CaptureError) in try device.setExposureMode(.locked) }),
            ("custom exposure", { () throws(CaptureError) in try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 60), iso: 200) }),
            ("bias", { () throws(CaptureError) in try device.setExposureTargetBias(1) }),
            ("exposure point", { () throws(CaptureError) in try device.setExposurePointOfInterest(.center) }),
            ("white balance", { () throws(CaptureError) in try device.setWhiteBalanceModeLocked(gains: .unity) }),
            ("white balance mode", { () throws(CaptureError) in try device.setWhiteBalanceMode(.autoWhiteBalance) }),
            ("torch", { () throws(CaptureError) in try device.setTorchModeOn(level: 0.5) }),
            ("torch mode", { () throws(CaptureError) in try device.setTorchMode(.auto) }),
            ("zoom", { () throws(CaptureError) in try device.setVideoZoomFactor(2) }),
            ("zoom ramp", { () throws(CaptureError) in try device.ramp(toVideoZoomFactor: 2, withRate: 1) }),
            ("monitoring", { () throws(CaptureError) in try device.setSubjectAreaChangeMonitoringEnabled(true) }),
            ("generic control", { () throws(CaptureError) in try device.setValue(.real(0.3), for: .lensPosition) }),
        ]
        for (name, change) in changes {
            do {
                try change()
                Issue.record("\(name) succeeded without the lock")
            } catch {
                guard case .notLockedForConfiguration(let id, _) = error else { Issue.record("\(name): wrong error \(error)"); continue }
                #expect(id == device.uniqueID)
            }
        }
        try device.lockForConfiguration()
        for (name, change) in changes {
            #expect(throws: Never.self, "\(name) under the lock") { try change() }
        }
        device.unlockForConfiguration()
        #expect(!device.isLockedForConfiguration)
        #expect(throws: CaptureError.notLockedForConfiguration(device: device.uniqueID, operation: "setVideoZoomFactor")) {
            try device.setVideoZoomFactor(1)
        }
        // Scene parameters describe the world: no lock needed.
        try device.setValue(.real(4000), for: .sceneIlluminant)
        #expect(device.controlStatuses().first { $0.key == "scene.illuminant" }?.current == "4000")
    }

    /// An unplug ends the lock taken through the unplugged object's handle, not one another
    /// registry's object holds: a simulated camera unplugged in one scenario left a parallel test's
    /// camera of the same ID unlocked between its lock and its next setter (CI, pass 1).
    @Test func anUnplugInOneRegistryLeavesAnotherRegistrysLockAlone() throws {
        let rig = try DeviceRig()
        let unplugged = try rig.device("sim:back")
        let otherRig = try DeviceRig(suffix: rig.suffix)
        let held = try otherRig.device("sim:back")
        _ = unplugged.activeFormat
        try unplugged.lockForConfiguration()   // opens its handle, as a session would
        unplugged.unlockForConfiguration()
        try held.lockForConfiguration()
        rig.scenario.disconnect(unplugged.uniqueID)
        #expect(!unplugged.isConnected && held.isConnected)
        #expect(held.isLockedForConfiguration)
        try held.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 15))
        otherRig.scenario.disconnect(held.uniqueID)
        #expect(!held.isLockedForConfiguration, "its own unplug ends the lock")
    }

    @Test func anotherClientIsRefusedAcrossRegistriesAndSessionsUntilUnlock() throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        // A second registry (another part of the program, another session) gets another object for the same device.
        let other = try DeviceRig(suffix: rig.suffix).device("sim:back")
        #expect(other !== device)
        let a = CaptureDeviceClient(name: "recorder A"), b = CaptureDeviceClient(name: "preview B")
        try device.lockForConfiguration(client: a)
        try device.lockForConfiguration(client: a)  // nested by the same client
        #expect(throws: CaptureError.lockedByAnotherClient(device: device.uniqueID, holder: "recorder A")) {
            try other.lockForConfiguration(client: b)
        }
        device.unlockForConfiguration(client: b)  // not the holder: no effect
        #expect(device.configurationLockHolder === a)
        device.unlockForConfiguration(client: a)
        #expect(other.isLockedForConfiguration, "one of two nested locks remains")
        device.unlockForConfiguration(client: a)
        try other.lockForConfiguration(client: b)
        #expect(device.configurationLockHolder === b)
        other.unlockForConfiguration(client: b)

        // Another process (the driver's configuration priority, V4L2's S_PRIORITY).
        rig.scenario.setExternalConfigurationLock(device.uniqueID, holder: "pid 4242 (another app)")
        #expect(throws: CaptureError.lockedByAnotherClient(device: device.uniqueID, holder: "pid 4242 (another app)")) {
            try device.lockForConfiguration()
        }
        rig.scenario.setExternalConfigurationLock(device.uniqueID, holder: nil)
        try device.lockForConfiguration()
        device.unlockForConfiguration()
    }

    // MARK: Values out of range, unsupported modes

    @Test func outOfRangeValuesAreProgrammerErrorsNamingTheRange() throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        func expectRange(_ control: String, _ body: () throws(CaptureError) -> Void) {
            do {
                try body()
                Issue.record("\(control): accepted an out-of-range value")
            } catch {
                guard case .valueOutOfRange(let c, _, let allowed) = error else { Issue.record("\(control): \(error)"); return }
                #expect(c == control)
                #expect(!allowed.isEmpty)
            }
        }
        expectRange("focus.lensPosition") { () throws(CaptureError) in try device.setFocusModeLocked(lensPosition: 1.5) }
        expectRange("focus.pointOfInterest") { () throws(CaptureError) in try device.setFocusPointOfInterest(CapturePoint(x: 1.2, y: 0.5)) }
        expectRange("exposure.duration") { () throws(CaptureError) in try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 2), iso: CaptureDevice.currentISO) }
        expectRange("exposure.iso") { () throws(CaptureError) in try device.setExposureModeCustom(duration: CaptureDevice.currentExposureDuration, iso: 10) }
        expectRange("exposure.bias") { () throws(CaptureError) in try device.setExposureTargetBias(9) }
        expectRange("whiteBalance.gains.blue") { () throws(CaptureError) in try device.setWhiteBalanceModeLocked(gains: WhiteBalanceGains(red: 1, green: 1, blue: 5)) }
        expectRange("whiteBalance.gains.red") { () throws(CaptureError) in try device.setWhiteBalanceModeLocked(gains: WhiteBalanceGains(red: 0.5, green: 1, blue: 1)) }
        expectRange("torch.level") { () throws(CaptureError) in try device.setTorchModeOn(level: 0) }
        expectRange("torch.level") { () throws(CaptureError) in try device.setTorchModeOn(level: 1.5) }
        expectRange("zoom.factor") { () throws(CaptureError) in try device.setVideoZoomFactor(17) }
        expectRange("zoom.factor") { () throws(CaptureError) in try device.setVideoZoomFactor(0.5) }
        expectRange("activeVideoMinFrameDuration") { () throws(CaptureError) in try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 60)) }
        expectRange("activeVideoMaxFrameDuration") { () throws(CaptureError) in try device.setActiveVideoMaxFrameDuration(MediaTime(value: 2, timescale: 1)) }
        // The 1080p formats allow 0.5 s exposures; 640x480 stops at 0.2 s.
        let fullHD = try #require(device.format(matching: Dimensions(width: 1920, height: 1080), frameRate: 30))
        try device.setActiveFormat(fullHD)
        try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 3), iso: 400)
        expectRange("exposure.iso") { () throws(CaptureError) in try device.setExposureModeCustom(duration: CaptureDevice.currentExposureDuration, iso: 900) }
        // The sentinels keep values; custom exposure is reported back.
        #expect(device.exposureMode == .custom)
        #expect(abs(device.exposureDuration.seconds - 1.0 / 3) < 1e-6 && device.iso == 400)
    }

    @Test func currentSentinelsKeepTheOtherValue() throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        try device.setExposureModeCustom(duration: MediaTime(value: 1, timescale: 200), iso: CaptureDevice.currentISO)
        try device.setExposureModeCustom(duration: CaptureDevice.currentExposureDuration, iso: 400)
        #expect(device.exposureDuration == MediaTime(value: 1, timescale: 200) && device.iso == 400)
        try device.setFocusModeLocked(lensPosition: 0.4)
        try device.setFocusModeLocked(lensPosition: CaptureDevice.currentLensPosition)
        #expect(device.lensPosition == 0.4 && device.focusMode == .locked)
        try device.setWhiteBalanceModeLocked(gains: WhiteBalanceGains(red: 2, green: 1, blue: 1.5))
        try device.setWhiteBalanceModeLocked(gains: .current)
        #expect(device.deviceWhiteBalanceGains == WhiteBalanceGains(red: 2, green: 1, blue: 1.5))
    }

    @Test func unsupportedModesAndControlsAreDistinctErrors() throws {
        let rig = try DeviceRig()
        let front = try rig.device("sim:front")
        let webcam = try rig.device("sim:webcam")
        try front.lockForConfiguration()
        try webcam.lockForConfiguration()
        defer {
            front.unlockForConfiguration()
            webcam.unlockForConfiguration()
        }
        func expectUnsupported(_ what: String, _ body: () throws(CaptureError) -> Void) {
            do {
                try body()
                Issue.record("\(what) was accepted")
            } catch {
                guard case .controlNotSupported = error else { Issue.record("\(what): \(error)"); return }
            }
        }
        // Front camera: fixed focus, no torch.
        #expect(front.isFocusModeSupported(.locked) && !front.isFocusModeSupported(.autoFocus) && !front.hasTorch)
        expectUnsupported("front autofocus") { () throws(CaptureError) in try front.setFocusMode(.continuousAutoFocus) }
        expectUnsupported("front lens position") { () throws(CaptureError) in try front.setFocusModeLocked(lensPosition: 0.5) }
        expectUnsupported("front torch") { () throws(CaptureError) in try front.setTorchModeOn(level: 1) }
        expectUnsupported("front torch mode") { () throws(CaptureError) in try front.setTorchMode(.on) }
        try front.setFocusMode(.locked)
        // Webcam: no custom gains, no locked exposure, no zoom; temperature in 2800…6500 K.
        #expect(!webcam.isLockingWhiteBalanceWithCustomDeviceGainsSupported && !webcam.isExposureModeSupported(.locked))
        expectUnsupported("webcam gains") { () throws(CaptureError) in try webcam.setWhiteBalanceModeLocked(gains: .unity) }
        expectUnsupported("webcam locked exposure") { () throws(CaptureError) in try webcam.setExposureMode(.locked) }
        expectUnsupported("webcam zoom") { () throws(CaptureError) in try webcam.setVideoZoomFactor(1) }
        expectUnsupported("webcam bias") { () throws(CaptureError) in try webcam.setExposureTargetBias(0) }
        try webcam.setWhiteBalanceModeLocked(temperatureAndTint: TemperatureAndTint(temperature: 3200))
        #expect(webcam.whiteBalanceMode == .locked)
        #expect(throws: CaptureError.self) { try webcam.setWhiteBalanceModeLocked(temperatureAndTint: TemperatureAndTint(temperature: 9000)) }
        // Manual exposure in 100 µs units.
        try webcam.setExposureModeCustom(duration: MediaTime(value: 1234, timescale: 1_000_000), iso: CaptureDevice.currentISO)
        #expect(abs(webcam.exposureDuration.seconds - 0.0012) < 1e-9)
    }

    @Test func torchLevelAboveTheThermalLimitIsARuntimeError() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        try device.lockForConfiguration()
        try device.setTorchModeOn(level: 0.9)
        device.unlockForConfiguration()
        #expect(device.torchLevel == 0.9 && device.isTorchActive)
        // The phone heats up: the maximum available level drops.
        try device.setValue(.real(0.5), for: .sceneMaxTorchLevel)
        #expect(device.maxAvailableTorchLevel == 0.5)
        #expect(device.torchLevel == 0.5, "the torch is dimmed to what is available")
        try device.lockForConfiguration()
        #expect(throws: CaptureError.torchLevelUnavailable(requested: 0.8, available: 0.5)) { try device.setTorchModeOn(level: 0.8) }
        try device.setTorchModeOn(level: 0.4)
        try device.setTorchModeOn(level: CaptureDevice.torchLevelMaximumAvailable)
        #expect(device.torchLevel == 0.5)
        try device.setTorchMode(.off)
        device.unlockForConfiguration()
        #expect(device.torchLevel == 0 && device.torchMode == .off)
    }

    // MARK: Formats and frame durations

    @Test func phoneProfileFormatsMatchTheSeedFigures() throws {
        let rig = try DeviceRig()
        let back = try rig.device("sim:back")
        func formats(_ w: Int, _ h: Int) -> [DeviceFormat] { back.formats.filter { $0.dimensions == Dimensions(width: w, height: h) && $0.pixelFormat == .nv12 } }
        #expect(formats(640, 480).count == 2 && formats(1280, 720).count == 2 && formats(1920, 1080).count == 4)
        #expect(Set(formats(1280, 720).map(\.isFullRange)) == [false, true], "420v and 420f")
        let hd = try #require(formats(1280, 720).first)
        #expect(hd.frameRateRanges.map(\.minFrameRate) == [5] && hd.frameRateRanges.map(\.maxFrameRate) == [240])
        #expect(hd.minISO == 29 && hd.maxISO == 928 && !hd.isVideoHDRSupported)
        #expect(hd.minExposureDuration == MediaTime(value: 3, timescale: 1_000_000) && hd.maxExposureDuration == MediaTime(value: 1, timescale: 5))
        let fullHD = formats(1920, 1080)
        #expect(Set(fullHD.map { $0.frameRateRanges[0].maxFrameRate }) == [30, 60])
        #expect(fullHD.allSatisfy { $0.minISO == 29 && $0.maxISO == 464 && $0.isVideoHDRSupported && $0.maxExposureDuration == MediaTime(value: 1, timescale: 2) })
        #expect(fullHD.allSatisfy { $0.highResolutionStillImageDimensions == Dimensions(width: 3264, height: 1836) })
        #expect(fullHD.allSatisfy { $0.isVideoStabilizationModeSupported(.cinematic) } && !hd.isVideoStabilizationModeSupported(.cinematic))
        #expect(back.hasTorch && back.isFocusModeSupported(.continuousAutoFocus))
        // The webcam: YUYV and MJPEG at three sizes, discrete 5…30 fps.
        let webcam = try rig.device("sim:webcam")
        #expect(Set(webcam.formats.compactMap(\.pixelFormat)) == [.yuyv, .mjpeg] && webcam.formats.count == 6)
        #expect(webcam.formats.allSatisfy { $0.frameRateRanges.map(\.maxFrameRate) == [5, 10, 15, 20, 25, 30] && $0.frameRateRanges.allSatisfy { $0.minFrameRate == $0.maxFrameRate } })
        #expect(webcam.position == .external && webcam.deviceType == .external && !webcam.hasTorch)
        let mic = try rig.device("sim:mic")
        #expect(mic.mediaType == .audio && mic.activeFormat.audioFormat?.sampleRate == 48_000)
    }

    @Test func sixtyFramesPerSecondGivesAnExactPTSStepAndOutsideEveryRangeThrows() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let hd = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 60))
        try device.lockForConfiguration()
        try device.setActiveFormat(hd)
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 60))
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 300)) }
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 4)) }
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 0, timescale: 1)) }
        device.unlockForConfiguration()
        let frames = try await S.capture(device, frames: 12)
        let steps = zip(frames, frames.dropFirst()).map { $1.presentationTime - $0.presentationTime }
        #expect(steps.allSatisfy { $0 == MediaTime(value: 1, timescale: 60) }, "\(steps)")
        #expect(frames.first?.presentationTime == .zero)
    }

    @Test func frameDurationRulesInvalidRestoresDefaultAndAFormatResetsThem() throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        let thirty = MediaTime(value: 1, timescale: 30)
        #expect(device.activeVideoMinFrameDuration == thirty && device.activeVideoMaxFrameDuration == thirty)
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        try device.setActiveVideoMaxFrameDuration(MediaTime(value: 1, timescale: 5))
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 24))
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 24))
        #expect(device.activeVideoMaxFrameDuration == MediaTime(value: 1, timescale: 5))
        // A minimum above the maximum raises the maximum.
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 2))
        #expect(device.activeVideoMaxFrameDuration == MediaTime(value: 1, timescale: 2))
        try device.setActiveVideoMinFrameDuration(.invalid)
        try device.setActiveVideoMaxFrameDuration(.invalid)
        #expect(device.activeVideoMinFrameDuration == thirty && device.activeVideoMaxFrameDuration == thirty)
        let hd = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 120))
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 10))
        try device.setActiveFormat(hd)
        #expect(device.activeVideoMinFrameDuration == thirty && device.activeVideoMaxFrameDuration == thirty)
        // Zoom is clamped to the new format's maximum.
        try device.setVideoZoomFactor(40)
        try device.setActiveFormat(try #require(device.format(matching: Dimensions(width: 640, height: 480), frameRate: 30)))
        #expect(device.videoZoomFactor == 16)
    }

    /// Seed 003's frame-rate recipe (objc.io "Capturing Video on iOS"), line for line in Swift.
    @Test func seedRecipeRunsAsWrittenAndOnly720pReaches240() async throws {
        let rig = try DeviceRig()
        let device = try rig.device("sim:back")
        func recipe() throws {
            let frameDuration = MediaTime(value: 1, timescale: 60)
            let supportedFrameRateRanges = device.activeFormat.frameRateRanges
            var frameRateSupported = false
            for range in supportedFrameRateRanges {
                if frameDuration >= range.minFrameDuration && frameDuration <= range.maxFrameDuration {
                    frameRateSupported = true
                }
            }
            if frameRateSupported, (try? device.lockForConfiguration()) != nil {
                try device.setActiveVideoMaxFrameDuration(frameDuration)
                try device.setActiveVideoMinFrameDuration(frameDuration)
                device.unlockForConfiguration()
            }
        }
        // The default 640x480 format tops out at 30 fps: the recipe leaves it alone.
        try recipe()
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 30))
        // On the 720p format (5–240 fps) it applies.
        try device.lockForConfiguration()
        try device.setActiveFormat(try #require(device.formats.first { $0.dimensions?.height == 720 }))
        device.unlockForConfiguration()
        try recipe()
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 60))
        #expect(device.activeVideoMaxFrameDuration == MediaTime(value: 1, timescale: 60))
        #expect(!device.isLockedForConfiguration)
        // 240 fps: selectable at 720p and delivered at 1/240 s steps; no 1080p format accepts it.
        let fast = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 240))
        #expect(device.format(matching: Dimensions(width: 1920, height: 1080), frameRate: 240) == nil)
        try device.lockForConfiguration()
        try device.setActiveFormat(fast)
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 240))
        device.unlockForConfiguration()
        let frames = try await S.capture(device, frames: 6)
        #expect(frames.map(\.presentationTime) == (0..<6).map { MediaTime(value: Int64($0), timescale: 240) })
        for format in device.formats where format.dimensions == Dimensions(width: 1920, height: 1080) {
            try device.lockForConfiguration()
            try device.setActiveFormat(format)
            #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 240)) }
            device.unlockForConfiguration()
        }
    }
}
