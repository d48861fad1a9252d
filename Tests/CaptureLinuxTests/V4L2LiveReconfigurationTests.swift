import CaptureKit
import CaptureKitTesting
import Foundation
import Testing
@testable import CaptureV4L2

/// Live reconfiguration on V4L2, on the fake kernel: a rate change through S_PARM while streaming,
/// a size change by restarting the queue in the stream thread, with the calls in order.
@Suite struct V4L2LiveReconfigurationTests {
    final class Log: VideoDataOutputSampleBufferDelegate {
        let frames = Locked<[(index: Int64, pts: MediaTime, width: Int)]>([])
        /// PTS of frames the output dropped late (delivered to `didDrop`, not to `didOutput`).
        let dropped = Locked<[MediaTime]>([])
        func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
            frames.withLock { $0.append((sample.sequenceNumber, sample.presentationTime, sample.pixelBuffer?.width ?? 0)) }
        }
        func dataOutput(_ output: VideoDataOutput, didDrop reason: DropReason, presentationTime: MediaTime, from connection: CaptureConnection) {
            dropped.withLock { $0.append(presentationTime) }
        }
    }

    static func run(_ change: (CaptureDevice) throws -> Void, fake: FakeCamera) async throws -> (log: Log, reported: MediaTime) {
        let registry = DeviceRegistry(drivers: [V4L2Driver(system: fake)])
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: "/dev/video0")
        let vga = try #require(camera.format(matching: Dimensions(width: 640, height: 480), frameRate: 30, pixelFormat: .yuyv))
        try camera.lockForConfiguration()
        try camera.setActiveFormat(vga)
        camera.unlockForConfiguration()
        try session.addInput(CaptureDeviceInput(device: camera))
        let log = Log()
        let data = VideoDataOutput()
        let queue = DispatchQueue(label: "v4l2-live")
        data.setSampleBufferDelegate(log, queue: queue)
        try session.addOutput(data)
        try session.startRunning()
        defer { session.stopRunning() }
        try await eventually("5 frames before the change") { log.frames.withLock { $0.count } >= 5 }
        let reported = Locked<MediaTime?>(nil)
        try camera.lockForConfiguration()
        try change(camera)
        // The completion of the last change made: the frame duration (every change sets it last).
        try camera.setActiveVideoMaxFrameDuration(camera.activeVideoMaxFrameDuration) { pts in reported.withLock { $0 = pts } }
        camera.unlockForConfiguration()
        try await eventually("the change's completion") { reported.withLock { $0 } != nil }
        let at = try #require(reported.withLock { $0 })
        try await eventually("5 frames at or after the change") { log.frames.withLock { $0.filter { $0.pts >= at }.count } >= 5 }
        session.stopRunning()
        queue.sync {}
        return (log, at)
    }

    @Test(.timeLimit(.minutes(2))) func rateChangeUsesSParmWhileStreaming() async throws {
        let fake = FakeCamera.live(fps: 30)
        let (log, reported) = try await Self.run({ camera in
            try camera.setActiveVideoMaxFrameDuration(MediaTime(value: 1, timescale: 15))
            try camera.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 15))
        }, fake: fake)
        let trace = fake.trace.map(\.call)
        let on = try #require(trace.firstIndex(of: .streamOn))
        #expect(trace[on...].contains(.setParameters), "S_PARM while streaming")
        #expect(trace.filter { $0 == .streamOn }.count == 1, "no restart: one STREAMON")
        let frames = log.frames.withLock { $0 }
        let after = frames.filter { $0.pts >= reported }
        // The frame at the reported PTS exists: delivered, or dropped late by the data output when
        // its queue was busy (CI's real-time pass runs 9 suites at once on 2 cores: once, the first
        // frame delivered after the change was the next one, 66.7 ms later).
        let droppedAfter = log.dropped.withLock { $0 }.filter { $0 >= reported }
        #expect((after.map(\.pts) + droppedAfter).min() == reported,
                "first delivered after the change: \(after.prefix(2).map(\.pts.seconds)), dropped: \(droppedAfter.prefix(2).map(\.seconds)), reported: \(reported.seconds)")
        for (a, b) in zip(after, after.dropFirst()) {
            let gap = (b.pts - a.pts).seconds
            let k = (gap * 15).rounded()
            #expect(k >= 1 && abs(gap - k / 15) < 0.002, "gap \(gap) after the change")
        }
        #expect(frames.map(\.index) == frames.map(\.index).sorted())
    }

    @Test(.timeLimit(.minutes(2))) func sizeChangeRestartsTheQueueInTheStreamThread() async throws {
        let fake = FakeCamera.live(fps: 30)
        let (log, reported) = try await Self.run({ camera in
            let small = try #require(camera.format(matching: Dimensions(width: 320, height: 240), frameRate: 30, pixelFormat: .yuyv))
            try camera.setActiveFormat(small)
        }, fake: fake)
        let trace = fake.trace
        let on = try #require(trace.firstIndex { $0.call == .streamOn })
        let restart = trace[(on + 1)...].map { "\($0.call.rawValue) \($0.detail)" }.filter {
            ["STREAMOFF", "REQBUFS", "S_FMT", "STREAMON"].contains(String($0.split(separator: " ").first ?? ""))
        }
        #expect(Array(restart.prefix(5)) == ["STREAMOFF ", "REQBUFS count 0", "S_FMT YUYV 320x240", "REQBUFS count 8", "STREAMON "],
                "\(restart)")
        let frames = log.frames.withLock { $0 }
        let before = frames.filter { $0.pts < reported }, after = frames.filter { $0.pts >= reported }
        #expect(before.allSatisfy { $0.width == 640 } && after.allSatisfy { $0.width == 320 } && !after.isEmpty)
        #expect(frames.map(\.index) == frames.map(\.index).sorted(), "sequence numbers continue across the restart")
        print("V4L2 restart: \(before.count) frames of 640x480, \(after.count) of 320x240 from \(reported.seconds) s, \(log.dropped.withLock { $0.count }) reported lost")
    }
}

