import CALSA
import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An error code from libasound, which returns −errno: this holds the positive errno
/// (swift-system's `Errno`, for ALSA). Callers above the seam never see raw `Int32` results.
struct ALSAErrno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32
    init(rawValue: Int32) { self.rawValue = rawValue }
    /// From a libasound result (−errno).
    init(result: some BinaryInteger) { rawValue = Int32(clamping: -Int(result)) }

    /// `EAGAIN`: a non-blocking PCM has nothing to read yet.
    static let wouldBlock = ALSAErrno(rawValue: EAGAIN)
    /// `EPIPE`: an overrun (xrun) — the capture buffer filled before it was read.
    static let brokenPipe = ALSAErrno(rawValue: EPIPE)
    /// `ESTRPIPE`: the PCM was suspended.
    static let suspended = ALSAErrno(rawValue: ESTRPIPE)
    /// `EINTR`.
    static let interrupted = ALSAErrno(rawValue: EINTR)
    /// `ENODEV`: the device went away (unplugged).
    static let noDevice = ALSAErrno(rawValue: ENODEV)
    /// `EBUSY`: another process has the PCM open.
    static let busy = ALSAErrno(rawValue: EBUSY)
    /// `EINVAL`: a parameter the PCM refuses.
    static let invalidArgument = ALSAErrno(rawValue: EINVAL)
    /// `ENOENT`: no PCM of that name.
    static let noSuchPCM = ALSAErrno(rawValue: ENOENT)
    /// `EACCES`.
    static let accessDenied = ALSAErrno(rawValue: EACCES)
    /// `EPERM`.
    static let notPermitted = ALSAErrno(rawValue: EPERM)

    /// libasound's text for the code (`snd_strerror`).
    var description: String { String(cString: snd_strerror(-rawValue)) }
}

/// A failed libasound call: the code and which call (or step) failed, for messages.
struct ALSAError: Error, Hashable, Sendable {
    var code: ALSAErrno
    /// The libasound call or step, named as the backend's messages name it (`snd_pcm_hw_params`,
    /// `period size`, …).
    var operation: String
}

/// An open PCM (`snd_pcm_t *`), as a bit pattern so fakes can mint their own.
struct ALSAPCMHandle: RawRepresentable, Hashable, Sendable {
    let rawValue: UInt
    init(rawValue: UInt) { self.rawValue = rawValue }
}

/// `snd_pcm_format_t` for the two sample formats the backend takes.
enum ALSASampleFormat: Sendable, Hashable, CaseIterable {
    /// `SND_PCM_FORMAT_S16_LE`
    case s16
    /// `SND_PCM_FORMAT_FLOAT_LE`
    case float32

    init(_ format: AudioStreamFormat.SampleFormat) { self = format == .int16 ? .s16 : .float32 }

    var sampleFormat: AudioStreamFormat.SampleFormat { self == .s16 ? .int16 : .float32 }

    var raw: snd_pcm_format_t { self == .s16 ? SND_PCM_FORMAT_S16_LE : SND_PCM_FORMAT_FLOAT_LE }
}

/// `snd_pcm_state_t`, for the states the backend acts on.
enum ALSAPCMState: Sendable, Hashable {
    case disconnected
    case xrun
    case suspended
    case other
}

/// What the stream asks of the hardware: interleaved access (`SND_PCM_ACCESS_RW_INTERLEAVED`),
/// a format, and a period and buffer size near the given ones.
struct ALSAHardwareRequest: Sendable, Hashable {
    var format: ALSASampleFormat
    var channels: Int
    var rate: Int
    var periodFrames: Int
    var bufferFrames: Int
}

/// What `snd_pcm_hw_params` granted, read back.
struct ALSAHardwareGrant: Sendable, Hashable {
    var rate: Int
    var periodFrames: Int
    var bufferFrames: Int
}

/// Software parameters: timestamps ENABLE on CLOCK_MONOTONIC, `avail_min`, `start_threshold`.
struct ALSASoftwareRequest: Sendable, Hashable {
    var availMin: Int
    var startThreshold: Int
}

