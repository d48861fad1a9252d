import CaptureCore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
import Logging
#endif

/// Capture from one PCM: interleaved reads of one period (≤ 10 ms) at a time.
///
/// Real time: hardware timestamps (tstamp mode ENABLE, type MONOTONIC); the first sample of each
/// read was captured at `tstamp − (delay + frames) / rate`. PTS follow the sample count from the
/// first read and are re-anchored to the measured time when they drift apart by more than one
/// period; an overrun (EPIPE) is recovered with `snd_pcm_recover`, its gap is delivered as silence so
/// audio stays continuous and in sync with video, and that silence carries the loss as its
/// `discontinuity` (outputs hear `didDrop`). Virtual pace: PTS follow the sample count; the sample
/// after an xrun carries the loss.
///
/// Every libasound call goes through `ALSASystem` (the real library, or a fake in host tests).
///
/// Concurrency rule (why `@unchecked Sendable`): the PCM handle and counters are touched only
/// while holding `lock`; `stop()` sets `stopRequested` (atomic) and takes the lock, so it waits for
/// one read or wait in progress (≤ 50 ms), never for a PCM that has nothing to read.
final class ALSAStream: DriverStream, @unchecked Sendable {  // unchecked: PCM handle and counters only under `lock` (see above)
    private let name: String
    private let config: ALSAConfig?
    private let format: AudioStreamFormat
    private let pace: CapturePace
    private let system: any ALSASystem
    /// The driver's event center (drops and unplugs).
    private let events: DeviceEventCenter
    private let lock = NSLock()
    /// Set by stop() before it takes `lock`.
    private let stopRequested = Atomic<Bool>(false)

    // Guarded by `lock`.
    private var pcm: ALSAPCMHandle?
    private var isStopped = false
    private var periodFrames = 480
    private var bufferFrames = 0
    private var framesDelivered: Int64 = 0
    private var anchor: MediaTime = .zero
    private var anchored = false
    private var recovered = false
    /// Where the previous read ended on the hardware clock (nil: not stamped).
    private var lastMeasuredEnd: MediaTime?
    private var pending: SampleBuffer?

    /// What the hardware actually granted (read back after hw_params).
    private(set) var grantedPeriodFrames = 0
    private(set) var grantedBufferFrames = 0

    init(name: String, config: ALSAConfig?, format: AudioStreamFormat, pace: CapturePace, system: any ALSASystem,
         events: DeviceEventCenter) {
        self.events = events
        self.name = name
        self.config = config
        self.format = format
        self.pace = pace
        self.system = system
    }

    deinit { closeLocked() }

