import CaptureCore
import Foundation

/// The ALSA microphones as audio-session ports: one per capture PCM of each card (snd-aloop's
/// `Loopback` card → `loopback`, a card whose name says USB → `usbAudio`, other cards →
/// `builtInMic`; PCMs of the private configuration → `lineIn`). The input gain is the card's mixer
/// capture volume (the first active simple element that has one), mapped linearly from its raw
/// range onto 0…1; a card without one has no settable gain. The data sources are the items of the
/// card's capture-source selector (an enumerated capture element: "Mic", "Line", "Front Mic", …).
extension ALSADriver: AudioRoutingDriver {
    public func audioInputRoutes() -> [AudioInputRoute] {
        var routes: [AudioInputRoute] = []
        for name in privateConfigPCMNames {
            routes.append(AudioInputRoute(uniqueID: name, name: "\(name) (ALSA PCM)", portType: .lineIn))
        }
        for pcm in probe.system.cardCapturePCMs() {
            let card = Self.cardName(pcm.name)
            let type: AudioSessionPortType = card == "hw:Loopback" || pcm.modelID.hasSuffix(" Loopback") ? .loopback
                : pcm.localizedName.localizedCaseInsensitiveContains("usb") ? .usbAudio : .builtInMic
            var gain: Float?
            if let volume = try? probe.system.captureVolume(card: card), volume.max > volume.min {
                gain = Float(volume.value - volume.min) / Float(volume.max - volume.min)
            }
            var sources: [AudioSessionDataSourceDescription] = []
            var selected: Int?
            if let selector = try? probe.system.captureSources(card: card) {
                sources = selector.items.enumerated().map { i, name in
                    AudioSessionDataSourceDescription(dataSourceID: i, dataSourceName: name, orientation: Self.orientation(of: name))
                }
                selected = selector.selected
            }
            routes.append(AudioInputRoute(uniqueID: pcm.name, name: pcm.localizedName, portType: type, dataSources: sources,
                                          selectedDataSourceID: selected, gain: gain))
        }
        return routes
    }

    /// Selects the card's capture source (its mixer's enumerated capture element) by index.
    public func selectDataSource(_ dataSourceID: Int, forInput uniqueID: String) throws(CaptureError) {
        let card = Self.cardName(uniqueID)
        guard let selector = try? probe.system.captureSources(card: card), selector.items.indices.contains(dataSourceID) else {
            throw .audioRouteUnavailable("\(uniqueID) has no capture source \(dataSourceID)")
        }
        do { try probe.system.selectCaptureSource(card: card, index: dataSourceID) } catch {
            throw .deviceStartFailed(device: card, reason: "mixer: \(error.operation): \(error.code)")
        }
    }

    /// "Front Mic" → front, "Rear Mic" → back, …
    static func orientation(of name: String) -> AudioSessionOrientation? {
        let lower = name.lowercased()
        if lower.contains("front") { return .front }
        if lower.contains("rear") || lower.contains("back") { return .back }
        if lower.contains("top") { return .top }
        if lower.contains("bottom") { return .bottom }
        return nil
    }

    public func setInputGain(_ gain: Float, forInput uniqueID: String) throws(CaptureError) {
        guard gain.isFinite, (0...1).contains(gain) else { throw .valueOutOfRange(control: "inputGain", value: "\(gain)", allowed: "0…1") }
        let card = Self.cardName(uniqueID)
        do {
            guard let volume = try probe.system.captureVolume(card: card), volume.max > volume.min else {
                throw CaptureError.audioRouteUnavailable("\(card) has no mixer capture volume")
            }
            let value = volume.min + Int((gain * Float(volume.max - volume.min)).rounded())
            try probe.system.setCaptureVolume(card: card, value: value)
        } catch let error as CaptureError {
            throw error
        } catch let error as ALSAError {
            throw .deviceStartFailed(device: card, reason: "mixer: \(error.operation): \(error.code)")
        } catch {
            throw .deviceStartFailed(device: card, reason: "mixer: \(error)")
        }
    }

    /// `hw:CARD,DEV,SUB` → `hw:CARD` (the mixer's name for the card).
    static func cardName(_ pcm: String) -> String {
        String(pcm.split(separator: ",", maxSplits: 1).first ?? Substring(pcm))
    }

    /// A playback PCM on this driver's libasound (and its event center), for `AudioPlayer` and the
    /// virtual microphone. `name` may also be a PCM of the private configuration.
    public func playbackDevice(name: String, format: AudioStreamFormat = AudioStreamFormat(sampleRate: 48_000, channelCount: 2, sampleFormat: .float32),
                               cardSampleFormat: AudioStreamFormat.SampleFormat? = nil) -> ALSAPlaybackDevice {
        ALSAPlaybackDevice(name: name, format: format, config: privateConfig?.defines(name) == true ? privateConfig : nil,
                           system: probe.system, events: events, cardSampleFormat: cardSampleFormat)
    }
}