/// One `snd_pcm_status` snapshot: the hardware timestamp (`htstamp`; nil when the PCM stamps none)
/// and the delay in frames.
struct ALSAStatus: Sendable, Hashable {
    var timestampNanoseconds: Int64?
    var delayFrames: Int
}

/// A capture subdevice of a sound card, as the control interface lists it.
struct ALSACardPCM: Sendable, Hashable {
    /// `hw:CARD,DEV,SUB`
    var name: String
    var localizedName: String
    var modelID: String
}

/// A simple mixer element's capture volume (`snd_mixer_selem_*_capture_volume*`): its raw range
/// and current value (the first channel's).
struct ALSAMixerVolume: Sendable, Hashable {
    var element: String
    var min: Int
    var max: Int
    var value: Int
}

/// A card's capture-source selector (an enumerated simple element used for capture, like
/// "Capture Source" or "Input Source"): its item names and the one selected.
struct ALSACaptureSources: Sendable, Hashable {
    var element: String
    var items: [String]
    var selected: Int
}

/// The libasound calls the ALSA backend makes, behind one protocol (like `V4L2System`) so host
/// tests can stand a fake in for the sound card and inject errors per call. Every call that can
/// fail throws a typed `ALSAError`; nothing above this file sees a raw libasound result.
protocol ALSASystem: Sendable {
    /// `hw:CARD,DEV,SUB` for every capture subdevice of every card (`snd_card_next`, `snd_ctl_*`).
    func cardCapturePCMs() -> [ALSACardPCM]
    /// `snd_pcm_open` (or `snd_pcm_open_lconf` with a private configuration), capture, non-blocking.
    func open(_ name: String, config: ALSAConfig?) throws(ALSAError) -> ALSAPCMHandle
    /// Whether the PCM accepts a rate × channels × format with interleaved access (`snd_pcm_hw_params_test_*`).
    func supports(_ pcm: ALSAPCMHandle, format: ALSASampleFormat, channels: Int, rate: Int) -> Bool
    /// `snd_pcm_hw_params_*` then `snd_pcm_hw_params`; the granted values read back.
    func setHardwareParameters(_ pcm: ALSAPCMHandle, _ request: ALSAHardwareRequest) throws(ALSAError) -> ALSAHardwareGrant
    /// `snd_pcm_sw_params_*` then `snd_pcm_sw_params`.
    func setSoftwareParameters(_ pcm: ALSAPCMHandle, _ request: ALSASoftwareRequest) throws(ALSAError)
    /// `snd_pcm_prepare`
    func prepare(_ pcm: ALSAPCMHandle) throws(ALSAError)
    /// `snd_pcm_start`
    func start(_ pcm: ALSAPCMHandle) throws(ALSAError)
    /// `snd_pcm_readi`: interleaved frames into `buffer` (room for `frames`); frames read.
    func read(_ pcm: ALSAPCMHandle, into buffer: UnsafeMutableRawBufferPointer, frames: Int) throws(ALSAError) -> Int
    /// `snd_pcm_wait`: true when the PCM is ready, false on timeout.
    func wait(_ pcm: ALSAPCMHandle, timeoutMilliseconds: Int32) throws(ALSAError) -> Bool
    /// `snd_pcm_status` + `snd_pcm_status_get_htstamp` + `snd_pcm_status_get_delay`.
    func status(_ pcm: ALSAPCMHandle) throws(ALSAError) -> ALSAStatus
    /// `snd_pcm_state`
    func state(_ pcm: ALSAPCMHandle) -> ALSAPCMState
    /// `snd_pcm_recover(pcm, −code, silent)`
    func recover(_ pcm: ALSAPCMHandle, from code: ALSAErrno, silent: Bool) throws(ALSAError)
    /// `snd_pcm_drop`
    func drop(_ pcm: ALSAPCMHandle)
    /// `snd_pcm_close`
    func close(_ pcm: ALSAPCMHandle)

    // Playback (AudioPlayer to a card, the virtual microphone)

    /// `snd_pcm_open` for playback, blocking (a write waits for room: the card paces the writer).
    func openPlayback(_ name: String, config: ALSAConfig?) throws(ALSAError) -> ALSAPCMHandle
    /// `snd_pcm_writei`: interleaved frames from `buffer`; frames written.
    func write(_ pcm: ALSAPCMHandle, from buffer: UnsafeRawBufferPointer, frames: Int) throws(ALSAError) -> Int
    /// `snd_pcm_drain`: waits until everything written has played.
    func drain(_ pcm: ALSAPCMHandle)

