// CUPTI activity records (cupti_activity.h layouts of the CUPTI major
// version this is built with) -> the trace's GpuActivity.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "pipetune/tracer/records.h"

namespace pipetune::cupti::internal {

// Synchronization records carry a context but no device; kernels and copies
// carry both, so the device of a context is learned from them.
using ContextDevices = std::unordered_map<uint32_t, uint32_t>;

// The record as a GpuActivity with times shifted by offset_ns onto the host
// clock; nullopt for kinds not recorded or a record whose end precedes its
// start (CUPTI marks unfinished ones with end 0).
std::optional<tracer::GpuActivity> ConvertRecord(const CUpti_Activity& record, int64_t offset_ns,
                                                 ContextDevices& devices);

tracer::GpuCopyKind CopyKindOf(uint8_t cupti_copy_kind);

}  // namespace pipetune::cupti::internal
