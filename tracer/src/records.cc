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
  }
  return "gpu";  // a kind from a newer writer
}

}  // namespace pipetune::tracer
