// The CUPTI calls pipetune makes, behind a small interface (in the manner of
// PyTorch's Kineto), so that the recorder runs the same against the real
// libcupti (LoadCupti: dlopen at run time) and against tests that hand it
// activity records built with cupti.h's struct layouts, without a GPU.
//
// Every method mirrors the CUPTI function of the same name and returns its
// CUptiResult; none throws. Methods are called from the recorder's thread and
// from CUPTI's buffer callbacks (any thread); implementations must allow both.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <memory>
#include <string>

#include "pipetune/tracer/records.h"

namespace pipetune::cupti {

class CuptiApi {
 public:
  virtual ~CuptiApi() = default;
  virtual CUptiResult GetVersion(uint32_t* version) = 0;
  virtual CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                void* user_data) = 0;
  virtual CUptiResult Unsubscribe(CUpti_SubscriberHandle subscriber) = 0;
  virtual CUptiResult ActivityEnable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult ActivityDisable(CUpti_ActivityKind kind) = 0;
  virtual CUptiResult ActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                CUpti_BuffersCallbackCompleteFunc completed) = 0;
  virtual CUptiResult ActivityFlushAll(uint32_t flag) = 0;
  virtual CUptiResult ActivityGetNextRecord(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) = 0;
  virtual CUptiResult ActivityGetNumDroppedRecords(CUcontext context, uint32_t stream, size_t* dropped) = 0;
  // False when this libcupti lacks cuptiActivityRegisterTimestampCallback:
  // the recorder then measures the offset between CUPTI's clock and ours.
  virtual bool HasTimestampCallback() const = 0;
  virtual CUptiResult ActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) = 0;
  virtual CUptiResult GetTimestamp(uint64_t* timestamp) = 0;
  // cuptiGetResultString, or "CUPTI error N" when it has none.
  virtual std::string ResultString(CUptiResult result) = 0;
};

// Where LoadCupti looks. Empty fields take the defaults: libcuda.so.1, and
// libcupti.so.13, libcupti.so, then the toolkit's lib64/ and
// extras/CUPTI/lib64/ under /usr/local/cuda. PIPETUNE_LIBCUDA and
// PIPETUNE_LIBCUPTI (paths) override both defaults and these fields.
struct LoadOptions {
  std::string libcuda;
  std::string libcupti;
  // Call cuInit and cuDeviceGetCount to tell "no GPU" from "no CUPTI".
  // False inside InitializeInjection: CUDA is initialising then, and is
  // there (it loaded us); calling back into it would deadlock.
  bool probe_devices = true;
};

// The result of loading: `api` when CUPTI can be used, else `status` says
// why not (state kNoGpu or kNoCupti, and a sentence).
struct Loaded {
  std::unique_ptr<CuptiApi> api;
  tracer::GpuStatus status;
};

// dlopen's libcuda, then libcupti, and checks cuptiGetVersion against the
// API this pipetune was built with (CUPTI_API_VERSION: record layouts differ
// between major versions). Never fails hard: a missing library or symbol
// is a status.
Loaded LoadCupti(const LoadOptions& options = {});

// Whether the CUPTI API version a library reports has the record layouts
// this build decodes (the same major version as the cupti.h it was built
// with); `why` is set when not.
bool CompatibleCuptiVersion(uint32_t version, std::string* why);

}  // namespace pipetune::cupti