    // Mixer (the audio session's input gain on real cards)

    /// The first active simple element of the card (`hw:CARD`) with a capture volume; nil if none.
    func captureVolume(card: String) throws(ALSAError) -> ALSAMixerVolume?
    /// Sets every channel of that element's capture volume (`snd_mixer_selem_set_capture_volume_all`).
    func setCaptureVolume(card: String, value: Int) throws(ALSAError)
    /// The first active enumerated capture element (`snd_mixer_selem_is_enum_capture`); nil if none.
    func captureSources(card: String) throws(ALSAError) -> ALSACaptureSources?
    /// Selects item `index` of that element on every channel (`snd_mixer_selem_set_enum_item`).
    func selectCaptureSource(card: String, index: Int) throws(ALSAError)
}

/// The real libasound. Stateless: handles carry everything.
struct LinuxALSASystem: ALSASystem {
    private func pointer(_ pcm: ALSAPCMHandle) -> OpaquePointer { OpaquePointer(bitPattern: pcm.rawValue)! }

    /// Throws for a negative libasound result.
    private func check(_ r: some BinaryInteger, _ operation: String) throws(ALSAError) {
        if r < 0 { throw ALSAError(code: ALSAErrno(result: r), operation: operation) }
    }

    func cardCapturePCMs() -> [ALSACardPCM] {
        var result: [ALSACardPCM] = []
        var card: Int32 = -1
        while snd_card_next(&card) == 0, card >= 0 {
            var ctl: OpaquePointer?
            guard snd_ctl_open(&ctl, "hw:\(card)", 0) == 0, let ctl else { continue }
            defer { snd_ctl_close(ctl) }
            var cardInfo: OpaquePointer?
            guard snd_ctl_card_info_malloc(&cardInfo) == 0, let cardInfo else { continue }
            defer { snd_ctl_card_info_free(cardInfo) }
            guard snd_ctl_card_info(ctl, cardInfo) == 0 else { continue }
            let cardID = String(cString: snd_ctl_card_info_get_id(cardInfo))
            let cardName = String(cString: snd_ctl_card_info_get_name(cardInfo))
            var device: Int32 = -1
            while snd_ctl_pcm_next_device(ctl, &device) == 0, device >= 0 {
                var info: OpaquePointer?
                guard snd_pcm_info_malloc(&info) == 0, let info else { continue }
                defer { snd_pcm_info_free(info) }
                snd_pcm_info_set_device(info, UInt32(device))
                snd_pcm_info_set_subdevice(info, 0)
                snd_pcm_info_set_stream(info, SND_PCM_STREAM_CAPTURE)
                guard snd_ctl_pcm_info(ctl, info) == 0 else { continue }
                let pcmName = String(cString: snd_pcm_info_get_name(info))
                let count = snd_pcm_info_get_subdevices_count(info)
                for sub in 0..<max(1, count) {
                    result.append(ALSACardPCM(name: "hw:\(cardID),\(device),\(sub)",
                                              localizedName: "\(cardName): \(pcmName) (device \(device), subdevice \(sub))",
                                              modelID: "alsa card \(card) \(cardID)"))
                }
            }
        }
        return result
    }

