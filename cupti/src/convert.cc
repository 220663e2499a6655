#include "convert.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace pipetune::cupti::internal {
namespace {

// The record structs CUDA 13's CUPTI fills for the kinds we enable.
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemsetRecord = CUpti_ActivityMemset4;
using SyncRecord = CUpti_ActivitySynchronization2;

uint64_t Shift(uint64_t t, int64_t offset_ns) {
  int64_t shifted = static_cast<int64_t>(t) + offset_ns;
  return shifted < 0 ? 0 : static_cast<uint64_t>(shifted);
}

// Kernel names come mangled; a readable name is what a user looks for.
std::string Demangle(const char* name) {
  if (name == nullptr) return {};
  if (std::strncmp(name, "_Z", 2) != 0) return name;
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || plain == nullptr) return name;
  std::string out = plain;
  std::free(plain);
  return out;
}

bool Times(uint64_t start, uint64_t end, int64_t offset_ns, tracer::GpuActivity* a) {
  if (end < start || end == 0) return false;
  a->start_ns = Shift(start, offset_ns);
  a->end_ns = Shift(end, offset_ns);
  return true;
}

}  // namespace

tracer::GpuCopyKind CopyKindOf(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return tracer::GpuCopyKind::kHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return tracer::GpuCopyKind::kDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return tracer::GpuCopyKind::kDeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return tracer::GpuCopyKind::kHostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return tracer::GpuCopyKind::kPeerToPeer;
    default:
      return tracer::GpuCopyKind::kOther;
  }
}

std::optional<tracer::GpuActivity> ConvertRecord(const CUpti_Activity& record, int64_t offset_ns,
                                                 ContextDevices& devices) {
  tracer::GpuActivity a;
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto& k = reinterpret_cast<const KernelRecord&>(record);
      if (!Times(k.start, k.end, offset_ns, &a)) return std::nullopt;
      a.kind = tracer::GpuActivityKind::kKernel;
      a.device = k.deviceId;
      a.context = k.contextId;
      a.stream = k.streamId;
      a.correlation_id = k.correlationId;
      a.name = Demangle(k.name);
      devices[k.contextId] = k.deviceId;
      return a;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = reinterpret_cast<const MemcpyRecord&>(record);
      if (!Times(m.start, m.end, offset_ns, &a)) return std::nullopt;
      a.kind = tracer::GpuActivityKind::kMemcpy;
      a.device = m.deviceId;
      a.context = m.contextId;
      a.stream = m.streamId;
      a.correlation_id = m.correlationId;
      a.bytes = m.bytes;
      a.copy_kind = CopyKindOf(m.copyKind);
      a.name = tracer::GpuCopyKindName(a.copy_kind);
      devices[m.contextId] = m.deviceId;
      return a;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = reinterpret_cast<const MemsetRecord&>(record);
      if (!Times(m.start, m.end, offset_ns, &a)) return std::nullopt;
      a.kind = tracer::GpuActivityKind::kMemset;
      a.device = m.deviceId;
      a.context = m.contextId;
      a.stream = m.streamId;
      a.correlation_id = m.correlationId;
      a.bytes = m.bytes;
      a.name = "memset";
      devices[m.contextId] = m.deviceId;
      return a;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = reinterpret_cast<const SyncRecord&>(record);
      if (!Times(s.start, s.end, offset_ns, &a)) return std::nullopt;
      a.kind = tracer::GpuActivityKind::kSync;
      auto device = devices.find(s.contextId);
      a.device = device != devices.end() ? device->second : 0;
      a.context = s.contextId;
      a.stream = s.streamId;
      a.correlation_id = s.correlationId;
      switch (s.type) {
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
          a.name = "event synchronize";
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
          a.name = "stream wait event";
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
          a.name = "stream synchronize";
          break;
        case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
          a.name = "context synchronize";
          break;
        default:
          a.name = "synchronize";
      }
      return a;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace pipetune::cupti::internal
