import CFFmpeg
import CaptureCore

/// Fragments: a moof+mdat cut before the first keyframe past each point of the fragment grid, made
/// whole on the device before it counts as kept.
extension MovieWriter {
    /// Cuts a fragment before the first video keyframe (audio packet, in a file without video) at
    /// or past the next point of the fragment grid (the same grid `keyframeDue` forces keyframes on).
    func cutFragmentIfDue(before seconds: Double, isKeyframe: Bool) throws(CaptureError) {
        guard let interval = fragmentInterval, lastFragmentStart != nil, isKeyframe else { return }
        let due = nextCut ?? interval
        guard seconds >= due - 1e-6 else { return }
        try cutFragment(at: seconds)
        nextCut = Self.gridPoint(after: seconds, interval: interval)
    }

    func cutFragment(at seconds: Double) throws(CaptureError) {
        guard let fc = formatContext else { return }
        if let writeFailure { throw writeFailure }
        // Drain the interleaving queue, then a NULL packet makes the muxer write the fragment it holds (frag_custom).
        try checkWrite(av_interleaved_write_frame(fc, nil), "flushing interleaved packets")
        let moovPending = fragmentsWritten == 0 && fileType != .mkv
        try checkWrite(av_write_frame(fc, nil), "writing a fragment to \(path)")
        // With delay_moov the first flush writes only the moov; flush again for the samples.
        if moovPending { try checkWrite(av_write_frame(fc, nil), "writing the first fragment to \(path)") }
        avio_flush(fc.pointee.pb)
        // The OS has taken every byte up to here (a failed write sets pb->error), and the device
        // has them (syncToDevice): this fragment is whole.
        try checkWrite(0, "flushing a fragment to \(path)")
        try syncToDevice()
        fragmentsWritten += 1
        lastFragmentStart = seconds
        completePart = CompletePart(bytes: avio_tell(fc.pointee.pb), seconds: audioStream != nil && videoStream == nil ? audioEnd : videoEnd,
                                    videoFrames: videoPackets, fragments: fragmentsWritten)
    }
}
