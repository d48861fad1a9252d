import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Capture from one PCM: interleaved reads of one period (≤ 10 ms) at a time.
///
/// Real time: hardware timestamps (tstamp mode ENABLE, type MONOTONIC); the first sample of each
/// read was captured at `tstamp − (delay + frames) / rate`. PTS follow the sample count from the
/// first read and are re-anchored to the measured time when they drift apart by more than one
/// period; an overrun (EPIPE) is recovered with `snd_pcm_recover`, reported as dropped samples, and
/// its gap is delivered as silence so audio stays continuous and in sync with video.
///
/// Every libasound call goes through `ALSASystem` (the real library, or a fake in host tests).
///
/// Concurrency rule (why `@unchecked Sendable`): the PCM handle and counters are touched only
/// while holding `lock`; `stop()` takes the lock, so it waits for a read or wait in progress (≤ 50 ms).
final class ALSAStream: DriverStream, @unchecked Sendable {
    private let name: String
    private let config: ALSAConfig?
    private let format: AudioStreamFormat
    private let pace: CapturePace
    private let system: any ALSASystem
    private let lock = NSLock()

    // Guarded by `lock`.
    private var pcm: ALSAPCMHandle?
    private var isStopped = false
    private var periodFrames = 480
    private var bufferFrames = 0
    private var framesDelivered: Int64 = 0
    private var anchor: MediaTime = .zero
    private var anchored = false
    private var recovered = false
    private var pending: SampleBuffer?

    /// What the hardware actually granted (read back after hw_params).
    private(set) var grantedPeriodFrames = 0
    private(set) var grantedBufferFrames = 0

    init(name: String, config: ALSAConfig?, format: AudioStreamFormat, pace: CapturePace, system: any ALSASystem) {
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
            DeviceEventCenter.shared.post(.disconnected(deviceID: name))
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
        lock.lock(); defer { lock.unlock() }
        if let p = pending {
            pending = nil
            return p
        }
        while true {
            guard !isStopped, let pcm else { return nil }
            let buffer = AudioPCMBuffer(format: format, frameCapacity: periodFrames)
            let frames = periodFrames
            let read: Result<Int, ALSAError>
            do {
                read = .success(try buffer.withMutableBytes { raw throws(ALSAError) in try system.read(pcm, into: raw, frames: frames) })
            } catch {
                read = .failure(error)
            }
            switch read {
            case .failure(let error) where error.code == .wouldBlock:
                // Waits under the lock (stop() must not close the PCM mid-wait), briefly.
                do { _ = try system.wait(pcm, timeoutMilliseconds: 50) } catch { try recover(error.code) }
                continue
            case .failure(let error):
                try recover(error.code)
                continue
            case .success(0):
                continue
            case .success(let n):
                buffer.setFrameLength(n)
                return deliver(buffer, frames: n)
            }
        }
    }

    /// EPIPE (overrun), ESTRPIPE (suspend), EINTR → snd_pcm_recover; a gone device → disconnected.
    private func recover(_ code: ALSAErrno) throws(CaptureError) {
        guard let pcm else { return }
        if code == .noDevice || system.state(pcm) == .disconnected {
            DeviceEventCenter.shared.post(.disconnected(deviceID: name))
            throw .deviceDisconnected(name)
        }
        do {
            try system.recover(pcm, from: code, silent: true)
        } catch {
            if error.code == .noDevice { DeviceEventCenter.shared.post(.disconnected(deviceID: name)); throw .deviceDisconnected(name) }
            throw .deviceStartFailed(device: name, reason: "capture failed and could not recover: \(code)")
        }
        if code == .brokenPipe || code == .suspended {
            recovered = true
            try? system.start(pcm)
        }
    }

    /// PTS for a read of `frames`; a gap since the last read (overrun) is delivered as silence first.
    private func deliver(_ buffer: AudioPCMBuffer, frames: Int) -> SampleBuffer {
        let rate = Int32(format.sampleRate)
        var pts = anchor + MediaTime(value: framesDelivered, timescale: rate)
        if pace == .realtime, let measured = measuredStart(frames: frames) {
            if !anchored {
                anchor = measured
                anchored = true
                pts = measured
            } else {
                let drift = (measured - pts).seconds
                let period = Double(periodFrames) / Double(rate)
                if recovered || abs(drift) > period {
                    let gap = Int((drift * Double(rate)).rounded())
                    if gap > 0 {
                        DeviceEventCenter.shared.post(.samplesDropped(deviceID: name, reason: .overrun, count: gap, presentationTime: pts))
                        let silence = makeSample(AudioPCMBuffer(format: format, frameCapacity: gap), pts: pts, first: framesDelivered)
                        framesDelivered += Int64(gap)
                        pending = makeSample(buffer, pts: measured, first: framesDelivered)
                        framesDelivered += Int64(frames)
                        recovered = false
                        return silence
                    }
                    // Ahead of the clock (rate drift): re-anchor so PTS follow the hardware.
                    anchor = measured - MediaTime(value: framesDelivered, timescale: rate)
                    pts = measured
                }
            }
        }
        recovered = false
        let sample = makeSample(buffer, pts: pts, first: framesDelivered)
        framesDelivered += Int64(frames)
        return sample
    }

    private func makeSample(_ buffer: AudioPCMBuffer, pts: MediaTime, first: Int64) -> SampleBuffer {
        SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format), presentationTime: pts,
                     duration: MediaTime(value: Int64(buffer.frameLength), timescale: Int32(format.sampleRate)),
                     sequenceNumber: first)
    }

    /// When the first of the `frames` just read was captured, on CLOCK_MONOTONIC; nil without a clock.
    private func measuredStart(frames: Int) -> MediaTime? {
        guard let pcm, let status = try? system.status(pcm), let ns = status.timestampNanoseconds else { return nil }
        let delay = Int64(max(0, status.delayFrames))
        let stamp = MediaTime(value: ns, timescale: 1_000_000_000)
        return stamp - MediaTime(value: delay + Int64(frames), timescale: Int32(format.sampleRate))
    }

    func stop() {
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
