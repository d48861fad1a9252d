import CaptureCore
import CaptureDetection
import Foundation

/// What a metadata output can find (AVMetadataObject.ObjectType). Raw values are AVFoundation's
/// type identifiers; `name` is the short name the command line uses (`qr`, `ean13`, `face`…).
public struct MetadataObjectType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let qr = MetadataObjectType(rawValue: "org.iso.QRCode")
    public static let ean13 = MetadataObjectType(rawValue: "org.gs1.EAN-13")
    public static let ean8 = MetadataObjectType(rawValue: "org.gs1.EAN-8")
    public static let upce = MetadataObjectType(rawValue: "org.gs1.UPC-E")
    public static let code39 = MetadataObjectType(rawValue: "org.iso.Code39")
    public static let code93 = MetadataObjectType(rawValue: "com.intermec.Code93")
    public static let code128 = MetadataObjectType(rawValue: "org.iso.Code128")
    public static let interleaved2of5 = MetadataObjectType(rawValue: "org.ansi.Interleaved2of5")
    public static let codabar = MetadataObjectType(rawValue: "Codabar")
    public static let gs1DataBar = MetadataObjectType(rawValue: "org.gs1.GS1DataBar")
    public static let face = MetadataObjectType(rawValue: "face")

    /// Every machine-readable code type, in ZBar's terms.
    static let codes: [(MetadataObjectType, String, [CodeSymbology])] = [
        (.qr, "qr", [.qr]), (.ean13, "ean13", [.ean13, .upca]), (.ean8, "ean8", [.ean8]), (.upce, "upce", [.upce]),
        (.code39, "code39", [.code39]), (.code93, "code93", [.code93]), (.code128, "code128", [.code128]),
        (.interleaved2of5, "itf", [.interleaved2of5]), (.codabar, "codabar", [.codabar]), (.gs1DataBar, "databar", [.dataBar]),
    ]

    /// The short name (`qr`, `ean13`, `ean8`, `upce`, `code39`, `code93`, `code128`, `itf`,
    /// `codabar`, `databar`, `face`).
    public var name: String {
        if self == .face { return "face" }
        return Self.codes.first { $0.0 == self }?.1 ?? rawValue
    }

    /// A type by short name or raw value.
    public init?(name: String) {
        if name == "face" || name == Self.face.rawValue { self = .face; return }
        guard let match = Self.codes.first(where: { $0.1 == name.lowercased() || $0.0.rawValue == name }) else { return nil }
        self = match.0
    }

    public var isMachineReadableCode: Bool { self != .face }

    public var description: String { name }
}

/// One object a metadata output found in one frame (AVMetadataObject and its subclasses in one
/// value: codes carry `stringValue` and `corners`, faces `faceID` and the angles).
public struct MetadataObject: Sendable, Equatable {
    public var type: MetadataObjectType
    /// The PTS of the frame it was found in, and that frame's duration.
    public var time: MediaTime
    public var duration: MediaTime
    /// Normalised (0…1, origin top-left) in the camera's native orientation (unrotated,
    /// unmirrored), like AVFoundation's; see `MetadataOutput.transformedMetadataObject`.
    public var bounds: CGRect
    /// Codes: the decoded text. Faces: nil.
    public var stringValue: String?
    /// Codes: the corners (normalised), clockwise from the code's top-left as printed (ZBar's
    /// location polygon). Faces: the box's corners.
    public var corners: [CGPoint]
    /// Faces: stable while the same face stays in view.
    public var faceID: Int?
    /// The cascade detector gives neither angle: false, 0.
    public var hasRollAngle = false
    public var rollAngle = 0.0
    public var hasYawAngle = false
    public var yawAngle = 0.0

    public init(type: MetadataObjectType, time: MediaTime, duration: MediaTime, bounds: CGRect, stringValue: String? = nil,
                corners: [CGPoint] = [], faceID: Int? = nil) {
        self.type = type
        self.time = time
        self.duration = duration
        self.bounds = bounds
        self.stringValue = stringValue
        self.corners = corners
        self.faceID = faceID
    }
}
