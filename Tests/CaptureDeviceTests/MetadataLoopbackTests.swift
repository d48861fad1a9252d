import CaptureKit
import Foundation
import Testing

/// Must-show 5: `capture simulate` writes a QR scene to the v4l2loopback node and `capture scan`
/// reads the right string back through the real V4L2 backend (inside ci/vm-run).
@Suite(.serialized, .enabled(if: DeviceEnvironment.loopbackAvailable, DeviceEnvironment.loopbackSkipReason), .timeLimit(.minutes(3)))
struct MetadataLoopbackTests {
    @Test func scanReadsTheQRCodeSimulateWritesToTheLoopback() throws {
        let node = try DeviceEnvironment.requireLoopback()
        let tool = Process()
        tool.executableURL = URL(fileURLWithPath: DeviceEnvironment.captureTool)
        tool.arguments = ["simulate", "--camera", "sim:back", "--to", node, "--format", "640x480@15:YUYV",
                          "--control", "scene.subjectDistance=1", "--control", "focus.lensPosition=0.9",
                          "--control", "scene.qrCode=through the kernel", "--duration", "90"]
        tool.standardOutput = Pipe()
        tool.standardError = Pipe()
        try tool.run()
        defer { if tool.isRunning { tool.interrupt(); tool.waitUntilExit() } }
        try DeviceEnvironment.waitForCapture(node)
        let scan = try DeviceEnvironment.run("timeout", ["-k", "5", "60", DeviceEnvironment.captureTool, "scan", "--camera", node,
                                                         "--types", "qr", "--duration", "3", "--pace", "realtime", "--json"])
        print("capture scan \(node): exit \(scan.status)\n\(scan.stdout.split(separator: "\n").suffix(3).joined(separator: "\n"))\n\(scan.stderr)")
        #expect(scan.status == 0, "\(scan.stderr)")
        let lines = scan.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let values = lines.compactMap { $0["value"] as? String }
        // Under TCG the debug-built writer and reader share one slow vCPU: few frames arrive.
        #expect(values.count >= 3, "codes read in 3 s: \(values.count)")
        // The last line is the versioned summary envelope ({"captureKitVersion", "command": "scan", "schemaVersion", "summary"}).
        #expect(lines.last?["summary"] != nil && lines.last?["command"] as? String == "scan", "\(scan.stdout.split(separator: "\n").last ?? "")")
        #expect(!values.isEmpty && values.allSatisfy { $0 == "through the kernel" })
    }
}
