import CALSA
import CCaptureShims
import CaptureCore
import Foundation
import Logging
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
public struct ALSADriver: EventReportingDriver {
    /// The prefix of card PCM names (`hw:…`).
    public let scheme = "hw"
    /// This driver instance's center for overruns and unplugs.
    public let events = DeviceEventCenter()
    /// Private configuration text (ALSA's syntax), or nil for the system configuration only.
    public let configuration: String?
    let privateConfig: ALSAConfig?
    let probe: ALSAProbe
    var privateConfigPCMNames: [String] { privateConfig?.pcmNames() ?? [] }

    public init(configuration: String? = nil) {
        self.init(configuration: configuration, system: LinuxALSASystem())
    }

    /// A driver over another `ALSASystem` (host tests stand a fake sound card in for libasound).
    init(configuration: String? = nil, system: any ALSASystem) {
        self.configuration = configuration
        privateConfig = configuration.flatMap { try? ALSAConfig(text: $0) }
        probe = ALSAProbe(system: system)
        _ = ALSALogRouting.installed
    }

    /// Throws when `configuration` does not parse.
    public func validateConfiguration() throws(CaptureError) {
        if let configuration { _ = try ALSAConfig(text: configuration) }
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        var result: [DeviceDescription] = []
        for name in privateConfig?.pcmNames() ?? [] {
            if let d = probe.describe(name: name, localizedName: "\(name) (ALSA PCM)", modelID: "alsa-config", config: privateConfig) {
                result.append(d)
            }
        }
        result += probe.cardPCMs()
        return result
    }

    /// Card PCMs (`hw:…`) and the PCMs the private configuration defines (found through a registry
    /// like any other device: the compliance suite caught that they were listed but not reachable).
    public func owns(uniqueID: String) -> Bool {
        uniqueID.hasPrefix(scheme) || privateConfig?.defines(uniqueID) == true
    }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        let config = privateConfig?.defines(uniqueID) == true ? privateConfig : nil
        guard let description = probe.describe(name: uniqueID, localizedName: uniqueID, modelID: "alsa", config: config)
                ?? (try? discoverDevices())?.first(where: { $0.uniqueID == uniqueID }) else {
            let code = probe.openError(name: uniqueID, config: config)
            if code == .accessDenied || code == .notPermitted { throw .deviceAccessDenied(uniqueID) }
            throw .deviceNotFound(uniqueID)
        }
        return ALSADevice(description: description, config: config, system: probe.system, events: events)
    }
}

/// A private ALSA configuration tree; immutable after loading, freed in `deinit`.
final class ALSAConfig: Sendable {
    /// Only read after init, one caller at a time (libasound does not promise that lookups on a
    /// shared tree are thread-safe; opens and listings are rare, so the lock costs nothing).
    private let top: Locked<OpaquePointer>

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
        self.top = Locked(top)
    }

    deinit { top.withLock { _ = snd_config_delete($0) } }

    /// `snd_pcm_open_lconf` on this tree, holding its lock: the status and the PCM opened.
    func openPCM(_ name: String, _ stream: snd_pcm_stream_t, mode: Int32) -> (status: Int32, pcm: ALSAPCMHandle?) {
        top.withLock { top in
            var pcm: OpaquePointer?
            let status = snd_pcm_open_lconf(&pcm, name, stream, mode, top)
            return (status, pcm.map { ALSAPCMHandle(rawValue: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer($0)))) })
        }
    }

    /// The names under `pcm` (the PCMs the configuration defines).
    func pcmNames() -> [String] {
        top.withLock { Self.pcmNames(in: $0) }
    }

    private static func pcmNames(in top: OpaquePointer) -> [String] {
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

/// Opening PCMs and asking what they can do, through an `ALSASystem`.
struct ALSAProbe {
    static let rates = [48000, 44100, 16000]
    static let channelCounts = [1, 2]

    let system: any ALSASystem

    /// The errno opening a capture PCM fails with (0 when it opens).
    func openError(name: String, config: ALSAConfig?) -> ALSAErrno? {
        do {
            let pcm = try system.open(name, config: config)
            system.close(pcm)
            return nil
        } catch {
            return error.code
        }
    }

    /// The audio formats a PCM accepts (S16/float × 48/44.1/16 kHz × mono/stereo); nil if it
    /// cannot be opened (absent or busy) or accepts none of them.
    func describe(name: String, localizedName: String, modelID: String, config: ALSAConfig?) -> DeviceDescription? {
        guard let pcm = try? system.open(name, config: config) else { return nil }
        defer { system.close(pcm) }
        var formats: [DeviceFormat] = []
        for rate in Self.rates {
            for channels in Self.channelCounts {
                for sampleFormat in ALSASampleFormat.allCases
                where system.supports(pcm, format: sampleFormat, channels: channels, rate: rate) {
                    formats.append(DeviceFormat(formatDescription: .audio(AudioStreamFormat(
                        sampleRate: rate, channelCount: channels, sampleFormat: sampleFormat.sampleFormat))))
                }
            }
        }
        guard !formats.isEmpty else { return nil }
        return DeviceDescription(uniqueID: name, localizedName: localizedName, modelID: modelID, mediaType: .audio,
                                 position: .unspecified, formats: formats)
    }

    /// `hw:CARD,DEV,SUB` for every capture subdevice of every card that takes one of the formats.
    func cardPCMs() -> [DeviceDescription] {
        system.cardCapturePCMs().compactMap { describe(name: $0.name, localizedName: $0.localizedName, modelID: $0.modelID, config: nil) }
    }
}

/// An opened microphone: its description; each stream opens the PCM itself.
final class ALSADevice: DriverDevice {
    let description: DeviceDescription
    let config: ALSAConfig?
    let system: any ALSASystem
    let events: DeviceEventCenter

    init(description: DeviceDescription, config: ALSAConfig?, system: any ALSASystem, events: DeviceEventCenter) {
        self.description = description
        self.config = config
        self.system = system
        self.events = events
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        guard let format = configuration.format.audioFormat, description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(description.uniqueID)")
        }
        return ALSAStream(name: description.uniqueID, config: config, format: format, pace: configuration.pace, system: system,
                          events: events)
    }
}

/// ALSA's error handler → the `capturekit.alsa` logger at `notice` (every failure it describes also
/// returns an error code that CaptureKit turns into a `CaptureError`).
enum ALSALogRouting {
    static let installed: Void = {
        ck_log_route_alsa { _, line in
            guard let line else { return }
            CaptureLogging.logger(.alsa).notice("\(String(cString: line))")
        }
    }()
}
