import ArgumentParser
import CaptureKit
import Foundation

struct FormatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "formats", abstract: "List a device's formats with frame-rate, exposure and ISO ranges.")

    @Argument(help: "Device unique ID (e.g. sim:back).")
    var device: String

    @Flag(help: "Print the list as JSON.")
    var json = false

    struct FormatInfo: Codable {
        var index: Int
        var name: String
        var pixelFormat: String?
        var width: Int?
        var height: Int?
        var fullRange: Bool?
        var frameRates: [String]?
        var minFrameRate: Double?
        var maxFrameRate: Double?
        var minExposureDuration: Double?
        var maxExposureDuration: Double?
        var minISO: Double?
        var maxISO: Double?
        var fieldOfView: Double?
        var maxZoomFactor: Double?
        var stabilizationModes: [String]?
        var highResolutionStill: String?
        var videoHDR: Bool?
        var autoFocusSystem: String?
        var sampleRate: Int?
        var channels: Int?
        var sampleFormat: String?
        var active: Bool
    }

    func run() throws {
        let device: CaptureDevice
        do {
            device = try CaptureKit.makeRegistry().device(uniqueID: self.device)
        } catch {
            throw CommandFailure(error)
        }
        let active = device.activeFormat
        let infos = device.formats.enumerated().map { i, f in Self.info(i, f, active: f == active) }
        if json {
            print(encodeJSON(infos, command: "formats", listKey: "formats"))
            return
        }
        for f in infos {
            var line = "\(f.active ? "*" : " ") \(f.index): \(f.name)"
            if let rates = f.frameRates { line += " @ \(rates.joined(separator: ", "))" }
            if let lo = f.minExposureDuration, let hi = f.maxExposureDuration { line += String(format: ", exposure %g–%g s", lo, hi) }
            if let lo = f.minISO, let hi = f.maxISO { line += String(format: ", ISO %g–%g", lo, hi) }
            if let z = f.maxZoomFactor, z > 1 { line += String(format: ", zoom ≤ %g", z) }
            if f.videoHDR == true { line += ", HDR" }
            print(line)
        }
    }

    static func info(_ index: Int, _ f: DeviceFormat, active: Bool) -> FormatInfo {
        if let a = f.audioFormat {
            return FormatInfo(index: index, name: "audio \(a)", sampleRate: a.sampleRate, channels: a.channelCount,
                              sampleFormat: a.sampleFormat.rawValue, active: active)
        }
        return FormatInfo(index: index, name: ControlOptions.describe(f), pixelFormat: f.pixelFormat?.fourcc, width: f.dimensions?.width,
                          height: f.dimensions?.height, fullRange: f.isFullRange, frameRates: f.frameRateRanges.map(\.description),
                          minFrameRate: f.frameRateRanges.map(\.minFrameRate).min(), maxFrameRate: f.frameRateRanges.map(\.maxFrameRate).max(),
                          minExposureDuration: f.minExposureDuration.seconds, maxExposureDuration: f.maxExposureDuration.seconds,
                          minISO: f.minISO, maxISO: f.maxISO, fieldOfView: f.fieldOfView, maxZoomFactor: f.videoMaxZoomFactor,
                          stabilizationModes: f.properties.stabilizationModes.map(\.rawValue),
                          highResolutionStill: f.highResolutionStillImageDimensions?.description, videoHDR: f.isVideoHDRSupported,
                          autoFocusSystem: f.properties.autoFocusSystem.rawValue, active: active)
    }
}
