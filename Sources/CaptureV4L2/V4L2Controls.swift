import CaptureCore
import CV4L2

/// One V4L2 control as QUERYCTRL reports it.
struct V4L2ControlInfo: Sendable, Hashable {
    var cid: UInt32
    var name: String
    var type: UInt32
    var minimum: Int64
    var maximum: Int64
    var step: Int64
    var defaultValue: Int64
    var flags: UInt32
    /// Menu entries (index, name) for MENU and INTEGER_MENU controls.
    var menu: [(index: Int64, name: String)]

    static func == (a: Self, b: Self) -> Bool { a.cid == b.cid && a.name == b.name && a.minimum == b.minimum && a.maximum == b.maximum }
    func hash(into h: inout Hasher) { h.combine(cid) }

    var isVolatile: Bool { flags & UInt32(V4L2_CTRL_FLAG_VOLATILE) != 0 }

    /// v4l2-ctl's spelling of a control name: lower case, runs of other characters become `_`.
    static func normalized(_ name: String) -> String {
        var out = ""
        for ch in name.lowercased() {
            if ch.isLetter || ch.isNumber { out.append(ch) } else if !out.hasSuffix("_") && !out.isEmpty { out.append("_") }
        }
        while out.hasSuffix("_") { out.removeLast() }
        return out
    }
}

/// How a device-model control reads and writes its V4L2 control: the unit and range conversions
/// of the AVFoundation → V4L2 mapping (exposure in 100 µs units, focus inverted to 0…1, …).
struct V4L2ControlMapping: Sendable {
    enum Conversion: Sendable {
        /// Passed through as an integer with the driver's range.
        case integer
        /// Passed through as a bool.
        case bool
        /// `real = raw × scale` (exposure: 100 µs per unit → seconds).
        case scaled(Double)
        /// 0…1 over the driver's range, inverted when `inverted` (focus: larger raw = closer).
        case normalized(inverted: Bool)
        /// Zoom: 1 + (raw − min) / max(min, 1).
        case zoom
        /// A menu whose driver indices map to device-model names.
        case menu([Int64: String])
        /// A bool presented as a two-entry menu (true name, false name).
        case boolMenu(onName: String, offName: String)
        /// The driver's own kind: integer, bool, button (as bool) or menu by entry name.
        case native
    }

    let id: ControlID
    let info: V4L2ControlInfo
    let conversion: Conversion

    static let exposureAuto = UInt32(V4L2_CID_EXPOSURE_AUTO)

