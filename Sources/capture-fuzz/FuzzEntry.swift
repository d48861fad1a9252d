import CCaptureShims
import CaptureFuzzTargets
import Foundation

// Built by ci/fuzz with `-sanitize=fuzzer,address -DCAPTUREKIT_FUZZ`: the entry point hands over to
// libFuzzer's driver, which calls `fuzzOneInput` for every input; the target comes from
// CAPTUREKIT_FUZZ_TARGET. Built normally (swift build), it is a reproducer:
// `capture-fuzz TARGET FILE...` runs each file once.

private let selected: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["CAPTUREKIT_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("capture-fuzz: set CAPTUREKIT_FUZZ_TARGET to one of \(names)\n".utf8))
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    selected.run(data)
    return 0
}

#if CAPTUREKIT_FUZZ
// SwiftPM links an executable's `main` to this symbol.
@_cdecl("capture_fuzz_main")
public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var arguments = argv
    _ = selected
    return ck_fuzzer_run_driver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
#else
@main
struct Reproducer {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
            print("usage: capture-fuzz \(names) FILE...   (runs each input once; ci/fuzz runs libFuzzer)")
            exit(2)
        }
        for path in arguments.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else {
                print("capture-fuzz: cannot read \(path)")
                exit(1)
            }
            target.run(data)
            print("\(path): ok")
        }
    }
}
#endif
