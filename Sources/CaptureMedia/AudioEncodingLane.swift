import CFFmpeg
import CaptureCore
import Dispatch
import Foundation

/// Runs a movie's audio encoder behind its writer, on a queue of its own, so AAC (FFmpeg's encoder
/// with BITEXACT keeps to its C paths: a large share of a small recording's time on the writing
/// thread) overlaps x264's encode of the next frame instead of delaying it.
///
/// The muxer still sees packets in the order encoding in place gave: `MovieWriter` writes the
/// pending buffers' packets at its next call that writes anything else, before what that call
/// writes, so files keep their bytes. Buffers are encoded strictly in the order given: each is
/// claimed and encoded under one lock, the earliest first. `take()` encodes here whatever the
/// queue has not begun (its worker may be waiting for a core while x264's threads hold both), so
/// taking never costs more than encoding in place.
///
/// `@unchecked Sendable`: the encoder is used only under `encoding` (or by the writer after `take()`,
/// which leaves nothing pending); the list of buffers only under `works`' lock.
final class AudioEncodingLane: @unchecked Sendable {  // unchecked: the encoder (shared with MovieWriter) only under `encoding`
    private let encoder: AudioEncoder
    private let queue = DispatchQueue(label: "CaptureMedia.audioEncoding")
    /// Held while a buffer is claimed and encoded: the claim order is the encoding order.
    /// (pthread mutexes, here and in `Locked`, are what ThreadSanitizer understands.)
    private let encoding = NSLock()
    /// Buffers given and not yet taken, oldest first, and how many of them have been claimed.
    private let works = Locked<(all: [Work], claimed: Int)>(([], 0))

    /// One buffer's encode and what came of it.
    private final class Work: Sendable {
        let buffer: AudioPCMBuffer
        /// Set once by `run` (under `encoding`), taken by `take()` after that.
        private let result = Locked<(packets: [PacketOwner], failure: CaptureError?)>(([], nil))

        init(buffer: AudioPCMBuffer) { self.buffer = buffer }

        func run(_ encoder: AudioEncoder) {
            var packets: [PacketOwner] = []
            var failure: CaptureError?
            do {
                try encoder.encode(buffer) { (packet) throws(CaptureError) in
                    let kept = try PacketOwner()
                    av_packet_move_ref(kept.packet, packet)
                    packets.append(kept)
                }
            } catch {
                failure = error
            }
            result.withLock { $0 = (packets, failure) }
        }

        /// What `run` made (and nothing after that).
        func takeResult() -> (packets: [PacketOwner], failure: CaptureError?) {
            result.withLock { r in
                let out = r
                r = ([], nil)
                return out
            }
        }
    }

    init(encoder: AudioEncoder) { self.encoder = encoder }

    /// Buffers given and not yet taken.
    var pendingCount: Int { works.withLock { $0.all.count } }

    /// Queues `buffer` for encoding after the ones before it.
    func encode(_ buffer: AudioPCMBuffer) {
        works.withLock { $0.all.append(Work(buffer: buffer)) }
        queue.async { [self] in _ = encodeEarliestUnclaimed() }
    }

    /// Encodes the earliest buffer nobody has claimed; false if there is none. Under `encoding`, so
    /// when it returns false every claimed buffer is encoded.
    private func encodeEarliestUnclaimed() -> Bool {
        encoding.withLock {
            let work: Work? = works.withLock { w in
                guard w.claimed < w.all.count else { return nil }
                defer { w.claimed += 1 }
                return w.all[w.claimed]
            }
            work?.run(encoder)
            return work != nil
        }
    }

    /// The packets of every buffer given since the last take, in order, up to the first buffer whose
    /// encoding failed (its packets so far included) and that failure — as encoding in place would
    /// have written them before throwing. Empty when nothing was pending. The encoder is idle on return.
    func take() -> (packets: [PacketOwner], failure: CaptureError?) {
        while encodeEarliestUnclaimed() {}
        let taken = works.withLock { w in defer { w = ([], 0) }; return w.all }
        var packets: [PacketOwner] = []
        for work in taken {
            let result = work.takeResult()
            packets += result.packets
            if let failure = result.failure { return (packets, failure) }
        }
        return (packets, nil)
    }
}
