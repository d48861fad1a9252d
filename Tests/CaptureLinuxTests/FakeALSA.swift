import CaptureCore
import Foundation
@testable import CaptureALSA

/// A fake sound card for the ALSA backend (what `FakeCamera` is for V4L2): one capture PCM,
/// `hw:Fake,0,0` (48 kHz, mono or stereo, S16 or float), that reads a script of sample blocks
/// with their hardware timestamps and errors, records every call in a trace, and fails any call
/// with an injected errno.
final class FakeALSA: ALSASystem {
    static let pcmName = "hw:Fake,0,0"
    static let rate = 48_000

    /// What one `snd_pcm_readi` returns.
    enum Item: Sendable {
        /// `frames` frames whose every sample is `value`, the first captured at `startNs` on
        /// CLOCK_MONOTONIC (nil: the PCM stamps nothing, like a `file` PCM).
        case block(startNs: Int64?, frames: Int, value: Int16)
        /// The read fails with this errno (EPIPE: an overrun; ENODEV: unplugged).
        case fail(ALSAErrno)
        /// The device goes away during the read: it fails with this errno and the PCM's state is
        /// DISCONNECTED from then on (reads fail with ENODEV).
        case unplug(ALSAErrno)
    }

    /// The calls errors can be injected into.
    enum Call: Hashable, Sendable {
        case open, hwParams, swParams, prepare, start, wait, status, recover
    }

    struct State {
        var script: [Item] = []
        /// Endless mode: when the script is empty, reads produce blocks of this many frames,
        /// stamped from `liveStartNs` by their sample count (a card with a perfect clock).
        var endless: (frames: Int, value: Int16)?
        var liveStartNs: Int64 = 1_000_000_000
        var liveFrames: Int64 = 0
        var injected: [Call: [ALSAError]] = [:]
        var trace: [String] = []
        var open: [UInt: String] = [:]
        var nextHandle: UInt = 0x1000
        var configured: ALSAHardwareRequest?
        var status = ALSAStatus(timestampNanoseconds: nil, delayFrames: 0)
        var unplugged = false
        var xrun = false
        // Playback and mixer
        /// Every frame written to a playback PCM, as float (S16 converted), interleaved.
        var played: [Float] = []
        /// The outcomes of the next writes: nil = accepted, an errno = the write fails with it.
        var writeScript: [ALSAErrno?] = []
        var playbackFormat: ALSAHardwareRequest?
        var playbackHandles: Set<UInt> = []
        /// The card's mixer capture volume (nil: the card has none).
        var mixer: ALSAMixerVolume? = ALSAMixerVolume(element: "Capture", min: 0, max: 64, value: 48)
        /// Whether the playback PCM takes float32 (else only S16).
        var playbackTakesFloat = true
        /// The card's capture-source selector (nil: none).
        var captureSources: ALSACaptureSources?
    }

    let state = Locked(State())

    init(script: [Item] = []) { state.withLock { $0.script = script } }

    /// A card that never runs dry: after the script, contiguous blocks stamped by their count
    /// from 1 s (reads return at once: no real-time pacing).
    static func endless(frames: Int = 480, value: Int16 = 1000) -> FakeALSA {
        let fake = FakeALSA()
        fake.state.withLock { $0.endless = (frames, value) }
        return fake
    }

    /// Contiguous blocks of `frames` frames from `startNs`, sample values 1, 2, 3, …
    static func blocks(_ count: Int, frames: Int = 480, from startNs: Int64, firstValue: Int16 = 1) -> [Item] {
        (0..<count).map { i in
            .block(startNs: startNs + Int64(i * frames) * 1_000_000_000 / Int64(rate), frames: frames, value: firstValue + Int16(i))
        }
    }

