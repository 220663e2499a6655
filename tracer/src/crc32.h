// CRC-32 (IEEE 802.3, the zlib/PNG polynomial 0xEDB88320, reflected), so any
// tool (python's zlib.crc32, for one) can check a trace's chunks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pipetune::tracer::internal {

// Continues a CRC: pass 0 to start, the previous result to go on.
uint32_t Crc32(uint32_t crc, const void* data, size_t size);

}  // namespace pipetune::tracer::internal
