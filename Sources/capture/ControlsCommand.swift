import ArgumentParser
import CaptureKit
import Foundation

struct ControlsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "controls", abstract: "List a device's controls: support, allowed values and current value.")

    @Argument(help: "Device unique ID (e.g. sim:back).")
    var device: String

    @Flag(help: "Print the list as JSON.")
    var json = false

    func run() throws {
        let statuses: [ControlStatus]
        do {
            statuses = try CaptureKit.makeRegistry().device(uniqueID: device).controlStatuses()
        } catch {
            throw CommandFailure(error)
        }
        if json {
            print(encodeJSON(statuses, command: "controls", listKey: "controls"))
            return
        }
        for s in statuses {
            let current = s.current.map { " = \($0)" } ?? ""
            print("\(s.key.padding(toLength: 26, withPad: " ", startingAt: 0))\(s.supported ? "\(s.allowed)\(current)" : "unsupported")")
        }
    }
}
