import CaptureKit
import Foundation
import Testing

/// Counts finish callbacks so a test can assert "exactly once".
private final class CountingDelegate: CaptureFileOutputRecordingDelegate {
    let finishes = Locked<[CaptureError?]>([])
    let starts = Locked(0)

    func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection]) {
        starts.withLock { $0 += 1 }
    }

    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        finishes.withLock { $0.append(error) }
    }

    /// Waits for the first finish, then gives a second one every chance to arrive: the session
    /// stops (outputs finish whatever is left) and the output's delegate queue is flushed.
    func settledFinishes(_ output: MovieFileOutput, _ session: CaptureSession) async -> [CaptureError?] {
        await waitFor(timeout: .seconds(60)) { !finishes.withLock { $0.isEmpty } }
        session.stopRunning()
        await output.flushDelegateQueue()
        return finishes.withLock { $0 }
    }
}

@Suite struct RecordingErrorTests {
    private func runningSession(withInputs: Bool) throws -> (CaptureSession, MovieFileOutput) {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        if withInputs {
            try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
            try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        }
        let output = MovieFileOutput()
        output.maxRecordedDuration = MediaTime(value: 1, timescale: 2)
        try session.addOutput(output)
        try session.startRunning()
        return (session, output)
    }

    @Test func missingFolderIsNamedAndFinishFiresOnce() async throws {
        let (session, output) = try runningSession(withInputs: true)
        defer { session.stopRunning() }
        let delegate = CountingDelegate()
        let path = "/nonexistent-\(UUID().uuidString)/x.mp4"
        output.startRecording(to: path, recordingDelegate: delegate)
        let finishes = await delegate.settledFinishes(output, session)
        #expect(finishes.count == 1)
        #expect(finishes.first == .outputDirectoryMissing(path: path))
        #expect(String(describing: finishes.first!!).contains("folder does not exist"))
        #expect(delegate.starts.withLock { $0 } == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func existingFileIsRefusedAndKept() async throws {
        let (session, output) = try runningSession(withInputs: true)
        defer { session.stopRunning() }
        let path = try TestSupport.temporaryDirectory() + "/exists.mp4"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: path))
        let delegate = CountingDelegate()
        output.startRecording(to: path, recordingDelegate: delegate)
        let finishes = await delegate.settledFinishes(output, session)
        #expect(finishes.count == 1)
        #expect(finishes.first == .outputFileExists(path: path))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
    }

    @Test func noInputsIsAnError() async throws {
        let (session, output) = try runningSession(withInputs: false)
        defer { session.stopRunning() }
        let delegate = CountingDelegate()
        let path = try TestSupport.temporaryDirectory() + "/none.mp4"
        output.startRecording(to: path, recordingDelegate: delegate)
        let finishes = await delegate.settledFinishes(output, session)
        #expect(finishes.count == 1)
        #expect(finishes.first == .noInputs)
        #expect(!FileManager.default.fileExists(atPath: path))
        await #expect(throws: CaptureError.noInputs) { try await output.record(to: path) }
    }

    @Test func successfulRecordingStartsAndFinishesOnceAtItsLimit() async throws {
        let (session, output) = try runningSession(withInputs: true)
        defer { session.stopRunning() }
        let delegate = CountingDelegate()
        let path = try TestSupport.temporaryDirectory() + "/ok.mp4"
        output.startRecording(to: path, recordingDelegate: delegate)
        let finishes = await delegate.settledFinishes(output, session)
        #expect(finishes.count == 1)
        #expect(finishes.first == .recordingLimitReached(.maximumDuration))
        #expect(finishes.first??.recordingFinishedSuccessfully == true)
        #expect(delegate.starts.withLock { $0 } == 1)
        #expect(try TestSupport.probeStreams(path).count == 2)
    }

    @Test func startingTwiceFailsTheSecondRequestOnly() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let output = MovieFileOutput()
        try session.addOutput(output)
        try session.startRunning()
        let dir = try TestSupport.temporaryDirectory()
        let first = CountingDelegate(), second = CountingDelegate()
        output.startRecording(to: dir + "/1.mp4", recordingDelegate: first)
        output.startRecording(to: dir + "/2.mp4", recordingDelegate: second)
        await waitFor(timeout: .seconds(30)) { second.finishes.withLock { !$0.isEmpty } }
        #expect(second.finishes.withLock { $0 } == [.alreadyRecording])
        // Frames reach the first file (its progress is published after each one).
        #expect(await waitFor(timeout: .seconds(30)) { output.recordedDuration > .zero })
        // Stopping the session finalizes the first file.
        session.stopRunning()
        let firstFinishes = await first.settledFinishes(output, session)
        #expect(second.finishes.withLock { $0 } == [.alreadyRecording], "the second request finished once")
        #expect(firstFinishes.count == 1)
        #expect(firstFinishes.first == .some(nil))
        let streams = try TestSupport.probeStreams(dir + "/1.mp4")
        #expect(streams.count == 1)
        #expect(Int(streams.first?["nb_read_frames"] as? String ?? "0") ?? 0 > 0)
    }
}
