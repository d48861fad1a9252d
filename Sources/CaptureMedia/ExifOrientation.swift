import CaptureCore

/// EXIF orientation for JPEG stills: the value (1…8) that tells a viewer how to turn the stored
/// pixels for display, and the small APP1 segment that carries it. Metadata only — the image
/// itself is encoded by libturbojpeg.
public enum ExifOrientation {
    /// The tag for a clockwise display rotation (0/90/180/270) and optional left-right mirroring.
    public static func value(rotation: Int, mirrored: Bool) -> UInt16 {
        switch (rotation, mirrored) {
        case (90, false): return 6
        case (180, false): return 3
        case (270, false): return 8
        case (0, true): return 2
        case (90, true): return 7
        case (180, true): return 4
        case (270, true): return 5
        default: return 1
        }
    }

    /// A JPEG with an APP1 Exif segment holding only the orientation, placed right after SOI.
    public static func inserting(_ orientation: UInt16, into jpeg: [UInt8]) throws(CaptureError) -> [UInt8] {
        guard jpeg.count > 2, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else { throw .invalidArgument("not a JPEG (no SOI marker)") }
        // TIFF, big-endian: header, IFD0 with one entry (0x0112 Orientation, SHORT, 1), no next IFD.
        var tiff: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A, 0x00, 0x00, 0x00, 0x08]
        tiff += [0x00, 0x01]
        tiff += [0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, UInt8(orientation >> 8), UInt8(orientation & 0xFF), 0x00, 0x00]
        tiff += [0x00, 0x00, 0x00, 0x00]
        let payload: [UInt8] = Array("Exif".utf8) + [0x00, 0x00] + tiff
        let length = payload.count + 2
        let segment: [UInt8] = [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
        return [0xFF, 0xD8] + segment + jpeg[2...]
    }

    /// Reads the orientation back from a JPEG's Exif segment (nil when there is none).
    public static func read(from jpeg: [UInt8]) -> UInt16? {
        var i = 2
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF {
            let marker = jpeg[i + 1]
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if marker == 0xE1, i + 4 + 6 <= jpeg.count, Array(jpeg[(i + 4)..<(i + 8)]) == Array("Exif".utf8) {
                let tiff = i + 10
                guard tiff + 8 <= jpeg.count else { return nil }
                let big = jpeg[tiff] == 0x4D
                func u16(_ at: Int) -> Int { big ? Int(jpeg[at]) << 8 | Int(jpeg[at + 1]) : Int(jpeg[at + 1]) << 8 | Int(jpeg[at]) }
                func u32(_ at: Int) -> Int { big ? u16(at) << 16 | u16(at + 2) : u16(at + 2) << 16 | u16(at) }
                let ifd = tiff + u32(tiff + 4)
                guard ifd + 2 <= jpeg.count else { return nil }
                for entry in 0..<u16(ifd) {
                    let e = ifd + 2 + entry * 12
                    guard e + 12 <= jpeg.count else { return nil }
                    if u16(e) == 0x0112 { return UInt16(u16(e + 8)) }
                }
                return nil
            }
            if marker == 0xDA { return nil }
            i += 2 + length
        }
        return nil
    }
}
