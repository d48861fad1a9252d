import ArgumentParser
import CaptureKit
import Foundation

struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices", abstract: "List capture devices and their formats.")

    @Flag(help: "Print the list as JSON.")
    var json = false

    struct DeviceInfo: Codable {
        struct Format: Codable {
            /// What `capture formats` calls it: NV12 shows its range (`420v` video, `420f` full).
            var name: String?
            var pixelFormat: String?
            var fullRange: Bool?
            var width: Int?
            var height: Int?
            var frameRates: [String]?
            var sampleRate: Int?
            var channels: Int?
            var sampleFormat: String?
        }
        var uniqueID: String
        var name: String
        var mediaType: String
        var position: String
        var formats: [Format]
    }

    func run() throws {
        let devices: [CaptureDevice]
        do {
            devices = try CaptureKit.makeRegistry().devices()
        } catch {
            throw CommandFailure(error)
        }
        let infos = devices.map { device in
            DeviceInfo(uniqueID: device.uniqueID, name: device.localizedName, mediaType: device.mediaType.rawValue,
                       position: device.position.rawValue, formats: device.formats.map(Self.describe))
        }
        if json {
            print(encodeJSON(infos, command: "devices", listKey: "devices"))
            return
        }
        for info in infos {
            print("\(info.uniqueID)\t\(info.mediaType)\t\(info.name) (\(info.position))")
            for f in info.formats {
                if let name = f.name, f.pixelFormat != nil {
                    print("    \(name) @ \((f.frameRates ?? []).joined(separator: ", "))")
                } else if let rate = f.sampleRate, let ch = f.channels, let sf = f.sampleFormat {
                    print("    \(rate) Hz, \(ch) ch, \(sf)")
                }
            }
        }
    }

    static func describe(_ format: DeviceFormat) -> DeviceInfo.Format {
        switch format.formatDescription {
        case .video(let pf, let d):
            return .init(name: ControlOptions.describe(format), pixelFormat: pf.fourcc, fullRange: format.isFullRange,
                         width: d.width, height: d.height,
                         frameRates: format.frameRateRanges.map(\.description))
        case .audio(let a):
            return .init(sampleRate: a.sampleRate, channels: a.channelCount, sampleFormat: a.sampleFormat.rawValue)
        }
    }
}
