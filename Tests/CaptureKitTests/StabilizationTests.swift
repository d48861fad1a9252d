import CaptureKit
import Foundation
import Testing

/// Measures what a video data output delivers as it arrives (buffers are not kept, so the device's
/// pool never starves): global motion between consecutive frames, the stamps, a luma checksum.
final class MotionProbe: VideoDataOutputSampleBufferDelegate {
    struct Result { var motion = GlobalMotion(); var stamps: [UInt32?] = []; var indices: [Int64] = []; var firstFrameSum = 0 }
    let result = Locked(Result())
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer else { return }
        // Delivery is serial (one queue): take the result out, add this frame, put it back.
        var r = result.withLock { $0 }
        pixels.withPlane(0) { raw in
            let plane = LumaPlane(base: raw, width: pixels.width, height: pixels.height, bytesPerRow: pixels.bytesPerRow[0])
            r.motion.add(plane)
            r.stamps.append(FrameStampReader.frameIndex(in: plane))
            r.indices.append(sample.sequenceNumber)
            if r.indices.count == 1 { r.firstFrameSum = raw.reduce(0) { $0 &+ Int($1) } }
        }
        let updated = r
        result.withLock { $0 = updated }
    }
}

/// Stabilization on pixels (issue 15): the simulated hand shake and what each mode leaves of it.
@Suite struct StabilizationTests {
    /// Runs `camera` in `format` for `frames` frames with shake amplitude `amplitude` and the
    /// connection's preferred mode; returns what the probe measured and the active mode.
    static func run(camera: String = "sim:back", size: Dimensions, fps: Int = 30, pixelFormat: PixelFormat = .nv12,
                    amplitude: Double, mode: VideoStabilizationMode, frames: Int) throws -> (MotionProbe.Result, VideoStabilizationMode) {
        let registry = CaptureKit.makeRegistry(seed: 15)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let device = try registry.device(uniqueID: camera)
        let format = try require(device.format(matching: size, frameRate: fps, pixelFormat: pixelFormat))
        try device.lockForConfiguration()
        try device.setActiveFormat(format)
        device.unlockForConfiguration()
        try device.setValue(.real(amplitude), for: .sceneShakeAmplitude)
        try session.addInput(CaptureDeviceInput(device: device))
        let data = VideoDataOutput()
        data.alwaysDiscardsLateVideoFrames = false
        let probe = MotionProbe()
        let queue = DispatchQueue(label: "motion-probe")
        data.setSampleBufferDelegate(probe, queue: queue)
        try session.addOutput(data)
        let connection = try require(data.connection(with: .video))
        connection.preferredVideoStabilizationMode = mode
        let active = connection.activeVideoStabilizationMode
        try session.enableManualStepping()
        try session.startRunning()
        try session.advance(toFrame: frames)
        session.stopRunning()
        queue.sync {}
        return (probe.result.withLock { $0 }, active)
    }

    /// Must-show 3: with shake amplitude 8 px on the 1920x1080 format (VIS standard and cinematic),
    /// the residual global motion with `standard` is at most 25 % of the unstabilized motion and with
    /// `cinematic` at most 10 %; the stamps stay machine-readable in every mode.
    @Test func stabilizationRemovesMostOfTheShake() throws {
        let size = Dimensions(width: 1920, height: 1080)
        let frames = 40
        let (off, offMode) = try Self.run(size: size, amplitude: 8, mode: .off, frames: frames)
        let (standard, standardMode) = try Self.run(size: size, amplitude: 8, mode: .standard, frames: frames)
        let (cinematic, cinematicMode) = try Self.run(size: size, amplitude: 8, mode: .cinematic, frames: frames)
        #expect(offMode == .off && standardMode == .standard && cinematicMode == .cinematic)
        for result in [off, standard, cinematic] {
            #expect(result.indices == (0..<Int64(frames)).map { $0 })
            #expect(result.stamps == result.indices.map { UInt32($0) }, "stamps drawn after stabilization read back")
            #expect(result.motion.shifts.count == frames - 1)
        }
        let unstabilized = off.motion.meanMagnitude
        let standardRatio = standard.motion.meanMagnitude / unstabilized
        let cinematicRatio = cinematic.motion.meanMagnitude / unstabilized
        // The shake is ±8 px per axis: consecutive frames move several pixels apart.
        #expect(unstabilized > 4, "unstabilized motion \(unstabilized) px")
        #expect(standardRatio <= 0.25, "standard leaves \(standardRatio)")
        #expect(cinematicRatio <= 0.10, "cinematic leaves \(cinematicRatio)")
        print(String(format: "stabilization: mean frame-to-frame motion off %.3f px, standard %.3f px (%.1f %%), cinematic %.3f px (%.1f %%)",
                     unstabilized, standard.motion.meanMagnitude, 100 * standardRatio, cinematic.motion.meanMagnitude, 100 * cinematicRatio))
    }

    /// AVFoundation: asking for a mode the active format lacks leaves the active mode off, and the
    /// pixels are not stabilized; `auto` resolves to the best mode the format has. With no shake
    /// and stabilization off, frames are the same as before the feature (the crop is not applied).
    @Test func unsupportedModesStayOffAndPixelsFollowTheActiveMode() throws {
        let vga = Dimensions(width: 640, height: 480)
        // 640x480 on the back camera has standard only; the webcam has no VIS at all.
        let (off, _) = try Self.run(size: vga, amplitude: 6, mode: .off, frames: 12)
        let (cinematicAsked, cinematicActive) = try Self.run(size: vga, amplitude: 6, mode: .cinematic, frames: 12)
        #expect(cinematicActive == .off)
        #expect(cinematicAsked.motion.shifts == off.motion.shifts, "a mode the format lacks does nothing to the pixels")
        let (_, autoActive) = try Self.run(size: vga, amplitude: 6, mode: .auto, frames: 2)
        #expect(autoActive == .standard)
        let (_, webcamActive) = try Self.run(camera: "sim:webcam", size: vga, pixelFormat: .yuyv, amplitude: 0, mode: .standard, frames: 2)
        #expect(webcamActive == .off)
        // No shake: off leaves frames as they were; standard crops (a narrower field of view).
        let (still, _) = try Self.run(size: vga, amplitude: 0, mode: .off, frames: 2)
        let (cropped, _) = try Self.run(size: vga, amplitude: 0, mode: .standard, frames: 2)
        #expect(still.motion.meanMagnitude < 0.05)
        #expect(still.firstFrameSum != cropped.firstFrameSum)
    }

    /// The device stabilizes with the strongest mode its connections ask for, and stops when the
    /// asking connection goes away.
    @Test func theDeviceFollowsItsConnectionsRequests() throws {
        let registry = CaptureKit.makeRegistry(seed: 15)
        let session = CaptureSession(pace: .virtual)
        let device = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: device))
        let movie = MovieFileOutput(), data = VideoDataOutput()
        try session.addOutput(movie)
        try session.addOutput(data)
        try #require(movie.connection(with: .video)).preferredVideoStabilizationMode = .standard
        try #require(data.connection(with: .video)).preferredVideoStabilizationMode = .cinematic
        #expect(try device.value(of: .videoStabilizationMode) == .menu("cinematic"))
        session.removeOutput(data)
        #expect(try device.value(of: .videoStabilizationMode) == .menu("standard"))
        session.removeOutput(movie)
        #expect(try device.value(of: .videoStabilizationMode) == .menu("off"))
    }
}
