import CaptureCore

extension MovieWriter {
    /// Writes what `placement` (from `timeline.placeAudio`) takes of `buffer` — the silence first,
    /// then the buffer's kept frames — and counts each part in `timeline` once it is written.
    public func appendAudio(_ buffer: AudioPCMBuffer, as placement: RecordingTimeline.AudioPlacement,
                            counting timeline: inout RecordingTimeline) throws(CaptureError) {
        if placement.silence > 0 {
            try appendAudio(AudioPCMBuffer(format: buffer.format, frameCapacity: placement.silence))
            timeline.didWriteAudio(placement.silence)
        }
        guard !placement.frames.isEmpty else { return }
        let whole = placement.frames == 0..<buffer.frameLength
        try appendAudio(whole ? buffer : buffer.copy(frames: placement.frames))
        timeline.didWriteAudio(placement.frames.count)
    }
}

extension AudioPCMBuffer {
    /// A new buffer holding a copy of frames `range` of this one.
    public func copy(frames range: Range<Int>) -> AudioPCMBuffer {
        let out = AudioPCMBuffer(format: format, frameCapacity: range.count)
        let bpf = format.bytesPerFrame
        withBytes { src in
            out.withProducerBytes { dst in
                dst.baseAddress!.copyMemory(from: src.baseAddress! + range.lowerBound * bpf, byteCount: range.count * bpf)
            }
        }
        return out
    }
}
