import CaptureAnalysis
import CaptureCore
import Testing

@Suite struct FrameStampReaderTests {
    static let sizes: [(Int, Int)] = [(640, 480), (1280, 720), (1920, 1080), (352, 288)]
    static let indices: [UInt32] = [0, 1, 89, 12345, 0xFFFF_FFFF]

    @Test(arguments: sizes)
    func stampRoundTripsThroughNoiseAndBlur(size: (Int, Int)) {
        for (n, index) in Self.indices.enumerated() {
            let frame = SyntheticFrame(width: size.0, height: size.1, index: index, seed: UInt64(n + 1))
            let read = frame.withPlane { FrameStampReader.frameIndex(in: $0) }
            #expect(read == index, "\(size.0)x\(size.1) index \(index)")
        }
    }

    @Test func paddedRowsAreHonoured() {
        let frame = SyntheticFrame(width: 352, height: 288, index: 0xA5A5_1234, padding: 64)
        #expect(frame.withPlane { FrameStampReader.frameIndex(in: $0) } == 0xA5A5_1234)
    }

    @Test func frameWithoutStampIsRejected() {
        // The bars continue into the band: mid-grey cells are ambiguous, not zeros or ones.
        let frame = SyntheticFrame(width: 640, height: 480, index: nil)
        #expect(frame.withPlane { FrameStampReader.frameIndex(in: $0) } == nil)
    }

    @Test func singleAmbiguousCellRejectsTheStamp() {
        var frame = SyntheticFrame(width: 640, height: 480, index: 12345, damage: false)
        let layout = FrameMarkerLayout(width: 640, height: 480)
        frame.paint(columns: layout.stampCellColumns(7), rows: 0 ..< layout.stampBandHeight, luma: 130)
        #expect(frame.withPlane { FrameStampReader.frameIndex(in: $0) } == nil)
    }

    @Test func tooSmallFrameHasNoStamp() {
        let frame = SyntheticFrame(width: 16, height: 16, index: 3, damage: false)
        #expect(frame.withPlane { FrameStampReader.frameIndex(in: $0) } == nil)
    }

    @Test(arguments: sizes)
    func syncFlashIsDetectedOnlyWhenLit(size: (Int, Int)) {
        let lit = SyntheticFrame(width: size.0, height: size.1, index: 30, flash: true, seed: 3)
        let dark = SyntheticFrame(width: size.0, height: size.1, index: 31, flash: false, seed: 4)
        #expect(lit.withPlane { FrameStampReader.hasSyncFlash(in: $0) })
        #expect(!dark.withPlane { FrameStampReader.hasSyncFlash(in: $0) })
    }

    @Test func meanLumaSamplesTheRequestedRectangle() {
        var frame = SyntheticFrame(width: 64, height: 32, index: nil, damage: false)
        frame.paint(columns: 0 ..< 64, rows: 0 ..< 32, luma: 10)
        frame.paint(columns: 32 ..< 64, rows: 0 ..< 32, luma: 200)
        frame.withPlane { plane in
            #expect(plane.meanLuma(columns: 0 ..< 32, rows: 0 ..< 32) == 10)
            #expect(plane.meanLuma(columns: 32 ..< 64, rows: 0 ..< 32) == 200)
            #expect(plane.meanLuma(columns: 0 ..< 64, rows: 0 ..< 1, maxSamplesPerAxis: 64) == 105)
            #expect(plane.meanLuma(columns: 60 ..< 70, rows: 0 ..< 1) == nil)
            #expect(plane[x: 40, y: 3] == 200)
        }
    }
}