    /// The device-model controls a set of V4L2 controls provides; unmatched controls become `.custom(name)`.
    static func map(_ infos: [V4L2ControlInfo]) -> [V4L2ControlMapping] {
        var result: [V4L2ControlMapping] = []
        for info in infos {
            let menuNames = Dictionary(info.menu.map { ($0.index, $0.name) }, uniquingKeysWith: { a, _ in a })
            switch Int64(info.cid) {
            case Int64(V4L2_CID_EXPOSURE_AUTO):
                // AUTO and APERTURE_PRIORITY both keep exposure continuous; MANUAL is custom.
                var names: [Int64: String] = [:]
                for index in menuNames.keys.sorted() {
                    switch index {
                    case Int64(V4L2_EXPOSURE_MANUAL.rawValue): names[index] = "custom"
                    case Int64(V4L2_EXPOSURE_SHUTTER_PRIORITY.rawValue): names[index] = "shutterPriority"
                    default: if !names.values.contains("continuousAutoExposure") { names[index] = "continuousAutoExposure" }
                    }
                }
                result.append(V4L2ControlMapping(id: .exposureMode, info: info, conversion: .menu(names)))
            case Int64(V4L2_CID_EXPOSURE_ABSOLUTE):
                result.append(V4L2ControlMapping(id: .exposureDuration, info: info, conversion: .scaled(100e-6)))
            case Int64(V4L2_CID_AUTO_EXPOSURE_BIAS) where info.type == V4L2_CTRL_TYPE_INTEGER.rawValue:
                result.append(V4L2ControlMapping(id: .exposureTargetBias, info: info, conversion: .scaled(0.001)))
            case Int64(V4L2_CID_FOCUS_AUTO):
                result.append(V4L2ControlMapping(id: .focusMode, info: info, conversion: .boolMenu(onName: "continuousAutoFocus", offName: "locked")))
            case Int64(V4L2_CID_FOCUS_ABSOLUTE):
                result.append(V4L2ControlMapping(id: .lensPosition, info: info, conversion: .normalized(inverted: true)))
            case Int64(V4L2_CID_AUTO_WHITE_BALANCE):
                result.append(V4L2ControlMapping(id: .whiteBalanceMode, info: info, conversion: .boolMenu(onName: "continuousAutoWhiteBalance", offName: "locked")))
            case Int64(V4L2_CID_WHITE_BALANCE_TEMPERATURE):
                result.append(V4L2ControlMapping(id: .whiteBalanceTemperature, info: info, conversion: .integer))
            case Int64(V4L2_CID_ZOOM_ABSOLUTE):
                result.append(V4L2ControlMapping(id: .zoomFactor, info: info, conversion: .zoom))
            case Int64(V4L2_CID_FLASH_LED_MODE):
                var names: [Int64: String] = [:]
                if menuNames[Int64(V4L2_FLASH_LED_MODE_NONE.rawValue)] != nil { names[Int64(V4L2_FLASH_LED_MODE_NONE.rawValue)] = "off" }
                if menuNames[Int64(V4L2_FLASH_LED_MODE_TORCH.rawValue)] != nil { names[Int64(V4L2_FLASH_LED_MODE_TORCH.rawValue)] = "on" }
                if names.count == 2 { result.append(V4L2ControlMapping(id: .torchMode, info: info, conversion: .menu(names))) }
            case Int64(V4L2_CID_FLASH_TORCH_INTENSITY):
                result.append(V4L2ControlMapping(id: .torchLevel, info: info, conversion: .normalized(inverted: false)))
            case Int64(V4L2_CID_BRIGHTNESS): result.append(V4L2ControlMapping(id: .brightness, info: info, conversion: .integer))
            case Int64(V4L2_CID_CONTRAST): result.append(V4L2ControlMapping(id: .contrast, info: info, conversion: .integer))
            case Int64(V4L2_CID_SATURATION): result.append(V4L2ControlMapping(id: .saturation, info: info, conversion: .integer))
            case Int64(V4L2_CID_HUE): result.append(V4L2ControlMapping(id: .hue, info: info, conversion: .integer))
            case Int64(V4L2_CID_GAIN): result.append(V4L2ControlMapping(id: .gain, info: info, conversion: .integer))
            default:
                result.append(V4L2ControlMapping(id: .custom(V4L2ControlInfo.normalized(info.name)), info: info, conversion: .native))
            }
        }
        return result
    }

    var isButton: Bool { info.type == V4L2_CTRL_TYPE_BUTTON.rawValue }
    var isBool: Bool { info.type == V4L2_CTRL_TYPE_BOOLEAN.rawValue }
    var isMenu: Bool { info.type == V4L2_CTRL_TYPE_MENU.rawValue || info.type == V4L2_CTRL_TYPE_INTEGER_MENU.rawValue }
    private var span: Double { Double(max(1, info.maximum - info.minimum)) }
    private var zoomBase: Double { Double(max(info.minimum, 1)) }

    var description: ControlDescription {
        let kind: ControlDescription.Kind
        switch conversion {
        case .integer: kind = .integer(min: info.minimum, max: info.maximum, step: max(1, info.step))
        case .bool: kind = .bool
        case .scaled(let s): kind = .real(min: Double(info.minimum) * s, max: Double(info.maximum) * s)
        case .normalized: kind = .real(min: 0, max: 1)
        case .zoom: kind = .real(min: 1, max: 1 + Double(info.maximum - info.minimum) / zoomBase)
        case .menu(let names): kind = .menu(names.keys.sorted().compactMap { names[$0] })
        case .boolMenu(let on, let off): kind = .menu([off, on])
        case .native:
            if isBool || isButton { kind = .bool }
            else if isMenu { kind = .menu(info.menu.map(\.name)) }
            else { kind = .integer(min: info.minimum, max: info.maximum, step: max(1, info.step)) }
        }
        return ControlDescription(id: id, kind: kind, defaultValue: (try? value(fromRaw: info.defaultValue)) ?? .integer(info.defaultValue),
                                  isVolatile: info.isVolatile || id == .exposureDuration || id == .lensPosition)
    }

