import CALSA
import CCaptureShims
import CaptureCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The ALSA microphone backend. Devices are capture PCMs named as ALSA names them:
/// `hw:CARD,DEV,SUB` for every capture subdevice of every sound card (so `hw:Loopback,1,0` pairs
/// with a player on `hw:Loopback,0,0`), plus every PCM defined in `configuration`, a private ALSA
/// configuration (for example a `file` PCM whose `infile` supplies known samples).
///
/// Real-time streams read with hardware timestamps on CLOCK_MONOTONIC, the clock video uses;
/// virtual-pace streams read as fast as the PCM gives samples and stamp PTS from the sample count
/// (useful for PCMs with no clock, like `file` over `null`).
public struct ALSADriver: CaptureDriver {
    /// The prefix of card PCM names (`hw:…`).
    public let scheme = "hw"
    /// Private configuration text (ALSA's syntax), or nil for the system configuration only.
    public let configuration: String?
    private let privateConfig: ALSAConfig?

    public init(configuration: String? = nil) {
        self.configuration = configuration
        privateConfig = configuration.flatMap { try? ALSAConfig(text: $0) }
        ck_alsa_set_quiet(1)
    }

    /// Throws when `configuration` does not parse.
    public func validateConfiguration() throws(CaptureError) {
        if let configuration { _ = try ALSAConfig(text: configuration) }
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        var result: [DeviceDescription] = []
        for name in privateConfig?.pcmNames() ?? [] {
            if let d = ALSAProbe.describe(name: name, localizedName: "\(name) (ALSA PCM)", modelID: "alsa-config", config: privateConfig) {
                result.append(d)
            }
        }
        result += ALSAProbe.cardPCMs()
        return result
    }

    /// Card PCMs (`hw:…`) and the PCMs the private configuration defines (found through a registry
    /// like any other device: the compliance suite caught that they were listed but not reachable).
    public func owns(uniqueID: String) -> Bool {
        uniqueID.hasPrefix(scheme) || privateConfig?.defines(uniqueID) == true
    }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        let config = privateConfig?.defines(uniqueID) == true ? privateConfig : nil
        guard let description = ALSAProbe.describe(name: uniqueID, localizedName: uniqueID, modelID: "alsa", config: config)
                ?? (try? discoverDevices())?.first(where: { $0.uniqueID == uniqueID }) else {
            let code = ALSAProbe.openError(name: uniqueID, config: config)
            if code == EACCES || code == EPERM { throw .deviceAccessDenied(uniqueID) }
            throw .deviceNotFound(uniqueID)
        }
        return ALSADevice(description: description, config: config)
    }
}

/// A private ALSA configuration tree; immutable after loading, freed in `deinit`.
final class ALSAConfig: @unchecked Sendable {
    // Only read after init (libasound's lookups on a loaded tree do not modify it).
    let top: OpaquePointer

    init(text: String) throws(CaptureError) {
        var top: OpaquePointer?
        guard snd_config_top(&top) == 0, let top else { throw .invalidArgument("cannot create an ALSA configuration") }
        var input: OpaquePointer?
        let bytes = Array(text.utf8)
        let opened = bytes.withUnsafeBufferPointer { p in
            p.withMemoryRebound(to: CChar.self) { snd_input_buffer_open(&input, $0.baseAddress, bytes.count) }
        }
        guard opened == 0, let input else {
            snd_config_delete(top)
            throw .invalidArgument("cannot read the ALSA configuration text")
        }
        let loaded = snd_config_load(top, input)
        snd_input_close(input)
        guard loaded == 0 else {
            snd_config_delete(top)
            throw .invalidArgument("the ALSA configuration does not parse: \(String(cString: snd_strerror(loaded)))")
        }
        self.top = top
    }

    deinit { snd_config_delete(top) }

    /// The names under `pcm` (the PCMs the configuration defines).
    func pcmNames() -> [String] {
        var pcm: OpaquePointer?
        guard snd_config_search(top, "pcm", &pcm) == 0, let pcm else { return [] }
        var names: [String] = []
        var it = snd_config_iterator_first(pcm)
        let end = snd_config_iterator_end(pcm)
        while it != end {
            var id: UnsafePointer<CChar>?
            if let entry = snd_config_iterator_entry(it), snd_config_get_id(entry, &id) == 0, let id {
                names.append(String(cString: id))
            }
            it = snd_config_iterator_next(it)
        }
        return names
    }

