import CaptureKit
import Foundation
import Synchronization
import Testing

/// Many threads calling the session's API at random at once — start, stop, add and remove inputs
/// and outputs, configuration blocks, presets, recordings — must neither crash nor deadlock. A
/// watchdog fails the test if the calls do not all return within a minute; every failure is a
/// `CaptureError` by the API's types (`throws(CaptureError)`). ci/test runs this suite under
/// ThreadSanitizer too.
@Suite struct RandomAPIStressTests {
    @Test func randomCallsFromFourThreadsNeitherCrashNorHang() throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        let camera = try CaptureDeviceInput(device: registry.device(uniqueID: "sim:back"))
        let microphone = try CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic"))
        let movie = MovieFileOutput()
        movie.movieFragmentInterval = .invalid
        let video = VideoDataOutput(), audio = AudioDataOutput(), photo = PhotoOutput()
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let operations = 300, threads = 4
        let done = Atomic<Int>(0)
        let failures = Locked<[String: Int]>([:])
        let finished = DispatchGroup()
        for t in 0..<threads {
            finished.enter()
            Thread {
                var random = SplitMix(seed: UInt64(100 + t))
                for n in 0..<operations {
                    do throws(CaptureError) {
                        switch random.next() % 12 {
                        case 0: try session.startRunning()
                        case 1: session.stopRunning()
                        case 2: try session.addInput(camera)
                        case 3: session.removeInput(camera)
                        case 4: try session.addInput(microphone)
                        case 5: session.removeInput(microphone)
                        case 6: try session.addOutput([movie, video, audio, photo][Int(random.next() % 4)] as any CaptureOutput)
                        case 7: session.removeOutput([movie, video, audio, photo][Int(random.next() % 4)] as any CaptureOutput)
                        case 8: session.beginConfiguration(); session.commitConfiguration()
                        case 9: try session.setSessionPreset([.high, .vga640x480, .low, .inputPriority][Int(random.next() % 4)])
                        case 10: movie.startRecording(to: "\(dir)/t\(t)-\(n).mp4", recordingDelegate: Ignore.shared)
                        default: movie.stopRecording()
                        }
                    } catch {
                        let key = String(describing: error).prefix(40)
                        failures.withLock { $0[String(key), default: 0] += 1 }
                    }
                    done.wrappingAdd(1, ordering: .relaxed)
                }
                finished.leave()
            }.start()
        }
        // The watchdog: a deadlock leaves calls that never return.
        let result = finished.wait(timeout: .now() + 60)
        #expect(result == .success, "only \(done.load(ordering: .relaxed)) of \(threads * operations) calls returned within 60 s: a deadlock")
        session.stopRunning()
        // And the session still works afterwards.
        if result == .success {
            for output in session.outputs { session.removeOutput(output) }
            try session.addOutput(video)
            if !session.inputs.contains(where: { $0 === camera }) { try session.addInput(camera) }
            try session.startRunning()
            session.stopRunning()
        }
        print("random API stress: \(done.load(ordering: .relaxed)) calls; typed errors by kind: \(failures.withLock { $0 })")
    }

    final class Ignore: CaptureFileOutputRecordingDelegate, Sendable {
        static let shared = Ignore()
        func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                        summary: RecordingSummary, error: CaptureError?) {}
    }
}
