import CaptureKit
import Foundation
import Testing

/// What the camera effects cost per 640x480 NV12 frame (printed; bounded loosely so a regression
/// that makes the simulator unusable in debug test runs fails).
@Suite struct RendererCostTests {
    @Test func perFrameCostAt640x480() throws {
        let renderer = try SyntheticFrameRenderer(pixelFormat: .nv12, dimensions: Dimensions(width: 640, height: 480),
                                                  frameDuration: MediaTime(value: 1, timescale: 30), seed: 1)
        let buffer = PixelBuffer(format: .nv12, width: 640, height: 480)
        let metering = MeteringRequest(exposureRegion: PixelRect(x0: 160, y0: 120, x1: 480, y1: 360),
                                       focusRegion: PixelRect(x0: 96, y0: 72, x1: 544, y1: 408), grayWorld: true)
        func cost(_ name: String, frames: Int = 30, _ effects: (Int) -> CameraEffects, metering: MeteringRequest? = nil) -> Double {
            // Thread CPU time: other tests share the two cores.
            let start = Self.threadCPUTime()
            for n in 0..<frames {
                _ = renderer.render(frame: Int64(n), effects: effects(n), syncFlash: false, metering: metering, into: buffer)
            }
            let ms = (Self.threadCPUTime() - start) * 1000 / Double(frames)
            print(String(format: "renderer 640x480 %@: %.2f ms/frame", name, ms))
            return ms
        }
        let steady = cost("neutral (cached background)") { _ in .neutral }
        let metered = cost("neutral + AE/AF/AWB statistics", { _ in .neutral }, metering: metering)
        let exposure = cost("exposure changing every frame") { n in
            var e = CameraEffects(); e.red = 1 + Double(n) / 100; e.green = e.red; e.blue = e.red; return e
        }
        let blur = cost("defocus radius 8") { _ in var e = CameraEffects(); e.blurRadius = 8; return e }
        let noise = cost("noise sigma 2") { _ in var e = CameraEffects(); e.noiseSigma = 2; return e }
        let all = cost("everything (exposure, zoom, blur, noise, statistics)", { n in
            var e = CameraEffects(); e.red = 1.2 + Double(n) / 100; e.green = 1.1; e.blue = 0.9; e.zoom = 1.5
            e.blurRadius = 6; e.noiseSigma = 3; return e
        }, metering: metering)
        #expect(steady < 10 && metered < 20, "steady \(steady) ms, metered \(metered) ms")
        #expect(exposure < 60 && blur < 150 && noise < 100 && all < 300, "\(exposure) \(blur) \(noise) \(all)")
    }

    static func threadCPUTime() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
}
