import CaptureKit
import Foundation
import Testing

/// Issue 16's real-driver half: the same scenario files, with the same expectations, pass on the
/// simulator (virtual time) and on vivid (`capture test --camera /dev/videoN`: real time, the
/// faults pressed through vivid's error-injection controls — `bufferError` as "Inject
/// V4L2_BUF_FLAG_ERROR", `unplug` as "Disconnect"). The unplug leaves vivid's nodes gone: ci/vm/device-tests
/// reloads the module after this suite.
@Suite(.serialized, .enabled(if: DeviceEnvironment.available, DeviceEnvironment.skipReason), .timeLimit(.minutes(3)))
struct VividScenarioTests {
    static let scenarios = ["portable-buffer-error", "portable-unplug"].map {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Simulator/Scenarios/\($0).json").path
    }

    struct Run {
        var status: Int32
        var output: String
        /// Per scenario: expectation name → (measured, passed).
        var expectations: [String: [String: (String, Bool)]]
        var measured: [String: [String: Any]]
        var junit: String
    }

    static func run(camera: String?, in dir: String, label: String) throws -> Run {
        let json = "\(dir)/\(label).json", junit = "\(dir)/\(label).xml"
        let result = try DeviceEnvironment.run(DeviceEnvironment.captureTool,
                                               ["test"] + (camera.map { ["--camera", $0] } ?? []) + ["--json", json, "--junit", junit] + scenarios)
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any]
        var expectations: [String: [String: (String, Bool)]] = [:]
        var measured: [String: [String: Any]] = [:]
        for r in document?["results"] as? [[String: Any]] ?? [] {
            let name = r["name"] as? String ?? "?"
            var table: [String: (String, Bool)] = [:]
            for e in r["expectations"] as? [[String: Any]] ?? [] {
                table[e["name"] as? String ?? "?"] = (e["measured"] as? String ?? "?", e["passed"] as? Bool ?? false)
            }
            expectations[name] = table
            measured[name] = r["measured"] as? [String: Any] ?? [:]
        }
        return Run(status: result.status, output: result.stdout + result.stderr, expectations: expectations, measured: measured,
                   junit: (try? String(contentsOfFile: junit, encoding: .utf8)) ?? "")
    }

    @Test func theSameScenariosPassOnTheSimulatorAndOnVivid() throws {
        let node = try DeviceEnvironment.requireVivid()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let simulated = try Self.run(camera: nil, in: dir, label: "simulator")
        print("simulator:\n\(simulated.output)")
        #expect(simulated.status == 0, "\(simulated.output)")
        let vivid = try Self.run(camera: node, in: dir, label: "vivid")
        print("vivid (\(node)):\n\(vivid.output)")
        #expect(vivid.status == 0, "\(vivid.output)")

        for name in ["portable-buffer-error", "portable-unplug"] {
            let sim = try #require(simulated.expectations[name], "\(name) did not run on the simulator")
            let real = try #require(vivid.expectations[name], "\(name) did not run on vivid")
            // The same expectations were checked on both, and each passed on both.
            #expect(Set(sim.keys) == Set(real.keys) && !sim.isEmpty)
            for (expectation, (measured, passed)) in real.sorted(by: { $0.key < $1.key }) {
                print("\(name) \(expectation): simulator \(sim[expectation]?.0 ?? "-"), vivid \(measured)")
                #expect(passed, "\(name): \(expectation) measured \(measured) on vivid")
                #expect(sim[expectation]?.1 == true, "\(name): \(expectation) on the simulator")
            }
        }
        // The fault really reached vivid: one buffer flagged as failed was counted, and the unplug
        // came back as the node's own disconnection.
        #expect(vivid.measured["portable-buffer-error"]?["damagedFrames"] as? Int == 1)
        let errors = vivid.measured["portable-unplug"]?["errors"] as? [[String: Any]] ?? []
        #expect(errors.first?["type"] as? String == "deviceDisconnected" && (errors.first?["message"] as? String ?? "").contains(node),
                "\(errors)")
        #expect(vivid.junit.contains("tests=\"2\" failures=\"0\""), "\(vivid.junit)")
    }
}
