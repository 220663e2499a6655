// Sizes as people write and read them: "4GiB" in a config or on the command
// line, "4.0 GiB" in a report.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pipetune/base/status.h"

namespace pipetune {

// "4GiB", "512 MiB", "1.5GB", "100k", "4096" -> bytes. Binary units (KiB, MiB,
// GiB, TiB, also Ki/Mi/Gi/Ti) are powers of 1024, decimal ones (kB/KB, MB, GB,
// TB, also k/K/M/G/T) powers of 1000; B or no unit is bytes. A malformed size
// is InvalidInput naming the text and what is wrong with it.
StatusOr<uint64_t> ParseSize(std::string_view text);

// 4294967296 -> "4.0 GiB"; below 1 KiB, whole bytes ("512 B").
std::string FormatBytes(double bytes);

}  // namespace pipetune
