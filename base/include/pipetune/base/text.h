// Text for other formats: what every writer of HTML, SVG and XML (the HTML
// report, its charts, the gate's JUnit file) escapes the same way; and the
// one hash of text that identifies what a pipeline computes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pipetune {

// & < > " ' as entities, so that the text is safe as element content and as
// a quoted attribute value (single or double quotes); every other byte,
// UTF-8 included, is kept.
std::string EscapeXml(std::string_view text);

// FNV-1a, 64 bits, over `bytes`. A disk cache's fingerprint uses the standard
// offset basis; the gate's baselines were written with kBaselineHashBasis
// (a digit short of the standard one) and keep it, so that baselines saved
// before stay valid. Any basis hashes as well.
inline constexpr uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kBaselineHashBasis = 1469598103934665603ull;
uint64_t Fnv1a64(std::string_view bytes, uint64_t basis = kFnv1aOffsetBasis);

}  // namespace pipetune
