import CaptureKit
import Foundation
import Testing

/// The media module's pieces on their own, and the simulator's content contract without any codec.
@Suite struct MediaComponentTests {
    private func luma(_ buffer: PixelBuffer) -> LumaPlane {
        LumaPlane(base: UnsafeRawBufferPointer(start: buffer.baseAddress(ofPlane: 0), count: buffer.bytesPerRow[0] * buffer.height),
                  width: buffer.width, height: buffer.height, bytesPerRow: buffer.bytesPerRow[0])
    }

    @Test(arguments: [PixelFormat.nv12, .yuv420])
    func rendererStampsEveryFrameAndIsAPureFunction(format: PixelFormat) throws {
        let d = MediaTime(value: 1, timescale: 30)
        let a = try SyntheticFrameRenderer(pixelFormat: format, dimensions: Dimensions(width: 640, height: 480), frameDuration: d, seed: 5)
        let b = try SyntheticFrameRenderer(pixelFormat: format, dimensions: Dimensions(width: 640, height: 480), frameDuration: d, seed: 5)
        let x = PixelBuffer(format: format, width: 640, height: 480)
        let y = PixelBuffer(format: format, width: 640, height: 480)
        for n: Int64 in [0, 1, 29, 30, 31, 59, 60, 12_345] {
            a.render(frame: n, into: x)
            // Render other frames in between on the second renderer: frame n must not depend on history.
            b.render(frame: n + 7, into: y)
            b.render(frame: n, into: y)
            #expect(FrameStampReader.frameIndex(in: luma(x)) == UInt32(n))
            #expect(FrameStampReader.hasSyncFlash(in: luma(x)) == (n == 30 || n == 60))
            for plane in 0..<x.planeCount {
                let same = x.withPlane(plane) { p in y.withPlane(plane) { q in p.elementsEqual(q) } }
                #expect(same, "frame \(n) plane \(plane) differs between identical renderers")
            }
        }
    }

    @Test func syncFlashFollowsTheFirstFrameAtOrAfterEachSecond() {
        // At 24 fps frame 24 is exactly 1 s; at 7 fps (1/7 s) frame 7 is 1 s; at 1/25 s frame 25.
        #expect(SyntheticFrameRenderer.showsSyncFlash(frame: 24, frameDuration: MediaTime(value: 1, timescale: 24)))
        #expect(!SyntheticFrameRenderer.showsSyncFlash(frame: 23, frameDuration: MediaTime(value: 1, timescale: 24)))
        #expect(!SyntheticFrameRenderer.showsSyncFlash(frame: 0, frameDuration: MediaTime(value: 1, timescale: 24)))
        // 1001/30000 (29.97 fps): frame 30 is at 1.001 s, the first at or after 1 s; frame 29 is before.
        let ntsc = MediaTime(value: 1001, timescale: 30_000)
        #expect(SyntheticFrameRenderer.showsSyncFlash(frame: 30, frameDuration: ntsc))
        #expect(!SyntheticFrameRenderer.showsSyncFlash(frame: 29, frameDuration: ntsc))
    }

    @Test func toneBurstStartsExactlyOnTheSecond() {
        let tone = ToneGenerator(spec: SyncToneSpec(), sampleRate: 48_000)
        #expect(!tone.isBurst(sample: 47_999))
        #expect(tone.isBurst(sample: 48_000))
        #expect(tone.isBurst(sample: 48_000 + 2_399))
        #expect(!tone.isBurst(sample: 48_000 + 2_400))
        let samples = (0..<96_000).map { tone.sample(Int64($0)) }
        let peak = samples.map { abs($0) }.max() ?? 0
        #expect(abs(Double(peak) - pow(10, -12.0 / 20)) < 0.001)
        let onsets = ToneAnalysis.burstOnsets(samples: samples, sampleRate: 48_000, startTime: 0)
        #expect(onsets.count == 1)
        #expect(abs((onsets.first ?? 0) - 1.0) < 0.0005)
        #expect(abs((ToneAnalysis.dominantFrequency(samples: Array(samples[4_800..<48_000]), sampleRate: 48_000) ?? 0) - 1000) < 1)
    }