    /// The next call of that kind fails with `code` (named `operation`, the backend's name for the step).
    func inject(_ call: Call, _ code: ALSAErrno, operation: String? = nil) {
        let names: [Call: String] = [.open: "snd_pcm_open", .hwParams: "snd_pcm_hw_params", .swParams: "snd_pcm_sw_params",
                                     .prepare: "snd_pcm_prepare", .start: "snd_pcm_start", .wait: "snd_pcm_wait",
                                     .status: "snd_pcm_status", .recover: "snd_pcm_recover"]
        state.withLock { $0.injected[call, default: []].append(ALSAError(code: code, operation: operation ?? names[call]!)) }
    }

    /// Appends to the script.
    func feed(_ items: [Item]) { state.withLock { $0.script += items } }

    /// The device goes away: reads fail with ENODEV and the state is DISCONNECTED.
    func unplug() { state.withLock { $0.unplugged = true } }

    var trace: [String] { state.withLock { $0.trace } }
    /// The trace without the polling calls (readi, wait, status, state).
    var controlTrace: [String] {
        trace.filter { !$0.hasPrefix("readi") && !$0.hasPrefix("wait") && !$0.hasPrefix("status") && !$0.hasPrefix("state") }
    }
    var openHandles: Int { state.withLock { $0.open.count } }
    func clearTrace() { state.withLock { $0.trace = [] } }

    static func name(_ code: ALSAErrno) -> String {
        let names: [Int32: String] = [EPIPE: "EPIPE", ENODEV: "ENODEV", EBUSY: "EBUSY", EINVAL: "EINVAL", EAGAIN: "EAGAIN",
                                      ESTRPIPE: "ESTRPIPE", EIO: "EIO", EACCES: "EACCES", ENOENT: "ENOENT", EINTR: "EINTR"]
        return names[code.rawValue] ?? "errno \(code.rawValue)"
    }

    /// Records the call; throws what was injected for it.
    private func enter(_ s: inout State, _ call: Call?, _ line: String) throws(ALSAError) {
        s.trace.append(line)
        if let call, var queue = s.injected[call], !queue.isEmpty {
            let error = queue.removeFirst()
            s.injected[call] = queue
            s.trace[s.trace.count - 1] += " → \(Self.name(error.code))"
            throw error
        }
    }

    // MARK: ALSASystem

    func cardCapturePCMs() -> [ALSACardPCM] {
        [ALSACardPCM(name: Self.pcmName, localizedName: "Fake Card: Fake PCM (device 0, subdevice 0)", modelID: "alsa card 0 Fake")]
    }

    func open(_ name: String, config: ALSAConfig?) throws(ALSAError) -> ALSAPCMHandle {
        try state.withLock { s throws(ALSAError) in
            try enter(&s, .open, "open \(name)")
            guard name == Self.pcmName else { throw ALSAError(code: .noSuchPCM, operation: "snd_pcm_open") }
            s.nextHandle += 1
            s.open[s.nextHandle] = name
            return ALSAPCMHandle(rawValue: s.nextHandle)
        }
    }

    func supports(_ pcm: ALSAPCMHandle, format: ALSASampleFormat, channels: Int, rate: Int) -> Bool {
        let floatOK = state.withLock { !$0.playbackHandles.contains(pcm.rawValue) || $0.playbackTakesFloat || format == .s16 }
        return rate == Self.rate && (1...2).contains(channels) && floatOK
    }

    func setHardwareParameters(_ pcm: ALSAPCMHandle, _ request: ALSAHardwareRequest) throws(ALSAError) -> ALSAHardwareGrant {
        try state.withLock { s throws(ALSAError) in
            try enter(&s, .hwParams, "hw_params \(request.rate) Hz \(request.channels) ch \(request.format) period \(request.periodFrames)")
            guard request.rate == Self.rate else { throw ALSAError(code: .invalidArgument, operation: "snd_pcm_hw_params_set_rate") }
            if s.playbackHandles.contains(pcm.rawValue) { s.playbackFormat = request } else { s.configured = request }
            return ALSAHardwareGrant(rate: request.rate, periodFrames: request.periodFrames, bufferFrames: request.bufferFrames)
        }
    }

    func setSoftwareParameters(_ pcm: ALSAPCMHandle, _ request: ALSASoftwareRequest) throws(ALSAError) {
        try state.withLock { s throws(ALSAError) in try enter(&s, .swParams, "sw_params avail_min \(request.availMin)") }
    }