/// The VM flake of `VividReconfigurationTests` (the first frame delivered at or after a size
/// change came 1.75 ms after the reported PTS): the reported PTS is the first frame of the change,
/// but in real time a data output drops a frame that arrives while its delegate is still busy
/// (`alwaysDiscardsLateVideoFrames`), so that frame may reach `didDrop`, not `didOutput`. Made
/// certain here by holding the delegate busy across the change: the claim "the first frame
/// delivered at or after the reported PTS is at it" fails; "the first frame delivered or dropped"
/// holds.
@Suite struct V4L2ReportedFrameDroppedLateTests {
    final class HeldLog: VideoDataOutputSampleBufferDelegate {
        let frames = Locked<[(pts: MediaTime, width: Int)]>([])
        let dropped = Locked<[MediaTime]>([])
        /// While set, a callback that starts waits for `release`; `isHeld` says one is waiting.
        let hold = Locked(false)
        let isHeld = Locked(false)
        let release = DispatchSemaphore(value: 0)
        func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
            frames.withLock { $0.append((sample.presentationTime, sample.pixelBuffer?.width ?? 0)) }
            if hold.withLock({ $0 }) {
                isHeld.withLock { $0 = true }
                release.wait()
                isHeld.withLock { $0 = false }
            }
        }
        func dataOutput(_ output: VideoDataOutput, didDrop reason: DropReason, presentationTime: MediaTime, from connection: CaptureConnection) {
            dropped.withLock { $0.append(presentationTime) }
        }
    }

    @Test(.timeLimit(.minutes(2))) func theFrameAtTheReportedPTSIsDroppedLateWhileTheDelegateIsBusy() async throws {
        let registry = DeviceRegistry(drivers: [V4L2Driver(system: FakeCamera.live(fps: 30))])
        let camera = try registry.device(uniqueID: "/dev/video0")
        let vga = try #require(camera.format(matching: Dimensions(width: 640, height: 480), frameRate: 30, pixelFormat: .yuyv))
        let small = try #require(camera.format(matching: Dimensions(width: 320, height: 240), frameRate: 30, pixelFormat: .yuyv))
        try camera.lockForConfiguration()
        try camera.setActiveFormat(vga)
        camera.unlockForConfiguration()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: camera))
        let log = HeldLog()
        let data = VideoDataOutput()   // alwaysDiscardsLateVideoFrames: true, AVFoundation's default
        let queue = DispatchQueue(label: "v4l2-held")
        data.setSampleBufferDelegate(log, queue: queue)
        try session.addOutput(data)
        try session.startRunning()
        defer {
            log.hold.withLock { $0 = false }
            log.release.signal()
            session.stopRunning()
        }
        try await eventually("3 delivered frames") { log.frames.withLock { $0.count } >= 3 }
        // The delegate is busy (held in a callback) from before the change until after its frame.
        log.hold.withLock { $0 = true }
        try await eventually("the delegate to be held in a callback") { log.isHeld.withLock { $0 } }
        let reported = Locked<MediaTime?>(nil)
        try camera.lockForConfiguration()
        try camera.setActiveFormat(small) { pts in reported.withLock { $0 = pts } }
        camera.unlockForConfiguration()
        try await eventually("the size change's first frame") { reported.withLock { $0 } != nil }
        let at = try #require(reported.withLock { $0 })
        // Its `didDrop` waits behind the held callback on the delegate's queue; the output's count
        // does not. Two more late drops: the reported frame's, and the next one's after it.
        let lateBefore = data.droppedFrameCounts[.lateData] ?? 0
        try await eventually("two frames dropped late after the change") { (data.droppedFrameCounts[.lateData] ?? 0) >= lateBefore + 2 }
        log.hold.withLock { $0 = false }
        log.release.signal()
        try await eventually("a delivered frame of the new size") { log.frames.withLock { $0.contains { $0.pts > at } } }
        session.stopRunning()
        queue.sync {}
        let frames = log.frames.withLock { $0 }, dropped = log.dropped.withLock { $0 }
        // The old claim of VividReconfigurationTests fails: the first delivered frame is a later one.
        let firstDelivered = try #require(frames.first { $0.pts >= at })
        #expect(firstDelivered.pts > at && firstDelivered.width == 320)
        #expect(!frames.contains { $0.pts == at })
        // The claim it makes now holds: delivered or dropped, the first frame at or after it is at it.
        #expect((frames.map(\.pts) + dropped).filter { $0 >= at }.min() == at)
        #expect(frames.filter { $0.pts < at }.allSatisfy { $0.width == 640 } && frames.filter { $0.pts >= at }.allSatisfy { $0.width == 320 })
    }
}
