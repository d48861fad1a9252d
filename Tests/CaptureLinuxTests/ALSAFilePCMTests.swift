import CaptureCore
import Foundation
import Testing
@testable import CaptureALSA

/// The real ALSA backend on a machine with no sound hardware: a private configuration defines a
/// `file` PCM whose raw `infile` supplies known samples, and the stream must deliver exactly them.
@Suite struct ALSAFilePCMTests {
    @Test func readsExactlyTheInfileSamples() throws {
        let dir = NSTemporaryDirectory() + "capturekit-alsa-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 1 s of a known ramp-and-sign pattern, mono S16 at 48 kHz, then 1 s of padding (past the end
        // of an infile ALSA repeats stale data, so the test reads less than the file holds).
        let wanted = 48_000
        let samples: [Int16] = (0..<(2 * wanted)).map { i in Int16(truncatingIfNeeded: i &* 7919 % 65_536 - 32_768) }
        let infile = dir + "/in.raw"
        try samples.withUnsafeBytes { Data($0) }.write(to: URL(fileURLWithPath: infile))
        let config = """
            pcm.cktest {
                type file
                slave { pcm { type null } }
                file "/dev/null"
                infile "\(infile)"
                format "raw"
            }
            """
        let driver = ALSADriver(configuration: config)
        try driver.validateConfiguration()
        let description = try #require(try driver.discoverDevices().first { $0.uniqueID == "cktest" })
        let s16mono = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .int16)
        let format = try #require(description.formats.first { $0.audioFormat == s16mono })
        let device = try driver.openDevice(uniqueID: "cktest")
        let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: .invalid, pace: .virtual))
        try stream.start(at: .zero)
        var got: [Int16] = []
        var expectedPTS = MediaTime.zero
        while got.count < wanted {
            let sample = try #require(try stream.nextSample())
            let buffer = try #require(sample.audioBuffer)
            #expect(sample.presentationTime == expectedPTS)
            #expect(buffer.frameLength <= 960)   // ≤ 20 ms per buffer
            expectedPTS = expectedPTS + sample.duration
            buffer.withBytes { raw in got += raw.bindMemory(to: Int16.self) }
        }
        stream.stop()
        #expect(try stream.nextSample() == nil)
        #expect(Array(got.prefix(wanted)) == Array(samples.prefix(wanted)))
    }

    @Test func unknownPCMsAndBadConfigurationsAreTypedErrors() throws {
        let driver = ALSADriver()
        #expect(throws: CaptureError.deviceNotFound("hw:NoSuchCard,0,0")) { try driver.openDevice(uniqueID: "hw:NoSuchCard,0,0") }
        #expect(throws: CaptureError.self) { try ALSADriver(configuration: "pcm.broken { type").validateConfiguration() }
    }
}