    func prepare(_ pcm: ALSAPCMHandle) throws(ALSAError) {
        try state.withLock { s throws(ALSAError) in try enter(&s, .prepare, "prepare") }
    }

    func start(_ pcm: ALSAPCMHandle) throws(ALSAError) {
        try state.withLock { s throws(ALSAError) in
            try enter(&s, .start, "start")
            s.xrun = false
        }
    }

    func read(_ pcm: ALSAPCMHandle, into buffer: UnsafeMutableRawBufferPointer, frames: Int) throws(ALSAError) -> Int {
        let block: (frames: Int, value: Int16, startNs: Int64?) = try state.withLock { s throws(ALSAError) in
            if s.unplugged {
                s.trace.append("readi \(frames) → ENODEV")
                throw ALSAError(code: .noDevice, operation: "snd_pcm_readi")
            }
            if s.script.isEmpty, let endless = s.endless {
                let start = s.liveStartNs + s.liveFrames * 1_000_000_000 / Int64(Self.rate)
                s.script.append(.block(startNs: start, frames: endless.frames, value: endless.value))
                s.liveFrames += Int64(endless.frames)
            }
            guard !s.script.isEmpty else {
                s.trace.append("readi \(frames) → EAGAIN")
                throw ALSAError(code: .wouldBlock, operation: "snd_pcm_readi")
            }
            switch s.script.removeFirst() {
            case .unplug(let code):
                s.unplugged = true
                s.trace.append("readi \(frames) → \(Self.name(code))")
                throw ALSAError(code: code, operation: "snd_pcm_readi")
            case .fail(let code):
                s.trace.append("readi \(frames) → \(Self.name(code))")
                if code == .brokenPipe { s.xrun = true }
                throw ALSAError(code: code, operation: "snd_pcm_readi")
            case .block(let startNs, let available, let value):
                let n = min(available, frames)
                if n < available {   // the rest stays for the next read
                    let rest = startNs.map { $0 + Int64(n) * 1_000_000_000 / Int64(Self.rate) }
                    s.script.insert(.block(startNs: rest, frames: available - n, value: value), at: 0)
                }
                s.trace.append("readi \(frames) → \(n)")
                // The status after a read: stamped at the end of the block, nothing left in the buffer.
                s.status = ALSAStatus(timestampNanoseconds: startNs.map { $0 + Int64(n) * 1_000_000_000 / Int64(Self.rate) },
                                      delayFrames: 0)
                return (n, value, startNs)
            }
        }
        let channels = state.withLock { $0.configured?.channels ?? 1 }
        let format = state.withLock { $0.configured?.format ?? .s16 }
        let count = block.frames * channels
        if format == .s16 {
            let samples = buffer.bindMemory(to: Int16.self)
            for i in 0..<count { samples[i] = block.value }
        } else {
            let samples = buffer.bindMemory(to: Float.self)
            for i in 0..<count { samples[i] = Float(block.value) / 32_768 }
        }
        return block.frames
    }

    func wait(_ pcm: ALSAPCMHandle, timeoutMilliseconds: Int32) throws(ALSAError) -> Bool {
        try state.withLock { s throws(ALSAError) in try enter(&s, .wait, "wait") }
        // Nothing scripted: let time pass (briefly) the way a blocked wait would.
        usleep(2_000)
        return state.withLock { !$0.script.isEmpty }
    }

    func status(_ pcm: ALSAPCMHandle) throws(ALSAError) -> ALSAStatus {
        try state.withLock { s throws(ALSAError) in
            try enter(&s, .status, "status")
            return s.status
        }
    }

    func state(_ pcm: ALSAPCMHandle) -> ALSAPCMState {
        state.withLock { s in
            s.trace.append("state")
            return s.unplugged ? .disconnected : s.xrun ? .xrun : .other
        }
    }

