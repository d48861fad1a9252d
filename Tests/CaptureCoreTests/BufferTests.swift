import Testing
@testable import CaptureCore

@Suite struct BufferTests {
    @Test func fourccsMatchV4L2() {
        // Values of V4L2_PIX_FMT_* from videodev2.h.
        #expect(PixelFormat.yuyv.rawValue == 0x5659_5559)
        #expect(PixelFormat.nv12.rawValue == 0x3231_564E)
        #expect(PixelFormat.yuv420.rawValue == 0x3231_5559)
        #expect(PixelFormat.mjpeg.rawValue == 0x4750_4A4D)
        #expect(PixelFormat.rgb24.rawValue == 0x3342_4752)
        #expect(PixelFormat(name: "i420") == .yuv420)
        #expect(PixelFormat.nv12.fourcc == "NV12")
    }

    @Test func planesHaveAlignedStrides() {
        let buffer = PixelBuffer(format: .nv12, width: 642, height: 480)
        #expect(buffer.planeCount == 2)
        #expect(buffer.bytesPerRow[0] >= 642 && buffer.bytesPerRow[0] % 64 == 0)
        #expect(buffer.planeRows == [480, 240])
        let i420 = PixelBuffer(format: .yuv420, width: 640, height: 480)
        #expect(i420.planeCount == 3 && i420.planeRows == [480, 240, 240])
        #expect(PixelBuffer(format: .yuyv, width: 640, height: 480).bytesPerRow == [1280])
    }

    @Test func poolRecyclesBuffersWithoutAllocating() {
        let pool = PixelBufferPool(format: .nv12, width: 320, height: 240)
        for _ in 0..<100 {
            let a = pool.makeBuffer()
            let b = pool.makeBuffer()
            #expect(a != nil && b != nil)
        }
        #expect(pool.allocationCount == 2)
        #expect(pool.outstandingCount == 0)
    }

    @Test func boundedPoolReportsExhaustion() {
        let pool = PixelBufferPool(format: .yuv420, width: 64, height: 64, maximumBufferCount: 2)
        let held = [pool.makeBuffer(), pool.makeBuffer()]
        #expect(held.allSatisfy { $0 != nil })
        #expect(pool.makeBuffer() == nil)
        _ = held
    }

    @Test func audioBufferConvertsInt16ToFloat() throws {
        let buffer = AudioPCMBuffer(format: AudioStreamFormat(sampleRate: 8000, channelCount: 1, sampleFormat: .int16), frameCapacity: 2)
        try buffer.withMutableBytes { raw in
            let p = raw.bindMemory(to: Int16.self)
            p[0] = 16384
            p[1] = -32768
        }
        #expect(buffer.floatSamples() == [0.5, -1])
    }

    /// The level meter reads every fourth sample (sixteen at a time as vectors, the rest one by one):
    /// the largest |sample| among those, NaN passed over, whatever the length.
    @Test func peakMagnitudeIsTheLargestOfEveryFourthSample() throws {
        var state: UInt32 = 5
        for (channels, frames) in [(1, 1024), (2, 1023), (1, 37), (1, 3), (3, 50), (1, 0)] {
            let buffer = AudioPCMBuffer(format: AudioStreamFormat(sampleRate: 48000, channelCount: channels, sampleFormat: .float32),
                                        frameCapacity: max(frames, 1))
            try buffer.setFrameLength(frames)
            var samples: [Float] = []
            try buffer.withMutableBytes { raw in
                let p = raw.bindMemory(to: Float.self)
                for i in 0..<(frames * channels) {
                    state = state &* 1_664_525 &+ 1_013_904_223
                    p[i] = Float(Int32(bitPattern: state)) / Float(Int32.max) * 0.8
                    if i % 97 == 8 { p[i] = .nan }
                    if i % 200 == 4 { p[i] = -0.95 }  // a loud negative sample the meter reads
                    samples.append(p[i])
                }
            }
            let expected = stride(from: 0, to: samples.count, by: 4).reduce(Float(0)) { max($0, abs(samples[$1])) }
            #expect(buffer.peakMagnitude == expected, "\(channels) × \(frames): \(buffer.peakMagnitude) vs \(expected)")
            if frames * channels > 4 { #expect(buffer.peakMagnitude == 0.95 || frames * channels <= 4) }
        }
    }
}

/// Mutable, then published: once a SampleBuffer holds a buffer its bytes are read-only, and every
/// write call says so with a typed error instead of changing what other threads are reading.
@Suite struct PublishedBufferTests {
    @Test func aPublishedPixelBufferRefusesWritesAndKeepsItsPixels() throws {
        let buffer = PixelBuffer(format: .yuv420, width: 16, height: 16)
        _ = try buffer.withMutablePlane(0) { $0.initializeMemory(as: UInt8.self, repeating: 77) }
        #expect(!buffer.isPublished)
        let sample = SampleBuffer(payload: .pixels(buffer), formatDescription: .video(pixelFormat: .yuv420, dimensions: Dimensions(width: 16, height: 16)),
                                  presentationTime: .zero, duration: MediaTime(value: 1, timescale: 30), sequenceNumber: 0)
        #expect(sample.pixelBuffer?.isPublished == true)
        #expect(throws: CaptureError.self) { try buffer.withMutablePlane(0) { $0[0] = 1 } }
        #expect(throws: CaptureError.self) { _ = try buffer.mutableBaseAddress(ofPlane: 1) }
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: 4, alignment: 1)
        defer { bytes.deallocate() }
        #expect(throws: CaptureError.self) { try buffer.setCompressedData(UnsafeRawBufferPointer(bytes)) }
        do {
            try buffer.withMutablePlane(0) { $0[0] = 1 }
        } catch {
            guard case .invalidState(let message) = error else { Issue.record("expected invalidState, got \(error)"); return }
            #expect(message.contains("read-only"))
        }
        #expect(buffer.withPlane(0) { $0[0] } == 77)
    }

    @Test func aPublishedAudioBufferRefusesWrites() throws {
        let buffer = AudioPCMBuffer(format: AudioStreamFormat(sampleRate: 48000, channelCount: 1, sampleFormat: .int16), frameCapacity: 4)
        _ = try buffer.withMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 9) }
        try buffer.setFrameLength(2)
        _ = SampleBuffer(payload: .audio(buffer), formatDescription: .audio(buffer.format), presentationTime: .zero,
                         duration: MediaTime(value: 2, timescale: 48000), sequenceNumber: 0)
        #expect(buffer.isPublished)
        #expect(throws: CaptureError.self) { try buffer.withMutableBytes { $0[0] = 0 } }
        #expect(throws: CaptureError.self) { try buffer.setFrameLength(4) }
        #expect(buffer.frameLength == 2)
        #expect(buffer.withBytes { $0[0] } == 9)
    }
}
