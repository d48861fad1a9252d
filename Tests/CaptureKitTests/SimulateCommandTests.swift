import CaptureKit
import Foundation
import Testing

/// `capture simulate` where no v4l2loopback node exists (the host): typed, actionable failures.
/// The writing itself is exercised in the VM (Tests/CaptureDeviceTests/LoopbackTests).
@Suite struct SimulateCommandTests {
    @Test func aMissingNodeFailsNamingItAndHowToLoadTheModule() throws {
        let result = try TestSupport.run(CommandLineTests.binary, ["simulate", "--camera", "sim:back", "--to", "/dev/video-capturekit-none",
                                                                   "--format", "640x480@30:YUYV", "--duration", "1"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot write video to /dev/video-capturekit-none: no such device node"), "\(result.stderr)")
        #expect(result.stderr.contains("modprobe v4l2loopback"))
    }

    @Test func aFileThatIsNotAV4L2NodeIsNotAVideoOutput() throws {
        let result = try TestSupport.run(CommandLineTests.binary, ["simulate", "--camera", "sim:back", "--to", "/dev/null", "--duration", "1"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot write video to /dev/null: it is not a video output node (not a V4L2 device)"), "\(result.stderr)")
    }

    @Test func badArgumentsFailBeforeTouchingTheDevice() throws {
        let format = try TestSupport.run(CommandLineTests.binary, ["simulate", "--camera", "sim:back", "--to", "/dev/video10", "--format", "640x480"])
        #expect(format.status != 0 && format.stderr.contains("--format '640x480' must look like"), "\(format.stderr)")
        let size = try TestSupport.run(CommandLineTests.binary, ["simulate", "--camera", "sim:back", "--to", "/dev/video10", "--format", "320x240@30"])
        #expect(size.status != 0 && size.stderr.contains("sim:back has no uncompressed format 320x240 at 30 fps"), "\(size.stderr)")
        let camera = try TestSupport.run(CommandLineTests.binary, ["simulate", "--camera", "sim:nothing", "--to", "/dev/video10"])
        #expect(camera.status != 0 && camera.stderr.contains("sim:nothing"), "\(camera.stderr)")
    }
}
