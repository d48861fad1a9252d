/// Compresses a rendered raw frame, so a backend without codecs of its own (the simulator) can
/// deliver compressed formats such as MJPEG. CaptureMedia provides the libturbojpeg one.
public protocol FrameCompressor: Sendable {
    /// Compresses `frame` (I420, NV12 or YUYV) into `output`, a buffer of `output.format`
    /// (`.mjpeg`) and the same size, through `PixelBuffer.setCompressedData`.
    func compress(_ frame: PixelBuffer, into output: PixelBuffer) throws(CaptureError)
}
