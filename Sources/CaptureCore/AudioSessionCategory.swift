import Foundation

// MARK: - Categories

/// What an app does with audio (AVAudioSession.Category), and what each category allows — the
/// table of seed 002:
///
/// | category        | records | plays | mixes with others | silenced by the switch |
/// |-----------------|---------|-------|-------------------|------------------------|
/// | `ambient`       | no      | yes   | yes               | yes                    |
/// | `soloAmbient`   | no      | yes   | no                | yes                    |
/// | `playback`      | no      | yes   | no                | no                     |
/// | `record`        | yes     | no    | no                | no                     |
/// | `playAndRecord` | yes     | yes   | no                | no                     |
/// | `multiRoute`    | yes     | yes   | no                | no                     |
public enum AudioSessionCategory: String, Sendable, Hashable, CaseIterable, Codable {
    case ambient, soloAmbient, playback, record, playAndRecord, multiRoute

    /// Whether a session with an audio input, or an `AudioRecorder`, may record.
    public var allowsRecording: Bool { self == .record || self == .playAndRecord || self == .multiRoute }
    /// Whether an `AudioPlayer` may play.
    public var allowsPlayback: Bool { self != .record }
    /// Whether activating it leaves other active sessions playing (otherwise they are interrupted).
    public var mixesWithOthers: Bool { self == .ambient }
    /// Whether the (simulated) silent switch mutes it.
    public var isSilencedBySwitch: Bool { self == .ambient || self == .soloAmbient }

    static func names(_ filter: (AudioSessionCategory) -> Bool) -> String {
        allCases.filter(filter).map(\.rawValue).joined(separator: ", ")
    }
}
