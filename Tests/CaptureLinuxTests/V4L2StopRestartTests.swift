import CaptureKit
import CaptureKitTesting
import Foundation
import Testing
@testable import CaptureV4L2

/// The VM flake of `ComplianceTests.aSessionDeliversOrderedSamplesStopsAndRestarts` on vivid
/// ("locked for configuration … V4L2 record priority" at the second `startRunning`). vivid's own
/// log showed the cause: right after the stop's STREAMOFF and REQBUFS(0), a REQBUFS of 2 buffers and
/// a stream start that no ioctl asked for, then "vivid_s_fmt_vid_cap device busy" at the restart's
/// S_FMT. The stream thread had passed its stop check and called poll() on the node after the stop
/// freed the buffers; a poll on a capture queue without buffers starts vb2's read() emulation,
/// which allocates and streams buffers of its own, so the queue stayed busy. The fake kernel does
/// what vb2_poll does; the test holds the stream thread at the start of a poll until the buffers are
/// freed (as a preempted thread would be), stops and starts again.
@Suite struct V4L2StopRestartTests {
    @Test(.timeLimit(.minutes(1))) func noPollFollowsTheStopsBufferReleaseSoTheRestartCanSetTheFormat() async throws {
        let fake = FakeCamera.live(fps: 30)
        let registry = DeviceRegistry(drivers: [V4L2Driver(system: fake)])
        let camera = try registry.device(uniqueID: "/dev/video0")
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: camera))
        try session.startRunning()
        try await eventually("three frames dequeued", timeout: .seconds(30)) {
            fake.trace.filter({ $0.call == .dequeueBuffer && $0.error == nil }).count >= 3
        }
        // The stream thread's next poll waits at its start (up to 1 s) for the buffers to be freed,
        // as a thread preempted between its stop check and poll(); the stop comes while it waits.
        let freed = fake.buffersFreed
        let entered = Locked(false)
        fake.beforePoll.withLock {
            $0 = {
                guard !entered.withLock({ e in defer { e = true }; return e }) else { return }
                _ = freed.wait(timeout: .now() + 1)
            }
        }
        try await eventually("the stream thread to poll", timeout: .seconds(30)) { entered.withLock { $0 } }
        session.stopRunning()
        fake.beforePoll.withLock { $0 = nil }
        let emulation = fake.trace.filter { $0.call == .poll && $0.detail.contains("read() emulation") }
        #expect(emulation.isEmpty, "a poll after the stop freed the buffers: \(emulation)")
        // The restart sets the format again: refused with EBUSY while the emulation streams.
        try session.startRunning()
        session.stopRunning()
    }
}
