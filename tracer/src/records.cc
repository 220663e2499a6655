#include "pipetune/tracer/records.h"

namespace pipetune::tracer {

const char* GpuActivityKindName(GpuActivityKind kind) {
  switch (kind) {
    case GpuActivityKind::kKernel:
      return "kernel";
    case GpuActivityKind::kMemcpy:
      return "memcpy";
    case GpuActivityKind::kMemset:
      return "memset";
    case GpuActivityKind::kSync:
      return "sync";
  }
  return "gpu";  // a kind from a newer writer
}

const char* GpuStateName(GpuState state) {
  switch (state) {
    case GpuState::kRecording:
      return "recording";
    case GpuState::kNoGpu:
      return "no_gpu";
    case GpuState::kNoCupti:
      return "no_cupti";
    case GpuState::kConflict:
      return "subscriber_conflict";
    case GpuState::kFailed:
      return "failed";
    case GpuState::kStopped:
      return "stopped";
  }
  return "unknown";
}

const char* GpuCopyKindName(GpuCopyKind kind) {
  switch (kind) {
    case GpuCopyKind::kNone:
      return "none";
    case GpuCopyKind::kHostToDevice:
      return "HtoD";
    case GpuCopyKind::kDeviceToHost:
      return "DtoH";
    case GpuCopyKind::kDeviceToDevice:
      return "DtoD";
    case GpuCopyKind::kHostToHost:
      return "HtoH";
    case GpuCopyKind::kPeerToPeer:
      return "PtoP";
    case GpuCopyKind::kOther:
      return "other";
  }
  return "other";
}

}  // namespace pipetune::tracer
