// Output buffers for the image functions, recycled instead of freed.
//
// Why: an image stage's output is a few hundred KB, above glibc's mmap
// threshold or soon trimmed back to the kernel, so a fresh buffer per image
// means a page fault and a kernel zero-fill per 4 KiB page. Measured on our
// 2-core VMs that is ~450 us for a 600 KB buffer: more than normalising the
// image costs, and a quarter of decoding it. A buffer handed back to a small
// process-wide pool when its last Element lets go is reused by the next
// image: no system call, no fault, and no zero-fill when the size repeats.
//
// read_file takes its file buffers from the pool too: there the gain is the
// zero-fill a fresh vector does before read() overwrites it.
//
// The pool keeps at most kMaxPooledBytes of idle buffers (the rest are freed
// as usual), so its cost is bounded and independent of the pipeline.
#pragma once

#include <cstddef>
#include <memory>

#include "pipetune/runtime/element.h"

namespace pipetune::runtime::image {

inline constexpr size_t kMaxPooledBytes = size_t{64} << 20;

// A buffer of exactly `size` bytes (contents unspecified) that returns to the
// pool when the last shared_ptr to it is dropped, from any thread.
std::shared_ptr<Bytes> AcquireBuffer(size_t size);

// Idle bytes held by the pool now (for tests and diagnostics).
size_t PooledBytes();

}  // namespace pipetune::runtime::image
