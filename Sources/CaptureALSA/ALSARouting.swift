import CaptureCore
import Foundation

/// The ALSA microphones as audio-session ports: one per capture PCM of each card (snd-aloop's
/// `Loopback` card → `loopback`, a card whose name says USB → `usbAudio`, other cards →
/// `builtInMic`; PCMs of the private configuration → `lineIn`). The input gain is the card's mixer
/// capture volume (the first active simple element that has one), mapped linearly from its raw
/// range onto 0…1; a card without one has no settable gain. ALSA PCMs have no data sources here.
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
            routes.append(AudioInputRoute(uniqueID: pcm.name, name: pcm.localizedName, portType: type, gain: gain))
        }
        return routes
    }

    public func selectDataSource(_ dataSourceID: Int, forInput uniqueID: String) throws(CaptureError) {
        throw .audioRouteUnavailable("\(uniqueID) has no data sources (an ALSA PCM is one microphone)")
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
