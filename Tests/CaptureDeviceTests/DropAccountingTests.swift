import CaptureKit
import Testing

/// The accounting behind `VividTests.recordsThreeSecondsOfVividWithAToneFromTheLoopback` ("frames +
/// dropped < 74" in a clean-clone CI run), with made-up drops, so it runs on every host. A drop is
/// reported with the PTS of the frame after the gap. A recording limited to 3 s ends at the first
/// frame at or past its end, which the file does not hold: the frames lost just before that frame
/// are reported after the file's last frame, yet were due inside the 3 s. Counting only the drops
/// reported up to the file's end (as the test did) left them out of "in the file or reported".
@Suite struct DropAccountingTests {
    /// A 25 fps recording from 10.000 s whose file holds 71 frames and ends with the one at 12.840 s
    /// (duration 2.88 s): the three frames due at 12.880, 12.920 and 12.960 were lost, reported with
    /// the frame at 13.000 s that ended the recording; one frame was lost at 11.000 s, reported at
    /// 11.040 s; 2 before the start (the session's warm-up), 4 after the end.
    static let (start, fileFrames, fileDuration) = (10.0, 71, 2.88)
    static let drops: [(time: Double, count: Int)] = [(9.96, 2), (11.04, 1), (13.0, 3), (13.2, 4)]

    @Test func framesLostJustBeforeTheFrameThatEndedTheRecordingCountAsItsOwn() {
        let dropped = DeviceEnvironment.dropped(Self.drops, from: Self.start, limit: 3, period: 0.04)
        // 71 in the file + 1 + 3 lost inside the span = the 75 frames of 3 s at 25 fps. The drops
        // reported before the start (the session's warm-up) and after the end frame are not its own.
        #expect(dropped == 4)
        #expect(Self.fileFrames + dropped == 75)
        // What the old accounting counted (reported from the start to the file's end): 71 + 1 = 72 < 74.
        let old = Self.drops.filter { $0.time > Self.start && $0.time <= Self.start + Self.fileDuration + 0.001 }.reduce(0) { $0 + $1.count }
        #expect(old == 1)
    }
}
