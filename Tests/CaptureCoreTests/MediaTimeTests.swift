import Testing
@testable import CaptureCore

@Suite struct MediaTimeTests {
    @Test func arithmeticIsExactAcrossTimescales() {
        let a = MediaTime(value: 1, timescale: 30)
        let b = MediaTime(value: 1024, timescale: 48_000)
        let sum = a + b
        #expect(sum == MediaTime(value: 1600 + 1024, timescale: 48_000))
        #expect(sum.timescale == 48_000)
        #expect(a * 30 == MediaTime(value: 1, timescale: 1))
        #expect((MediaTime(value: 3, timescale: 1) - a).seconds == 3 - 1.0 / 30)
    }

    @Test func comparisonUsesExactCrossMultiplication() {
        #expect(MediaTime(value: 1, timescale: 3) < MediaTime(value: 333_334, timescale: 1_000_000))
        #expect(MediaTime(value: 1, timescale: 3) > MediaTime(value: 333_333, timescale: 1_000_000))
        #expect(MediaTime(value: 2, timescale: 60) == MediaTime(value: 1, timescale: 30))
        #expect(Set([MediaTime(value: 2, timescale: 60), MediaTime(value: 1, timescale: 30)]).count == 1)
        // Values near Int64's limits still compare correctly.
        #expect(MediaTime(value: .max, timescale: 1_000_000_000) > MediaTime(value: .max - 1, timescale: 1_000_000_000))
    }

    @Test func specialValuesOrderAndPropagate() {
        #expect(MediaTime.negativeInfinity < .zero)
        #expect(MediaTime.zero < .positiveInfinity)
        #expect(!MediaTime.invalid.isValid)
        #expect((MediaTime.invalid + .zero).kind == .invalid)
        #expect((MediaTime.positiveInfinity + MediaTime(value: 5, timescale: 1)) == .positiveInfinity)
        #expect((MediaTime.positiveInfinity - .positiveInfinity).kind == .invalid)
        #expect((MediaTime.indefinite + .zero).isIndefinite)
        #expect(MediaTime.invalid.seconds.isNaN)
    }

    @Test func rescaleRoundsToNearest() {
        #expect(MediaTime(value: 1, timescale: 3).convertScale(1000).value == 333)
        #expect(MediaTime(value: 2, timescale: 3).convertScale(1000).value == 667)
        #expect(MediaTime(value: -2, timescale: 3).convertScale(1000).value == -667)
        #expect(MediaTime(seconds: 0.5, preferredTimescale: 600) == MediaTime(value: 300, timescale: 600))
        #expect(MediaTime(seconds: .nan, preferredTimescale: 600).kind == .invalid)
    }
}