    func defines(_ name: String) -> Bool { pcmNames().contains(name) }
}

/// Opening PCMs and asking what they can do.
enum ALSAProbe {
    static let sampleFormats: [(AudioStreamFormat.SampleFormat, snd_pcm_format_t)] = [
        (.int16, SND_PCM_FORMAT_S16_LE), (.float32, SND_PCM_FORMAT_FLOAT_LE),
    ]
    static let rates = [48000, 44100, 16000]
    static let channelCounts = [1, 2]

    /// Opens a capture PCM (through the private configuration when given); nil and −errno on failure.
    static func open(name: String, config: ALSAConfig?, mode: Int32) -> (OpaquePointer?, Int32) {
        var pcm: OpaquePointer?
        let r: Int32
        if let config {
            r = snd_pcm_open_lconf(&pcm, name, SND_PCM_STREAM_CAPTURE, mode, config.top)
        } else {
            r = snd_pcm_open(&pcm, name, SND_PCM_STREAM_CAPTURE, mode)
        }
        return r == 0 ? (pcm, 0) : (nil, r)
    }

    static func openError(name: String, config: ALSAConfig?) -> Int32 {
        let (pcm, r) = open(name: name, config: config, mode: Int32(SND_PCM_NONBLOCK))
        if let pcm { snd_pcm_close(pcm) }
        return -r
    }

    /// The audio formats a PCM accepts (S16/float × 48/44.1/16 kHz × mono/stereo); nil if it
    /// cannot be opened (absent or busy) or accepts none of them.
    static func describe(name: String, localizedName: String, modelID: String, config: ALSAConfig?) -> DeviceDescription? {
        let (opened, _) = open(name: name, config: config, mode: Int32(SND_PCM_NONBLOCK))
        guard let pcm = opened else { return nil }
        defer { snd_pcm_close(pcm) }
        var params: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&params) == 0, let params else { return nil }
        defer { snd_pcm_hw_params_free(params) }
        guard snd_pcm_hw_params_any(pcm, params) >= 0 else { return nil }
        _ = snd_pcm_hw_params_set_access(pcm, params, SND_PCM_ACCESS_RW_INTERLEAVED)
        var formats: [DeviceFormat] = []
        for rate in rates where snd_pcm_hw_params_test_rate(pcm, params, UInt32(rate), 0) == 0 {
            for channels in channelCounts where snd_pcm_hw_params_test_channels(pcm, params, UInt32(channels)) == 0 {
                for (sampleFormat, alsa) in sampleFormats where snd_pcm_hw_params_test_format(pcm, params, alsa) == 0 {
                    formats.append(DeviceFormat(formatDescription: .audio(AudioStreamFormat(
                        sampleRate: rate, channelCount: channels, sampleFormat: sampleFormat))))
                }
            }
        }
        guard !formats.isEmpty else { return nil }
        return DeviceDescription(uniqueID: name, localizedName: localizedName, modelID: modelID, mediaType: .audio,
                                 position: .unspecified, formats: formats)
    }

    /// `hw:CARD,DEV,SUB` for every capture subdevice of every card.
    static func cardPCMs() -> [DeviceDescription] {
        var result: [DeviceDescription] = []
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
                    let name = "hw:\(cardID),\(device),\(sub)"
                    if let d = describe(name: name, localizedName: "\(cardName): \(pcmName) (device \(device), subdevice \(sub))",
                                        modelID: "alsa card \(card) \(cardID)", config: nil) {
                        result.append(d)
                    }
                }
            }
        }
        return result
    }
}

/// An opened microphone: its description; each stream opens the PCM itself.
final class ALSADevice: DriverDevice {
    let description: DeviceDescription
    let config: ALSAConfig?

    init(description: DeviceDescription, config: ALSAConfig?) {
        self.description = description
        self.config = config
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        guard let format = configuration.format.audioFormat, description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(description.uniqueID)")
        }
        return ALSAStream(name: description.uniqueID, config: config, format: format, pace: configuration.pace)
    }
}