    /// A failed call as the device error it means: ENODEV → disconnected, EBUSY → busy, else the call and its text.
    private func failure(_ error: ALSAError) -> CaptureError {
        switch error.code {
        case .noDevice:
            events.post(.disconnected(deviceID: name))
            return .deviceDisconnected(name)
        case .busy:
            return .deviceStartFailed(device: name, reason: "\(error.operation): the device is busy (another process is capturing)")
        default:
            return .deviceStartFailed(device: name, reason: "\(error.operation): \(error.code)")
        }
    }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        lock.lock(); defer { lock.unlock() }
        guard pcm == nil, !isStopped else { throw .invalidState("an ALSA stream starts once") }
        let handle: ALSAPCMHandle
        do {
            handle = try system.open(name, config: config)
        } catch {
            if error.code == .accessDenied || error.code == .notPermitted { throw .deviceAccessDenied(name) }
            throw failure(error)
        }
        pcm = handle
        do throws(CaptureError) {
            try configure(handle)
            do {
                try system.prepare(handle)
                try system.start(handle)
            } catch { throw failure(error) }
            CaptureLogging.logger(.alsa).info("capturing", metadata: ["pcm": "\(name)"])
        } catch {
            closeLocked()
            throw error
        }
        anchor = pace == .realtime ? hostTime : .zero
    }

    /// The calls whose refusal means the PCM does not take the format.
    private static let formatSteps: Set<String> = [
        "snd_pcm_hw_params_set_format", "snd_pcm_hw_params_set_channels", "snd_pcm_hw_params_set_rate",
    ]

    private func configure(_ pcm: ALSAPCMHandle) throws(CaptureError) {
        // ≤ 10 ms periods for low latency (each read returns one); 32 periods of buffer as headroom
        // against overruns when the reading thread is starved (the buffer size adds no latency).
        let period = format.sampleRate / 100
        let request = ALSAHardwareRequest(format: ALSASampleFormat(format.sampleFormat), channels: format.channelCount,
                                          rate: format.sampleRate, periodFrames: period, bufferFrames: period * 32)
        let grant: ALSAHardwareGrant
        do {
            grant = try system.setHardwareParameters(pcm, request)
        } catch {
            if Self.formatSteps.contains(error.operation) { throw .formatNotSupported("\(format) on \(name)") }
            throw failure(error)
        }
        guard grant.rate == format.sampleRate else { throw .formatNotSupported("\(name) runs at \(grant.rate) Hz, not \(format.sampleRate)") }
        periodFrames = max(1, min(grant.periodFrames, format.sampleRate / 50))
        bufferFrames = grant.bufferFrames
        grantedPeriodFrames = grant.periodFrames
        grantedBufferFrames = grant.bufferFrames
        do {
            try system.setSoftwareParameters(pcm, ALSASoftwareRequest(availMin: periodFrames, startThreshold: 1))
        } catch { throw failure(error) }
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        // One read (or one wait of ≤ 50 ms) per turn of the lock, so stop() gets in between turns
        // even while the PCM has nothing to give; `stopRequested` keeps this loop from re-taking
        // the lock ahead of it.
        while !stopRequested.load(ordering: .acquiring) {
            if case .sample(let sample) = try readOnce() { return sample }
        }
        return nil
    }

    private enum Turn { case sample(SampleBuffer?), again }

    private func readOnce() throws(CaptureError) -> Turn {
        lock.lock(); defer { lock.unlock() }
        if let p = pending {
            pending = nil
            return .sample(p)
        }
        guard !isStopped, let pcm else { return .sample(nil) }
        let buffer = AudioPCMBuffer(format: format, frameCapacity: periodFrames)
        let frames = periodFrames
        let read: Result<Int, ALSAError>
        do {
            read = .success(try buffer.withProducerBytes { raw throws(ALSAError) in try system.read(pcm, into: raw, frames: frames) })
        } catch {
            read = .failure(error)
        }
        switch read {
        case .failure(let error) where error.code == .wouldBlock:
            // Waits under the lock (stop() must not close the PCM mid-wait), briefly.
            do { _ = try system.wait(pcm, timeoutMilliseconds: 50) } catch { try recover(error.code) }
            return .again
        case .failure(let error):
            try recover(error.code)
            return .again
        case .success(0):
            return .again
        case .success(let n):
            buffer.setProducerFrameLength(n)
            return .sample(deliver(buffer, frames: n))
        }
    }

    /// EPIPE (overrun), ESTRPIPE (suspend), EINTR → snd_pcm_recover; a gone device → disconnected.
    private func recover(_ code: ALSAErrno) throws(CaptureError) {
        guard let pcm else { return }
        if code == .noDevice || system.state(pcm) == .disconnected {
            events.post(.disconnected(deviceID: name))
            throw .deviceDisconnected(name)
        }
        do {
            try system.recover(pcm, from: code, silent: true)
        } catch {
            if error.code == .noDevice { events.post(.disconnected(deviceID: name)); throw .deviceDisconnected(name) }
            throw .deviceStartFailed(device: name, reason: "capture failed and could not recover: \(code)")
        }
        if code == .brokenPipe || code == .suspended {
            recovered = true
            try? system.start(pcm)
        }
    }

    /// PTS for a read of `frames`. Samples lost before it (an overrun, a suspend) travel with the
    /// samples as `SampleBuffer.discontinuity` (reason `.discontinuity`), and are posted to the
    /// driver's `DeviceEventCenter` as `.overrun`:
    /// - real time with hardware timestamps: the gap is measured on the clock and delivered as
    ///   silence first (PTS stay continuous and in sync); that silence carries the discontinuity, so
    ///   `didDrop` reports where the loss began and how many frames it held;
    /// - otherwise (virtual pace, or a PCM without timestamps) no silence is made up: the sample
    ///   after the xrun carries the loss, measured from the timestamps when the PCM has them, else
    ///   the least an xrun loses — the buffer that recovery discards (`bufferFrames`).
    private func deliver(_ buffer: AudioPCMBuffer, frames: Int) -> SampleBuffer {
        let rate = Int32(format.sampleRate)
        let measured = measuredStart(frames: frames)
        let previousEnd = lastMeasuredEnd
        lastMeasuredEnd = measured.map { $0 + MediaTime(value: Int64(frames), timescale: rate) }
        let xrun = recovered
        recovered = false
        var pts = anchor + MediaTime(value: framesDelivered, timescale: rate)
        if pace == .realtime, let measured {
            if !anchored {
                anchor = measured
                anchored = true
                pts = measured
            } else {
                let drift = (measured - pts).seconds
                let period = Double(periodFrames) / Double(rate)
                if xrun || abs(drift) > period {
                    let gap = Int((drift * Double(rate)).rounded())
                    if gap > 0 {
                        events.post(.samplesDropped(deviceID: name, reason: .overrun, count: gap, presentationTime: pts))
                        let silence = makeSample(AudioPCMBuffer(format: format, frameCapacity: gap), pts: pts, first: framesDelivered,
                                                 discontinuity: Discontinuity(count: gap, reason: .discontinuity))
                        framesDelivered += Int64(gap)
                        pending = makeSample(buffer, pts: measured, first: framesDelivered)
                        framesDelivered += Int64(frames)
                        return silence
                    }
                    // Ahead of the clock (rate drift): re-anchor so PTS follow the hardware.
                    anchor = measured - MediaTime(value: framesDelivered, timescale: rate)
                    pts = measured
                }
            }
            let sample = makeSample(buffer, pts: pts, first: framesDelivered)
            framesDelivered += Int64(frames)
            return sample
        }
        var loss: Discontinuity?
        if xrun {
            var lost = bufferFrames
            if let previousEnd, let measured {
                lost = Int(((measured - previousEnd).seconds * Double(rate)).rounded())
            }
            if lost > 0 {
                loss = Discontinuity(count: lost, reason: .discontinuity)
                events.post(.samplesDropped(deviceID: name, reason: .overrun, count: lost, presentationTime: pts))
            }
        }
        let sample = makeSample(buffer, pts: pts, first: framesDelivered, discontinuity: loss)
        framesDelivered += Int64(frames)
        return sample
    }

    private func makeSample(_ buffer: AudioPCMBuffer, pts: MediaTime, first: Int64, discontinuity: Discontinuity? = nil) -> SampleBuffer {
        SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format), presentationTime: pts,
                     duration: MediaTime(value: Int64(buffer.frameLength), timescale: Int32(format.sampleRate)),
                     sequenceNumber: first, discontinuity: discontinuity)
    }

    /// When the first of the `frames` just read was captured, on CLOCK_MONOTONIC; nil without a clock.
    private func measuredStart(frames: Int) -> MediaTime? {
        guard let pcm, let status = try? system.status(pcm), let ns = status.timestampNanoseconds else { return nil }
        let delay = Int64(max(0, status.delayFrames))
        let stamp = MediaTime(value: ns, timescale: 1_000_000_000)
        return stamp - MediaTime(value: delay + Int64(frames), timescale: Int32(format.sampleRate))
    }

    func stop() {
        stopRequested.store(true, ordering: .releasing)
        lock.lock(); defer { lock.unlock() }
        isStopped = true
        closeLocked()
    }

    private func closeLocked() {
        if let pcm {
            system.drop(pcm)
            system.close(pcm)
        }
        pcm = nil
    }
}