    /// `fill` reads the tone from a table of one turn; the microphone's PCM (and so every AAC file
    /// and golden) must stay `sample`'s very bits, bursts and odd rates included.
    @Test func toneFillIsSampleBitForBit() {
        var quieter = SyncToneSpec()
        quieter.toneFrequency = 440
        quieter.toneLevelDBFS = -6
        for (rate, spec) in [(48_000, SyncToneSpec()), (44_100, quieter), (8_000, SyncToneSpec())] {
            let tone = ToneGenerator(spec: spec, sampleRate: rate)
            // Runs that start in the tone, cross into a burst and out of it, an hour in, and over
            // several seconds (fill steps the phase through each run of one sine).
            for (first, count) in [(Int64(0), 3_000), (Int64(rate) - 700, 3_000), (3_600 * Int64(rate) + 11, 3_000), (Int64(17), 3 * rate + 5)] {
                var out = [Float](repeating: .nan, count: count * 2)
                out.withUnsafeMutableBufferPointer { tone.fill($0.baseAddress!, first: first, count: count, channels: 2) }
                var mismatches = 0
                for n in 0..<count {
                    let expected = tone.sample(first + Int64(n)).bitPattern
                    if out[2 * n].bitPattern != expected || out[2 * n + 1].bitPattern != expected { mismatches += 1 }
                }
                #expect(mismatches == 0, "\(rate) Hz from sample \(first): \(mismatches) of \(count) differ")
                #expect(out.contains { $0 != 0 }, "the tone is not silent")
            }
        }
    }

    @Test func swscaleConvertsYUYVToI420AndBack() throws {
        let size = Dimensions(width: 320, height: 240)
        let renderer = try SyntheticFrameRenderer(pixelFormat: .yuyv, dimensions: size, frameDuration: MediaTime(value: 1, timescale: 30), seed: 1)
        let yuyv = PixelBuffer(format: .yuyv, width: 320, height: 240)
        renderer.render(frame: 77, into: yuyv)
        let i420 = PixelBuffer(format: .yuv420, width: 320, height: 240)
        try PixelConverter(from: .yuyv, size, to: .yuv420, size).convert(yuyv, into: i420)
        #expect(FrameStampReader.frameIndex(in: luma(i420)) == 77)
        // Luma passes through a YUYV → I420 conversion unchanged.
        let base = yuyv.baseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        let y = i420.baseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        var differences = 0
        for row in stride(from: 0, to: 240, by: 7) {
            for col in stride(from: 0, to: 320, by: 5) where base[row * yuyv.bytesPerRow[0] + col * 2] != y[row * i420.bytesPerRow[0] + col] {
                differences += 1
            }
        }
        #expect(differences == 0)
        #expect(throws: CaptureError.self) {
            try PixelConverter(from: .yuyv, size, to: .yuv420, size).convert(i420, into: yuyv)
        }
    }

    @Test func swresampleKeepsTheToneAcrossRatesAndFormats() throws {
        let input = AudioStreamFormat(sampleRate: 48_000, channelCount: 2, sampleFormat: .int16)
        let resampler = try AudioResampler(input: input, outputSampleRate: 44_100, outputChannels: 1)
        let tone = ToneGenerator(spec: SyncToneSpec(), sampleRate: 48_000)
        var output: [Float] = []
        for chunk in 0..<40 {
            let buffer = AudioPCMBuffer(format: input, frameCapacity: 1_000)
            try buffer.withMutableBytes { raw in
                let p = raw.bindMemory(to: Int16.self)
                for n in 0..<1_000 {
                    let v = Int16(tone.sample(Int64(chunk * 1_000 + n)) * 32767)
                    p[2 * n] = v
                    p[2 * n + 1] = v
                }
            }
            output += try resampler.convert(buffer)[0]
        }
        output += try resampler.flush()[0]
        #expect(abs(output.count - 36_750) <= 64, "40 000 samples at 48 kHz → about 36 750 at 44.1 kHz, got \(output.count)")
        let frequency = try #require(ToneAnalysis.dominantFrequency(samples: Array(output[1_000..<36_000]), sampleRate: 44_100))
        #expect(abs(frequency - 1000) < 1)
    }

    @Test func jpegRoundTripsThroughTurboJPEGAndFFmpeg() throws {
        let renderer = try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: Dimensions(width: 640, height: 480),
                                                  frameDuration: MediaTime(value: 1, timescale: 30), seed: 2)
        let frame = PixelBuffer(format: .nv12, width: 640, height: 480)
        renderer.render(frame: 4_242, into: frame)
        let codec = try JPEGCodec()
        let high = try codec.encode(frame, quality: 0.9)
        let low = try codec.encode(frame, quality: 0.2)
        #expect(high.prefix(2) == [0xFF, 0xD8])
        #expect(low.count < high.count)
        let decoded = try codec.decode(high)
        #expect(decoded.format == .yuv420 && decoded.width == 640 && decoded.height == 480)
        #expect(FrameStampReader.frameIndex(in: luma(decoded)) == 4_242)
        #expect(throws: CaptureError.self) { try codec.encode(frame, quality: 1.5) }
        #expect(throws: CaptureError.self) { try codec.decode([0x00, 0x01, 0x02]) }

        let path = try TestSupport.temporaryDirectory() + "/still.jpg"
        try Data(high).write(to: URL(fileURLWithPath: path))
        let check = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(check.status == 0 && check.stderr.isEmpty, "\(check.stderr)")
        let probe = try TestSupport.probeStreams(path)
        #expect(probe.first?["codec_name"] as? String == "mjpeg" && probe.first?["width"] as? Int == 640)
    }
}
