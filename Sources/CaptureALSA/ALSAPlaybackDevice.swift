import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An ALSA playback PCM (`hw:CARD,DEV[,SUB]`, `default`, or a PCM of a private configuration) as
/// an `AudioOutputSink`: what `AudioPlayer(path:device:)` plays to and what the virtual microphone
/// (`capture simulate --audio-to`) writes into.
///
/// Samples arrive as interleaved float32 in `format`; the PCM runs at that rate and channel count,
/// in float32 when it takes it, else S16 (converted here, clipped). Writes block while the card's
/// buffer is full, so the card paces the writer (`pacesItself`). An underrun (EPIPE: the writer
/// was late and the card ran dry) is recovered with `snd_pcm_recover` and counted; ENODEV (the
/// device was unplugged) ends playback with `deviceDisconnected` and posts `.disconnected` to
/// `events`.
///
/// Concurrency rule: the handle and counters live in `state`, touched only under its lock.
public final class ALSAPlaybackDevice: AudioOutputSink, Sendable {
    public let uniqueID: String
    public let format: AudioStreamFormat
    /// Underruns, unplugs.
    public let events: DeviceEventCenter
    private let config: ALSAConfig?
    private let system: any ALSASystem
    private let state = Locked(State())

    private struct State {
        var pcm: ALSAPCMHandle?
        var hardwareFormat = ALSASampleFormat.float32
        var written = 0
        var underruns = 0
        var grant: ALSAHardwareGrant?
    }

    /// A playback device by ALSA name; `format` is what callers write (float32 interleaved; the
    /// rate and channel count are asked of the PCM). `configuration`: private ALSA configuration text.
    /// `cardSampleFormat`: what the PCM is asked to run in (nil: float32 when it takes it, else S16).
    /// `bufferDuration`: the card's buffer (a writer that writes ahead, like `AudioPlayer`, keeps it
    /// full: it survives stalls that long); `startThreshold`: how much is written before the card
    /// starts (nil: half the buffer) — for a real-time writer (the virtual microphone) that is the
    /// fill it keeps, so both its latency and the stall it survives.
    public convenience init(name: String, format: AudioStreamFormat = AudioStreamFormat(sampleRate: 48_000, channelCount: 2, sampleFormat: .float32),
                            cardSampleFormat: AudioStreamFormat.SampleFormat? = nil, bufferDuration: Double = 0.5,
                            startThreshold: Double? = nil, configuration: String? = nil) throws(CaptureError) {
        guard bufferDuration.isFinite, (0.04...4).contains(bufferDuration) else {
            throw .valueOutOfRange(control: "bufferDuration", value: "\(bufferDuration)", allowed: "0.04…4 s")
        }
        if let startThreshold, !(startThreshold.isFinite && startThreshold > 0 && startThreshold <= bufferDuration) {
            throw .valueOutOfRange(control: "startThreshold", value: "\(startThreshold)", allowed: "above 0, at most the buffer (\(bufferDuration) s)")
        }
        let config = try configuration.map { text throws(CaptureError) in try ALSAConfig(text: text) }
        self.init(name: name, format: format, config: config, system: LinuxALSASystem(), events: DeviceEventCenter(),
                  cardSampleFormat: cardSampleFormat, bufferDuration: bufferDuration, startThreshold: startThreshold)
    }

    private let cardSampleFormat: AudioStreamFormat.SampleFormat?
    private let bufferDuration: Double
    private let startThresholdDuration: Double?

    init(name: String, format: AudioStreamFormat, config: ALSAConfig?, system: any ALSASystem, events: DeviceEventCenter,
         cardSampleFormat: AudioStreamFormat.SampleFormat? = nil, bufferDuration: Double = 0.5, startThreshold: Double? = nil) {
        self.cardSampleFormat = cardSampleFormat
        self.bufferDuration = bufferDuration
        self.startThresholdDuration = startThreshold
        uniqueID = name
        self.format = AudioStreamFormat(sampleRate: format.sampleRate, channelCount: format.channelCount, sampleFormat: .float32)
        self.config = config
        self.system = system
        self.events = events
    }

    deinit { state.withLock { closeLocked(drain: false, &$0) } }

    public var pacesItself: Bool { true }

    public var playedFrameCount: Int { state.withLock { $0.written } }

    /// Underruns recovered so far.
    public var underrunCount: Int { state.withLock { $0.underruns } }

    /// Period and buffer the card granted (nil before playback begins).
    public var grantedPeriodFrames: Int? { state.withLock { $0.grant?.periodFrames } }
    public var grantedBufferFrames: Int? { state.withLock { $0.grant?.bufferFrames } }

    public func beginPlayback() throws(CaptureError) {
        try state.withLock { (s) throws(CaptureError) in try beginPlayback(&s) }
    }