    /// Raw driver value → device-model value.
    func value(fromRaw raw: Int64) throws(CaptureError) -> ControlValue {
        switch conversion {
        case .integer: return .integer(raw)
        case .bool: return .bool(raw != 0)
        case .scaled(let s): return .real(Double(raw) * s)
        case .normalized(let inverted):
            let t = Double(raw - info.minimum) / span
            return .real(inverted ? 1 - t : t)
        case .zoom: return .real(1 + Double(raw - info.minimum) / zoomBase)
        case .menu(let names):
            guard let name = names[raw] else { throw .invalidState("\(id) has driver value \(raw) with no device-model name") }
            return .menu(name)
        case .boolMenu(let on, let off): return .menu(raw != 0 ? on : off)
        case .native:
            if isBool || isButton { return .bool(raw != 0) }
            if isMenu, let entry = info.menu.first(where: { $0.index == raw }) { return .menu(entry.name) }
            return .integer(raw)
        }
    }

    /// Device-model value → raw driver value, clamped to the driver's range; wrong kinds throw.
    func raw(from value: ControlValue) throws(CaptureError) -> Int64 {
        let bad = CaptureError.invalidArgument("\(value) is not a valid value for \(id) (\(description.kind))")
        func clamp(_ v: Double) -> Int64 {
            let stepped = info.step > 1 ? (((v - Double(info.minimum)) / Double(info.step)).rounded() * Double(info.step) + Double(info.minimum)) : v.rounded()
            return min(max(Int64(stepped), info.minimum), info.maximum)
        }
        switch (conversion, value) {
        case (.integer, .integer(let i)): return clamp(Double(i))
        case (.integer, .real(let d)): return clamp(d)
        case (.bool, .bool(let b)): return b ? 1 : 0
        case (.scaled(let s), .real(let d)): return clamp(d / s)
        case (.normalized(let inverted), .real(let d)):
            guard (0...1).contains(d) else { throw bad }
            return clamp(Double(info.minimum) + (inverted ? 1 - d : d) * span)
        case (.zoom, .real(let d)):
            guard d >= 1 else { throw bad }
            return clamp(Double(info.minimum) + (d - 1) * zoomBase)
        case (.menu(let names), .menu(let name)):
            guard let index = names.first(where: { $0.value == name })?.key else { throw bad }
            return index
        case (.boolMenu(let on, let off), .menu(let name)):
            if name == on { return 1 }
            if name == off { return 0 }
            throw bad
        case (.native, .bool(let b)) where isBool || isButton: return b ? 1 : 0
        case (.native, .menu(let name)) where isMenu:
            guard let entry = info.menu.first(where: { $0.name == name }) else { throw bad }
            return entry.index
        case (.native, .integer(let i)) where !isMenu: return isBool || isButton ? (i != 0 ? 1 : 0) : clamp(Double(i))
        default: throw bad
        }
    }

    /// Every control the node has (QUERYCTRL with NEXT_CTRL), without classes, disabled and
    /// compound/string controls.
    static func query(_ system: any V4L2System, fd: V4L2FileDescriptor) -> [V4L2ControlInfo] {
        var infos: [V4L2ControlInfo] = []
        var last: UInt32 = 0
        while let q = try? system.queryControl(fd, id: last, next: true) {
            last = q.id
            let usable: [UInt32] = [V4L2_CTRL_TYPE_INTEGER.rawValue, V4L2_CTRL_TYPE_BOOLEAN.rawValue, V4L2_CTRL_TYPE_MENU.rawValue,
                                    V4L2_CTRL_TYPE_BUTTON.rawValue, V4L2_CTRL_TYPE_INTEGER_MENU.rawValue]
            guard q.flags & UInt32(V4L2_CTRL_FLAG_DISABLED) == 0, usable.contains(q.type) else { continue }
            var menu: [(index: Int64, name: String)] = []
            if q.type == V4L2_CTRL_TYPE_MENU.rawValue || q.type == V4L2_CTRL_TYPE_INTEGER_MENU.rawValue, q.minimum >= 0 {
                for i in q.minimum...max(q.minimum, q.maximum) {
                    guard let entry = try? system.queryMenu(fd, control: q.id, index: UInt32(i)) else { continue }
                    menu.append((Int64(i), q.type == V4L2_CTRL_TYPE_MENU.rawValue ? entry.name : String(entry.value)))
                }
            }
            infos.append(V4L2ControlInfo(cid: q.id, name: q.name, type: q.type, minimum: Int64(q.minimum),
                                         maximum: Int64(q.maximum), step: Int64(q.step), defaultValue: Int64(q.defaultValue),
                                         flags: q.flags, menu: menu))
        }
        return infos
    }
}
