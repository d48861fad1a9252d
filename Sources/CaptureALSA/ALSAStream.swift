import CALSA
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
/// Concurrency rule (why `@unchecked Sendable`): the PCM handle and counters are touched only
/// while holding `lock`; `stop()` takes the lock, so it waits for a read or wait in progress (≤ 50 ms).
final class ALSAStream: DriverStream, @unchecked Sendable {
    private let name: String
    private let config: ALSAConfig?
    private let format: AudioStreamFormat
    private let pace: CapturePace
    private let lock = NSLock()

    // Guarded by `lock`.
    private var pcm: OpaquePointer?
    private var status: OpaquePointer?
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

    init(name: String, config: ALSAConfig?, format: AudioStreamFormat, pace: CapturePace) {
        self.name = name
        self.config = config
        self.format = format
        self.pace = pace
    }

    deinit { closeLocked() }

    private var alsaFormat: snd_pcm_format_t {
        format.sampleFormat == .int16 ? SND_PCM_FORMAT_S16_LE : SND_PCM_FORMAT_FLOAT_LE
    }

    private func check(_ r: Int32, _ what: String) throws(CaptureError) {
        guard r >= 0 else {
            if r == -ENODEV { DeviceEventCenter.shared.post(.disconnected(deviceID: name)); throw .deviceDisconnected(name) }
            if r == -EBUSY { throw .deviceStartFailed(device: name, reason: "\(what): the device is busy (another process is capturing)") }
            throw .deviceStartFailed(device: name, reason: "\(what): \(String(cString: snd_strerror(r)))")
        }
    }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        lock.lock(); defer { lock.unlock() }
        guard pcm == nil, !isStopped else { throw .invalidState("an ALSA stream starts once") }
        let (opened, r) = ALSAProbe.open(name: name, config: config, mode: Int32(SND_PCM_NONBLOCK))
        guard let handle = opened else {
            if r == -EACCES || r == -EPERM { throw .deviceAccessDenied(name) }
            try check(r, "snd_pcm_open")
            throw .deviceNotFound(name)
        }
        pcm = handle
        do throws(CaptureError) {
            try configure(handle)
            var st: OpaquePointer?
            try check(snd_pcm_status_malloc(&st), "snd_pcm_status_malloc")
            status = st
            try check(snd_pcm_prepare(handle), "snd_pcm_prepare")
            try check(snd_pcm_start(handle), "snd_pcm_start")
        } catch {
            closeLocked()
            throw error
        }
        anchor = pace == .realtime ? hostTime : .zero
    }

    private func configure(_ pcm: OpaquePointer) throws(CaptureError) {
        var hw: OpaquePointer?
        try check(snd_pcm_hw_params_malloc(&hw), "snd_pcm_hw_params_malloc")
        guard let hw else { return }
        defer { snd_pcm_hw_params_free(hw) }
        try check(snd_pcm_hw_params_any(pcm, hw), "snd_pcm_hw_params_any")
        try check(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "interleaved access")
        guard snd_pcm_hw_params_set_format(pcm, hw, alsaFormat) == 0,
              snd_pcm_hw_params_set_channels(pcm, hw, UInt32(format.channelCount)) == 0,
              snd_pcm_hw_params_set_rate(pcm, hw, UInt32(format.sampleRate), 0) == 0 else {
            throw .formatNotSupported("\(format) on \(name)")
        }
        // ≤ 10 ms periods for low latency (each read returns one); 32 periods of buffer as headroom
        // against overruns when the reading thread is starved (the buffer size adds no latency).
        var period = snd_pcm_uframes_t(format.sampleRate / 100)
        var dir: Int32 = 0
        try check(snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir), "period size")
        var buffer = period * 32
        try check(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer), "buffer size")
        try check(snd_pcm_hw_params(pcm, hw), "snd_pcm_hw_params")
        // Read back what the hardware granted.
        var rate: UInt32 = 0
        try check(snd_pcm_hw_params_get_rate(hw, &rate, &dir), "rate")
        guard Int(rate) == format.sampleRate else { throw .formatNotSupported("\(name) runs at \(rate) Hz, not \(format.sampleRate)") }
        try check(snd_pcm_hw_params_get_period_size(hw, &period, &dir), "period size")
        try check(snd_pcm_hw_params_get_buffer_size(hw, &buffer), "buffer size")
        periodFrames = max(1, min(Int(period), format.sampleRate / 50))
        bufferFrames = Int(buffer)
        grantedPeriodFrames = Int(period)
        grantedBufferFrames = Int(buffer)

        var sw: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&sw), "snd_pcm_sw_params_malloc")
        guard let sw else { return }
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(pcm, sw), "snd_pcm_sw_params_current")
        try check(snd_pcm_sw_params_set_tstamp_mode(pcm, sw, SND_PCM_TSTAMP_ENABLE), "tstamp mode")
        try check(snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC), "tstamp type")
        try check(snd_pcm_sw_params_set_avail_min(pcm, sw, snd_pcm_uframes_t(periodFrames)), "avail min")
        try check(snd_pcm_sw_params_set_start_threshold(pcm, sw, 1), "start threshold")
        try check(snd_pcm_sw_params(pcm, sw), "snd_pcm_sw_params")
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
            let n = buffer.withMutableBytes { raw in snd_pcm_readi(pcm, raw.baseAddress, snd_pcm_uframes_t(periodFrames)) }
            if n == -Int(EAGAIN) {
                // Waits under the lock (stop() must not close the PCM mid-wait), briefly.
                let w = snd_pcm_wait(pcm, 50)
                if w < 0 { try recover(Int32(w)) }
                continue
            }
            if n < 0 {
                try recover(Int32(n))
                continue
            }
            if n == 0 { continue }
            buffer.setFrameLength(n)
            return deliver(buffer, frames: n)
        }
    }

    /// EPIPE (overrun), ESTRPIPE (suspend), EINTR → snd_pcm_recover; a gone device → disconnected.
    private func recover(_ error: Int32) throws(CaptureError) {
        guard let pcm else { return }
        if error == -ENODEV || snd_pcm_state(pcm) == SND_PCM_STATE_DISCONNECTED {
            DeviceEventCenter.shared.post(.disconnected(deviceID: name))
            throw .deviceDisconnected(name)
        }
        let r = snd_pcm_recover(pcm, error, 1)
        guard r >= 0 else {
            if r == -ENODEV { DeviceEventCenter.shared.post(.disconnected(deviceID: name)); throw .deviceDisconnected(name) }
            throw .deviceStartFailed(device: name, reason: "capture failed and could not recover: \(String(cString: snd_strerror(error)))")
        }
        if error == -EPIPE || error == -ESTRPIPE {
            recovered = true
            _ = snd_pcm_start(pcm)
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
        guard let pcm, let status, snd_pcm_status(pcm, status) == 0 else { return nil }
        var ts = snd_htimestamp_t()
        snd_pcm_status_get_htstamp(status, &ts)
        guard ts.tv_sec > 0 || ts.tv_nsec > 0 else { return nil }
        let delay = Int64(max(0, snd_pcm_status_get_delay(status)))
        let stamp = MediaTime(value: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec), timescale: 1_000_000_000)
        return stamp - MediaTime(value: delay + Int64(frames), timescale: Int32(format.sampleRate))
    }

    func stop() {
        lock.lock(); defer { lock.unlock() }
        isStopped = true
        closeLocked()
    }

    private func closeLocked() {
        if let pcm {
            _ = snd_pcm_drop(pcm)
            snd_pcm_close(pcm)
        }
        pcm = nil
        if let status { snd_pcm_status_free(status) }
        status = nil
    }
}
