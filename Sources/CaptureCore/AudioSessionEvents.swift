import Foundation

// MARK: - Notifications

public enum AudioSessionRouteChangeReason: String, Sendable, Hashable {
    /// A device was plugged in (a USB microphone, headphones).
    case newDeviceAvailable
    /// The device in use went away (unplugged).
    case oldDeviceUnavailable
    case categoryChange
    /// The app changed the route (preferred input, output override).
    case override
}

public enum AudioSessionInterruption: Sendable, Hashable {
    /// Another session that does not mix took the audio: this one is no longer active.
    case began
    /// It gave the audio back; `shouldResume` as AVAudioSession.InterruptionOptions.shouldResume.
    case ended(shouldResume: Bool)
}

public enum AudioSessionEvent: Sendable, Hashable {
    case routeChange(reason: AudioSessionRouteChangeReason, previousRoute: AudioSessionRouteDescription)
    case interruption(AudioSessionInterruption)
}

/// Which output `overrideOutputAudioPort` forces.
public enum AudioSessionPortOverride: String, Sendable, Hashable {
    case none, speaker
}
