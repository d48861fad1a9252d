/// The kind of media a device, port or track carries (AVMediaType).
public enum MediaType: String, Sendable, Hashable, Codable, CaseIterable {
    case video
    case audio
}
