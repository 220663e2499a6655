// Element: what flows between stages. Cheap to move; its payload is shared and
// immutable once published, so a memory cache can hand the same element out
// every epoch without copying it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pipetune::runtime {

enum class DType : uint8_t {
  kNone,   // no payload (range elements without `bytes`)
  kBytes,  // opaque bytes: file contents, synthetic payloads
  kU8,     // image, height x width x channels, interleaved
  kF32,    // normalized image, height x width x channels, interleaved
};

using Bytes = std::vector<uint8_t>;

struct Element {
  // Provenance: the source's ordinal of this element (range index, or index of
  // the file in the listing). Element functions keep it; it is what the tests
  // use to check that every element arrives exactly once.
  uint64_t id = 0;
  uint32_t epoch = 0;  // which pass over the source (repeat)
  // The class index list_files gives an ImageFolder layout's files (sorted
  // class folders, as torchvision's ImageFolder); -1: no label. Every stage
  // keeps it as it keeps `id`; a batch's members keep theirs.
  int64_t label = -1;
  std::string path;  // list_files output; read_file input
  DType dtype = DType::kNone;
  std::array<int32_t, 3> shape{0, 0, 0};  // height, width, channels for images
  std::shared_ptr<const Bytes> data;      // payload; never mutated once shared
  // A batch's members, in order. A collated batch (BuildOptions::
  // collate_batches) holds its members' pixels in its own `data`, one image
  // after another (`shape` is one member's), and its members keep only their
  // provenance (id, epoch, path, label).
  std::vector<Element> items;

  // Bytes this element holds (payload plus members): what buffers and caches
  // account against the memory budget.
  uint64_t ByteSize() const {
    uint64_t total = data ? data->size() : 0;
    total += path.size();
    for (const Element& item : items) total += item.ByteSize();
    return total;
  }
};

}  // namespace pipetune::runtime
