import CaptureCore
import Foundation
import Synchronization

extension SyntheticFrameRenderer {
    func drawStamp(_ value: UInt32, into buffer: PixelBuffer) {
        let band = layout.stampBandHeight
        // Planar luma: the cells cover the row, so paint the band's first row and copy it down
        // (one copy a row instead of 32 fills).
        let planar = pixelFormat != .yuyv && band > 0
        for k in 0..<FrameMarkerLayout.bitCount {
            let bit = (value >> UInt32(31 - k)) & 1
            fillLuma(buffer, rows: 0..<(planar ? 1 : band), columns: layout.stampCellColumns(k),
                     value: bit == 1 ? FrameMarkerLayout.lumaOne : FrameMarkerLayout.lumaZero)
        }
        guard planar else { return }
        let base = buffer.producerBaseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        let stride = buffer.bytesPerRow[0]
        for row in 1..<band { (base + row * stride).update(from: base, count: width) }
    }

    // MARK: Painting primitives (row fills, so debug builds stay fast)

    private func fillLuma(_ buffer: PixelBuffer, rows: Range<Int>, columns: Range<Int>, value: UInt8) {
        guard !columns.isEmpty else { return }
        if pixelFormat == .yuyv {
            let base = buffer.producerBaseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[0]
            for row in rows {
                for x in columns { base[row * stride + x * 2] = value }
            }
            return
        }
        let base = buffer.producerBaseAddress(ofPlane: 0)
        let stride = buffer.bytesPerRow[0]
        for row in rows {
            (base + row * stride + columns.lowerBound).initializeMemory(as: UInt8.self, repeating: value, count: columns.count)
        }
    }

    func fill(_ buffer: PixelBuffer, rows: Range<Int>, columns: Range<Int>, color: YCbCr) {
        guard !rows.isEmpty, !columns.isEmpty else { return }
        fillLuma(buffer, rows: rows, columns: columns, value: color.y)
        let chromaRows = (rows.lowerBound / 2)..<((rows.upperBound + 1) / 2)
        let chromaColumns = (columns.lowerBound / 2)..<((columns.upperBound + 1) / 2)
        switch pixelFormat {
        case .nv12:
            let base = buffer.producerBaseAddress(ofPlane: 1).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[1]
            // Build one interleaved row, then copy it to every chroma row.
            let first = base + chromaRows.lowerBound * stride + chromaColumns.lowerBound * 2
            for c in 0..<chromaColumns.count {
                first[c * 2] = color.cb
                first[c * 2 + 1] = color.cr
            }
            for row in chromaRows.dropFirst() {
                (base + row * stride + chromaColumns.lowerBound * 2).update(from: first, count: chromaColumns.count * 2)
            }
        case .yuv420:
            for (plane, value) in [(1, color.cb), (2, color.cr)] {
                let base = buffer.producerBaseAddress(ofPlane: plane)
                let stride = buffer.bytesPerRow[plane]
                for row in chromaRows {
                    (base + row * stride + chromaColumns.lowerBound)
                        .initializeMemory(as: UInt8.self, repeating: value, count: chromaColumns.count)
                }
            }
        case .yuyv:
            let base = buffer.producerBaseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[0]
            for row in rows {
                for c in chromaColumns {
                    base[row * stride + c * 4 + 1] = color.cb
                    base[row * stride + c * 4 + 3] = color.cr
                }
            }
        default:
            break
        }
    }
}