    func recover(_ pcm: ALSAPCMHandle, from code: ALSAErrno, silent: Bool) throws(ALSAError) {
        try state.withLock { s throws(ALSAError) in
            try enter(&s, .recover, "recover \(Self.name(code))")
            s.xrun = false
        }
    }

    func drop(_ pcm: ALSAPCMHandle) { state.withLock { $0.trace.append("drop") } }

    func close(_ pcm: ALSAPCMHandle) {
        state.withLock { s in
            s.trace.append("close")
            s.open[pcm.rawValue] = nil
            s.playbackHandles.remove(pcm.rawValue)
        }
    }

    // MARK: Playback and mixer

    /// The next writes fail with these errnos in turn (EPIPE: an underrun; ENODEV: unplugged).
    func injectWrites(_ outcomes: [ALSAErrno?]) { state.withLock { $0.writeScript += outcomes } }

    var played: [Float] { state.withLock { $0.played } }

    func openPlayback(_ name: String, config: ALSAConfig?) throws(ALSAError) -> ALSAPCMHandle {
        try state.withLock { s throws(ALSAError) in
            try enter(&s, .open, "open playback \(name)")
            if s.unplugged { throw ALSAError(code: .noDevice, operation: "snd_pcm_open") }
            guard name == Self.pcmName else { throw ALSAError(code: .noSuchPCM, operation: "snd_pcm_open") }
            s.nextHandle += 1
            s.open[s.nextHandle] = name
            s.playbackHandles.insert(s.nextHandle)
            return ALSAPCMHandle(rawValue: s.nextHandle)
        }
    }

    func write(_ pcm: ALSAPCMHandle, from buffer: UnsafeRawBufferPointer, frames: Int) throws(ALSAError) -> Int {
        try state.withLock { s throws(ALSAError) in
            if s.unplugged {
                s.trace.append("writei \(frames) → ENODEV")
                throw ALSAError(code: .noDevice, operation: "snd_pcm_writei")
            }
            if !s.writeScript.isEmpty, let code = s.writeScript.removeFirst() {
                s.trace.append("writei \(frames) → \(Self.name(code))")
                if code == .noDevice { s.unplugged = true }
                if code == .brokenPipe { s.xrun = true }
                throw ALSAError(code: code, operation: "snd_pcm_writei")
            }
            guard let format = s.playbackFormat else { throw ALSAError(code: .invalidArgument, operation: "snd_pcm_writei before hw_params") }
            let count = frames * format.channels
            if format.format == .float32 {
                s.played += Array(buffer.bindMemory(to: Float.self).prefix(count))
            } else {
                s.played += buffer.bindMemory(to: Int16.self).prefix(count).map { Float($0) / 32767 }
            }
            s.trace.append("writei \(frames) → \(frames)")
            return frames
        }
    }

    func drain(_ pcm: ALSAPCMHandle) { state.withLock { $0.trace.append("drain") } }

    func captureVolume(card: String) throws(ALSAError) -> ALSAMixerVolume? {
        state.withLock { s in
            s.trace.append("mixer \(card) get")
            return card == "hw:Fake" ? s.mixer : nil
        }
    }

    func captureSources(card: String) throws(ALSAError) -> ALSACaptureSources? {
        state.withLock { card == "hw:Fake" ? $0.captureSources : nil }
    }

    func selectCaptureSource(card: String, index: Int) throws(ALSAError) {
        try state.withLock { s throws(ALSAError) in
            s.trace.append("mixer \(card) source \(index)")
            guard card == "hw:Fake", let sources = s.captureSources, sources.items.indices.contains(index) else {
                throw ALSAError(code: .invalidArgument, operation: "snd_mixer_selem_set_enum_item")
            }
            s.captureSources?.selected = index
        }
    }

    func setCaptureVolume(card: String, value: Int) throws(ALSAError) {
        try state.withLock { s throws(ALSAError) in
            s.trace.append("mixer \(card) set \(value)")
            guard card == "hw:Fake", s.mixer != nil else { throw ALSAError(code: .invalidArgument, operation: "no capture volume") }
            s.mixer?.value = value
        }
    }
}