    private func beginPlayback(_ s: inout State) throws(CaptureError) {
        guard s.pcm == nil else { return }
        let handle: ALSAPCMHandle
        do {
            handle = try system.openPlayback(uniqueID, config: config)
        } catch {
            if error.code == .accessDenied || error.code == .notPermitted { throw .deviceAccessDenied(uniqueID) }
            if error.code == .noSuchPCM || error.code == .noDevice { throw .deviceNotFound(uniqueID + " (no ALSA playback PCM of that name)") }
            if error.code == .busy { throw .deviceInUse(uniqueID) }
            throw .audioPlaybackFailed(device: uniqueID, reason: "\(error.operation): \(error.code)")
        }
        s.pcm = handle
        do throws(CaptureError) {
            let sampleFormat: ALSASampleFormat = cardSampleFormat.map(ALSASampleFormat.init)
                ?? (system.supports(handle, format: .float32, channels: format.channelCount, rate: format.sampleRate) ? .float32 : .s16)
            guard system.supports(handle, format: sampleFormat, channels: format.channelCount, rate: format.sampleRate) else {
                throw .formatNotSupported("\(uniqueID) does not play \(format.sampleRate) Hz \(format.channelCount) ch \(sampleFormat == .s16 ? "S16" : "float32") (another program may hold the loopback at another format)")
            }
            s.hardwareFormat = sampleFormat
            // 20 ms periods, as many as the buffer duration holds.
            let period = format.sampleRate / 50
            let periods = max(2, Int((bufferDuration / 0.02).rounded()))
            do {
                let granted = try system.setHardwareParameters(handle, ALSAHardwareRequest(
                    format: sampleFormat, channels: format.channelCount, rate: format.sampleRate, periodFrames: period, bufferFrames: period * periods))
                guard granted.rate == format.sampleRate else {
                    throw CaptureError.formatNotSupported("\(uniqueID) plays at \(granted.rate) Hz, not \(format.sampleRate)")
                }
                s.grant = granted
                // Starts once the threshold (default: half the buffer) is filled: a head start against underruns.
                let threshold = startThresholdDuration.map { Int(($0 * Double(format.sampleRate)).rounded()) } ?? granted.bufferFrames / 2
                try system.setSoftwareParameters(handle, ALSASoftwareRequest(availMin: granted.periodFrames,
                                                                             startThreshold: max(1, min(threshold, granted.bufferFrames))))
                try system.prepare(handle)
            } catch let error as ALSAError {
                throw failure(error)
            } catch let error as CaptureError {
                throw error
            } catch {
                throw .audioPlaybackFailed(device: uniqueID, reason: "\(error)")
            }
        } catch {
            closeLocked(drain: false, &s)
            throw error
        }
    }

    private func failure(_ error: ALSAError) -> CaptureError {
        if error.code == .noDevice {
            events.post(.disconnected(deviceID: uniqueID))
            return .deviceDisconnected(uniqueID)
        }
        return .audioPlaybackFailed(device: uniqueID, reason: "\(error.operation): \(error.code)")
    }

    public func write(_ samples: [Float]) throws(CaptureError) {
        try state.withLock { (s) throws(CaptureError) in try write(samples, &s) }
    }

    private func write(_ samples: [Float], _ s: inout State) throws(CaptureError) {
        guard let pcm = s.pcm else { throw .invalidState("write to \(uniqueID) before beginPlayback (or after it failed)") }
        let channels = format.channelCount
        let frames = samples.count / channels
        var bytes: [UInt8]
        switch s.hardwareFormat {
        case .float32:
            bytes = samples.withUnsafeBytes { Array($0) }
        case .s16:
            let ints = samples.map { Int16(max(-32768, min(32767, ($0 * 32767).rounded()))) }
            bytes = ints.withUnsafeBytes { Array($0) }
        }
        let bytesPerFrame = channels * (s.hardwareFormat == .float32 ? 4 : 2)
        var done = 0
        var attempts = 0
        while done < frames {
            let result: Result<Int, ALSAError> = bytes.withUnsafeBytes { raw -> Result<Int, ALSAError> in
                do throws(ALSAError) {
                    return .success(try system.write(pcm, from: UnsafeRawBufferPointer(rebasing: raw[(done * bytesPerFrame)...]), frames: frames - done))
                } catch {
                    return .failure(error)
                }
            }
            switch result {
            case .success(let n):
                done += n
                s.written += n
                attempts = 0
            case .failure(let error):
                attempts += 1
                if error.code == .noDevice || system.state(pcm) == .disconnected {
                    closeLocked(drain: false, &s)
                    events.post(.disconnected(deviceID: uniqueID))
                    throw .deviceDisconnected(uniqueID)
                }
                guard attempts < 8, error.code == .brokenPipe || error.code == .suspended || error.code == .interrupted || error.code == .wouldBlock else {
                    throw failure(error)
                }
                if error.code == .brokenPipe {
                    s.underruns += 1
                    events.post(.samplesDropped(deviceID: uniqueID, reason: .overrun, count: 0, presentationTime: .zero))
                }
                if error.code != .wouldBlock {
                    do { try system.recover(pcm, from: error.code, silent: true) } catch { throw failure(error) }
                }
            }
        }
    }

    public func endPlayback() {
        state.withLock { closeLocked(drain: true, &$0) }
    }

    private func closeLocked(drain: Bool, _ s: inout State) {
        guard let pcm = s.pcm else { return }
        if drain { system.drain(pcm) } else { system.drop(pcm) }
        system.close(pcm)
        s.pcm = nil
    }
}
