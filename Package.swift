// swift-tools-version:6.1
import PackageDescription

// Swift 6 language mode everywhere; warnings are treated as defects by ci/test.
let package = Package(
    name: "CaptureKit",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CaptureKit", targets: ["CaptureKit"]),
        .executable(name: "capture", targets: ["capture"]),
        // Scenario files, their runner and a stepping harness for tests of capture pipelines.
        .library(name: "CaptureKitTesting", targets: ["CaptureKitTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // `swift package generate-documentation` (ci/docs); a plugin, nothing of it is linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // C libraries from Debian, found through pkg-config.
        .systemLibrary(
            name: "CFFmpeg", path: "Sources/CFFmpeg",
            pkgConfig: "libavformat libavcodec libavutil libswscale libswresample",
            providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswscale-dev", "libswresample-dev"])]),
        .systemLibrary(
            name: "CTurboJPEG", path: "Sources/CTurboJPEG",
            pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(
            name: "CV4L2", path: "Sources/CV4L2",
            pkgConfig: "libv4l2", providers: [.apt(["libv4l-dev"])]),
        .systemLibrary(
            name: "CALSA", path: "Sources/CALSA",
            pkgConfig: "alsa", providers: [.apt(["libasound2-dev"])]),
        // Detectors and the simulator's code encoder: ZBar (codes), libqrencode (QR rendering).
        .systemLibrary(
            name: "CZBar", path: "Sources/CZBar", pkgConfig: "zbar", providers: [.apt(["libzbar-dev"])]),
        .systemLibrary(
            name: "CQREncode", path: "Sources/CQREncode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        // OpenCV's cascade face detector behind a C header. OpenCV's headers live in /usr/include/opencv4
        // (libopencv-objdetect-dev), which Debian exposes through no pkg-config file short of the whole
        // of libopencv-dev, whose opencv4.pc would link every OpenCV module. `opencv` is a symbolic link
        // to that folder, searched as a header path (no unsafe flags: usable as a versioned dependency),
        // and the three libraries the detector uses are named.
        .target(
            name: "CFaceDetect", path: "Sources/CFaceDetect", exclude: ["opencv"],
            cxxSettings: [.headerSearchPath("opencv")],
            linkerSettings: [.linkedLibrary("opencv_objdetect"), .linkedLibrary("opencv_imgproc"), .linkedLibrary("opencv_core"),
                             .linkedLibrary("stdc++")]),
        // What Swift cannot import: function-like macros, compound literals, ioctl numbers.
        .target(name: "CCaptureShims", dependencies: ["CFFmpeg", "CV4L2", "CALSA"], path: "Sources/CCaptureShims"),

        // sched_setattr(2), which has no libc wrapper: the real-time pump threads ask for short slices.
        .target(name: "CThreadScheduling", path: "Sources/CThreadScheduling"),
        // Swift (and one scheduling call): media time, buffers, device facade, session, outputs, driver SPI.
        .target(name: "CaptureCore", dependencies: ["CThreadScheduling", .product(name: "Logging", package: "swift-log")],
                path: "Sources/CaptureCore"),
        // Codecs, muxing, decoding, scaling, resampling, JPEG — all through the C libraries.
        .target(
            name: "CaptureMedia",
            dependencies: ["CaptureCore", "CFFmpeg", "CTurboJPEG", "CCaptureShims", .product(name: "Logging", package: "swift-log")],
            path: "Sources/CaptureMedia"),
        // Recovers frame indices, sync markers and tones from decoded media.
        .target(name: "CaptureAnalysis", dependencies: ["CaptureCore"], path: "Sources/CaptureAnalysis"),
        // The deterministic simulator backend and its device profiles (and scene assets: the face photo).
        .target(
            name: "CaptureSimulator", dependencies: ["CaptureCore", "CCaptureShims", "CQREncode"], path: "Simulator",
            exclude: ["Scenarios"], resources: [.copy("Profiles"), .copy("SceneAssets")]),
        // Thin wrappers of the detectors a metadata output runs: ZBar (codes) and OpenCV (faces).
        .target(name: "CaptureDetection", dependencies: ["CaptureCore", "CZBar", "CFaceDetect"], path: "Sources/CaptureDetection"),
        // The V4L2 camera backend (real kernel drivers) and the ALSA microphone backend.
        .target(
            name: "CaptureV4L2",
            dependencies: ["CaptureCore", "CaptureMedia", "CV4L2", "CCaptureShims", .product(name: "Logging", package: "swift-log")],
            path: "Sources/CaptureV4L2"),
        .target(
            name: "CaptureALSA",
            dependencies: ["CaptureCore", "CALSA", "CCaptureShims", .product(name: "Logging", package: "swift-log")],
            path: "Sources/CaptureALSA"),
        // The public umbrella: re-exports the modules and adds the file outputs.
        .target(
            name: "CaptureKit",
            dependencies: ["CaptureCore", "CaptureMedia", "CaptureAnalysis", "CaptureSimulator", "CaptureV4L2", "CaptureALSA",
                           "CaptureDetection", .product(name: "Logging", package: "swift-log")],
            path: "Sources/CaptureKit"),
        // Scenario files (`capture test`) and CaptureHarness: simulated runs stepped in virtual time,
        // results as plain values for #expect (no dependency on a test framework).
        .target(name: "CaptureKitTesting", dependencies: ["CaptureKit"], path: "Sources/CaptureKitTesting"),
        // Benchmark rows for ci/bench (timing lives here, never in tests).
        .executableTarget(name: "capture-bench", dependencies: ["CaptureKit"], path: "Sources/capture-bench"),
        // The long-run soak (ci/soak): RSS, file descriptors and threads sampled per minute of media.
        .executableTarget(name: "capture-soak", dependencies: ["CaptureKit", "CCaptureShims"], path: "Sources/capture-soak"),
        // Fuzz targets (parsers of outside input) and their driver: libFuzzer under ci/fuzz, a
        // reproducer otherwise.
        .target(name: "CaptureFuzzTargets", dependencies: ["CaptureKit", "CaptureKitTesting"], path: "Sources/CaptureFuzzTargets"),
        .executableTarget(name: "capture-fuzz", dependencies: ["CaptureFuzzTargets", "CCaptureShims"], path: "Sources/capture-fuzz"),
        .executableTarget(
            name: "capture",
            dependencies: ["CaptureKit", "CaptureKitTesting", "CCaptureShims", .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Logging", package: "swift-log")],
            path: "Sources/capture"),

        .testTarget(name: "CaptureCoreTests", dependencies: ["CaptureCore"], path: "Tests/CaptureCoreTests"),
        .testTarget(name: "CaptureAnalysisTests", dependencies: ["CaptureAnalysis"], path: "Tests/CaptureAnalysisTests"),
        .testTarget(name: "CaptureKitTests", dependencies: ["CaptureKit", "CaptureFuzzTargets", .product(name: "Logging", package: "swift-log")], path: "Tests/CaptureKitTests"),
        .testTarget(name: "CaptureKitTestingTests", dependencies: ["CaptureKitTesting"], path: "Tests/CaptureKitTestingTests"),
        // Host-side tests of the real backends: V4L2 against a fake kernel, ALSA on a file PCM, and the
        // compliance suite holding every driver (those two, the simulator, fixture replay) to one contract.
        .testTarget(
            name: "CaptureLinuxTests", dependencies: ["CaptureKit", "CaptureV4L2", "CaptureALSA", "CV4L2"],
            path: "Tests/CaptureLinuxTests"),
        // Real kernel drivers (vivid, snd-aloop): skip on hosts without them, run inside ci/vm-run.
        .testTarget(name: "CaptureDeviceTests", dependencies: ["CaptureKit"], path: "Tests/CaptureDeviceTests"),
    ],
    swiftLanguageModes: [.v6]
)