    func open(_ name: String, config: ALSAConfig?) throws(ALSAError) -> ALSAPCMHandle {
        let mode = Int32(SND_PCM_NONBLOCK)
        if let config { return try opened(config.openPCM(name, SND_PCM_STREAM_CAPTURE, mode: mode)) }
        var pcm: OpaquePointer?
        let r = snd_pcm_open(&pcm, name, SND_PCM_STREAM_CAPTURE, mode)
        try check(r, "snd_pcm_open")
        guard let pcm else { throw ALSAError(code: .noSuchPCM, operation: "snd_pcm_open") }
        return ALSAPCMHandle(rawValue: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pcm))))
    }

    func supports(_ pcm: ALSAPCMHandle, format: ALSASampleFormat, channels: Int, rate: Int) -> Bool {
        let pcm = pointer(pcm)
        var params: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&params) == 0, let params else { return false }
        defer { snd_pcm_hw_params_free(params) }
        guard snd_pcm_hw_params_any(pcm, params) >= 0 else { return false }
        _ = snd_pcm_hw_params_set_access(pcm, params, SND_PCM_ACCESS_RW_INTERLEAVED)
        return snd_pcm_hw_params_test_rate(pcm, params, UInt32(rate), 0) == 0
            && snd_pcm_hw_params_test_channels(pcm, params, UInt32(channels)) == 0
            && snd_pcm_hw_params_test_format(pcm, params, format.raw) == 0
    }

    func setHardwareParameters(_ handle: ALSAPCMHandle, _ request: ALSAHardwareRequest) throws(ALSAError) -> ALSAHardwareGrant {
        let pcm = pointer(handle)
        var hw: OpaquePointer?
        try check(snd_pcm_hw_params_malloc(&hw), "snd_pcm_hw_params_malloc")
        guard let hw else { throw ALSAError(code: ALSAErrno(rawValue: ENOMEM), operation: "snd_pcm_hw_params_malloc") }
        defer { snd_pcm_hw_params_free(hw) }
        try check(snd_pcm_hw_params_any(pcm, hw), "snd_pcm_hw_params_any")
        try check(snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "interleaved access")
        try check(snd_pcm_hw_params_set_format(pcm, hw, request.format.raw), "snd_pcm_hw_params_set_format")
        try check(snd_pcm_hw_params_set_channels(pcm, hw, UInt32(request.channels)), "snd_pcm_hw_params_set_channels")
        try check(snd_pcm_hw_params_set_rate(pcm, hw, UInt32(request.rate), 0), "snd_pcm_hw_params_set_rate")
        var period = snd_pcm_uframes_t(request.periodFrames)
        var dir: Int32 = 0
        try check(snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir), "period size")
        var buffer = snd_pcm_uframes_t(request.bufferFrames)
        try check(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer), "buffer size")
        try check(snd_pcm_hw_params(pcm, hw), "snd_pcm_hw_params")
        var rate: UInt32 = 0
        try check(snd_pcm_hw_params_get_rate(hw, &rate, &dir), "rate")
        try check(snd_pcm_hw_params_get_period_size(hw, &period, &dir), "period size")
        try check(snd_pcm_hw_params_get_buffer_size(hw, &buffer), "buffer size")
        return ALSAHardwareGrant(rate: Int(rate), periodFrames: Int(period), bufferFrames: Int(buffer))
    }

    func setSoftwareParameters(_ handle: ALSAPCMHandle, _ request: ALSASoftwareRequest) throws(ALSAError) {
        let pcm = pointer(handle)
        var sw: OpaquePointer?
        try check(snd_pcm_sw_params_malloc(&sw), "snd_pcm_sw_params_malloc")
        guard let sw else { throw ALSAError(code: ALSAErrno(rawValue: ENOMEM), operation: "snd_pcm_sw_params_malloc") }
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(pcm, sw), "snd_pcm_sw_params_current")
        try check(snd_pcm_sw_params_set_tstamp_mode(pcm, sw, SND_PCM_TSTAMP_ENABLE), "tstamp mode")
        try check(snd_pcm_sw_params_set_tstamp_type(pcm, sw, SND_PCM_TSTAMP_TYPE_MONOTONIC), "tstamp type")
        try check(snd_pcm_sw_params_set_avail_min(pcm, sw, snd_pcm_uframes_t(request.availMin)), "avail min")
        try check(snd_pcm_sw_params_set_start_threshold(pcm, sw, snd_pcm_uframes_t(request.startThreshold)), "start threshold")
        try check(snd_pcm_sw_params(pcm, sw), "snd_pcm_sw_params")
    }

    func prepare(_ pcm: ALSAPCMHandle) throws(ALSAError) { try check(snd_pcm_prepare(pointer(pcm)), "snd_pcm_prepare") }

    func start(_ pcm: ALSAPCMHandle) throws(ALSAError) { try check(snd_pcm_start(pointer(pcm)), "snd_pcm_start") }

    func read(_ pcm: ALSAPCMHandle, into buffer: UnsafeMutableRawBufferPointer, frames: Int) throws(ALSAError) -> Int {
        let n = snd_pcm_readi(pointer(pcm), buffer.baseAddress, snd_pcm_uframes_t(frames))
        try check(n, "snd_pcm_readi")
        return Int(n)
    }

    func wait(_ pcm: ALSAPCMHandle, timeoutMilliseconds: Int32) throws(ALSAError) -> Bool {
        let r = snd_pcm_wait(pointer(pcm), timeoutMilliseconds)
        try check(r, "snd_pcm_wait")
        return r > 0
    }

    func status(_ pcm: ALSAPCMHandle) throws(ALSAError) -> ALSAStatus {
        var status: OpaquePointer?
        try check(snd_pcm_status_malloc(&status), "snd_pcm_status_malloc")
        guard let status else { throw ALSAError(code: ALSAErrno(rawValue: ENOMEM), operation: "snd_pcm_status_malloc") }
        defer { snd_pcm_status_free(status) }
        try check(snd_pcm_status(pointer(pcm), status), "snd_pcm_status")
        var ts = snd_htimestamp_t()
        snd_pcm_status_get_htstamp(status, &ts)
        let stamped = ts.tv_sec > 0 || ts.tv_nsec > 0
        return ALSAStatus(timestampNanoseconds: stamped ? Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec) : nil,
                          delayFrames: Int(snd_pcm_status_get_delay(status)))
    }

    func state(_ pcm: ALSAPCMHandle) -> ALSAPCMState {
        switch snd_pcm_state(pointer(pcm)) {
        case SND_PCM_STATE_DISCONNECTED: return .disconnected
        case SND_PCM_STATE_XRUN: return .xrun
        case SND_PCM_STATE_SUSPENDED: return .suspended
        default: return .other
        }
    }

    func recover(_ pcm: ALSAPCMHandle, from code: ALSAErrno, silent: Bool) throws(ALSAError) {
        try check(snd_pcm_recover(pointer(pcm), -code.rawValue, silent ? 1 : 0), "snd_pcm_recover")
    }

    func drop(_ pcm: ALSAPCMHandle) { _ = snd_pcm_drop(pointer(pcm)) }

    func close(_ pcm: ALSAPCMHandle) { _ = snd_pcm_close(pointer(pcm)) }

    /// What `ALSAConfig.openPCM` gave, as `open` reports it.
    private func opened(_ result: (status: Int32, pcm: ALSAPCMHandle?)) throws(ALSAError) -> ALSAPCMHandle {
        try check(result.status, "snd_pcm_open")
        guard let pcm = result.pcm else { throw ALSAError(code: .noSuchPCM, operation: "snd_pcm_open") }
        return pcm
    }

    func openPlayback(_ name: String, config: ALSAConfig?) throws(ALSAError) -> ALSAPCMHandle {
        if let config { return try opened(config.openPCM(name, SND_PCM_STREAM_PLAYBACK, mode: 0)) }
        var pcm: OpaquePointer?
        let r = snd_pcm_open(&pcm, name, SND_PCM_STREAM_PLAYBACK, 0)
        try check(r, "snd_pcm_open")
        guard let pcm else { throw ALSAError(code: .noSuchPCM, operation: "snd_pcm_open") }
        return ALSAPCMHandle(rawValue: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pcm))))
    }

    func write(_ pcm: ALSAPCMHandle, from buffer: UnsafeRawBufferPointer, frames: Int) throws(ALSAError) -> Int {
        let n = snd_pcm_writei(pointer(pcm), buffer.baseAddress, snd_pcm_uframes_t(frames))
        try check(n, "snd_pcm_writei")
        return Int(n)
    }

    func drain(_ pcm: ALSAPCMHandle) { _ = snd_pcm_drain(pointer(pcm)) }

    /// Opens the card's mixer with its simple elements loaded; closed after `body`.
    private func withMixer<R>(_ card: String, _ body: (OpaquePointer) throws(ALSAError) -> R) throws(ALSAError) -> R {
        var mixer: OpaquePointer?
        try check(snd_mixer_open(&mixer, 0), "snd_mixer_open")
        guard let mixer else { throw ALSAError(code: ALSAErrno(rawValue: ENOMEM), operation: "snd_mixer_open") }
        defer { snd_mixer_close(mixer) }
        try check(snd_mixer_attach(mixer, card), "snd_mixer_attach")
        try check(snd_mixer_selem_register(mixer, nil, nil), "snd_mixer_selem_register")
        try check(snd_mixer_load(mixer), "snd_mixer_load")
        return try body(mixer)
    }

    private func captureElement(_ mixer: OpaquePointer) -> OpaquePointer? {
        var element = snd_mixer_first_elem(mixer)
        while let e = element {
            if snd_mixer_selem_is_active(e) != 0, snd_mixer_selem_has_capture_volume(e) != 0 { return e }
            element = snd_mixer_elem_next(e)
        }
        return nil
    }

    func captureVolume(card: String) throws(ALSAError) -> ALSAMixerVolume? {
        try withMixer(card) { mixer throws(ALSAError) -> ALSAMixerVolume? in
            guard let e = captureElement(mixer) else { return nil }
            var low = 0, high = 0, value = 0
            try check(snd_mixer_selem_get_capture_volume_range(e, &low, &high), "snd_mixer_selem_get_capture_volume_range")
            try check(snd_mixer_selem_get_capture_volume(e, SND_MIXER_SCHN_FRONT_LEFT, &value), "snd_mixer_selem_get_capture_volume")
            return ALSAMixerVolume(element: String(cString: snd_mixer_selem_get_name(e)), min: low, max: high, value: value)
        }
    }

    func setCaptureVolume(card: String, value: Int) throws(ALSAError) {
        try withMixer(card) { mixer throws(ALSAError) in
            guard let e = captureElement(mixer) else { throw ALSAError(code: .invalidArgument, operation: "no capture volume on \(card)") }
            try check(snd_mixer_selem_set_capture_volume_all(e, value), "snd_mixer_selem_set_capture_volume_all")
        }
    }

    private func captureSourceElement(_ mixer: OpaquePointer) -> OpaquePointer? {
        var element = snd_mixer_first_elem(mixer)
        while let e = element {
            if snd_mixer_selem_is_active(e) != 0, snd_mixer_selem_is_enumerated(e) != 0, snd_mixer_selem_is_enum_capture(e) != 0 { return e }
            element = snd_mixer_elem_next(e)
        }
        return nil
    }

    func captureSources(card: String) throws(ALSAError) -> ALSACaptureSources? {
        try withMixer(card) { mixer throws(ALSAError) -> ALSACaptureSources? in
            guard let e = captureSourceElement(mixer) else { return nil }
            let count = snd_mixer_selem_get_enum_items(e)
            try check(count, "snd_mixer_selem_get_enum_items")
            var items: [String] = []
            for i in 0..<UInt32(count) {
                var name = [CChar](repeating: 0, count: 64)
                try check(snd_mixer_selem_get_enum_item_name(e, i, name.count - 1, &name), "snd_mixer_selem_get_enum_item_name")
                items.append(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            var selected: UInt32 = 0
            try check(snd_mixer_selem_get_enum_item(e, SND_MIXER_SCHN_FRONT_LEFT, &selected), "snd_mixer_selem_get_enum_item")
            return ALSACaptureSources(element: String(cString: snd_mixer_selem_get_name(e)), items: items, selected: Int(selected))
        }
    }

    func selectCaptureSource(card: String, index: Int) throws(ALSAError) {
        try withMixer(card) { mixer throws(ALSAError) in
            guard let e = captureSourceElement(mixer) else { throw ALSAError(code: .invalidArgument, operation: "no capture source on \(card)") }
            var channel = SND_MIXER_SCHN_FRONT_LEFT
            while channel.rawValue <= SND_MIXER_SCHN_LAST.rawValue {
                if channel == SND_MIXER_SCHN_FRONT_LEFT || snd_mixer_selem_has_capture_channel(e, channel) != 0 {
                    try check(snd_mixer_selem_set_enum_item(e, channel, UInt32(index)), "snd_mixer_selem_set_enum_item")
                }
                channel = snd_mixer_selem_channel_id_t(rawValue: channel.rawValue + 1)
            }
        }
    }
}
