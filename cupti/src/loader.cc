// LoadCupti: libcuda, then libcupti, with dlopen; the CuptiApi over the
// symbols found. Nothing here links against CUDA.
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "pipetune/cupti/cupti_api.h"

namespace pipetune::cupti {
namespace {

using tracer::GpuState;

// The CUPTI functions, as dlsym finds them.
struct Symbols {
  CUptiResult (*get_version)(uint32_t*) = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*get_num_dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc) = nullptr;  // optional
  CUptiResult (*get_timestamp)(uint64_t*) = nullptr;
  CUptiResult (*result_string)(CUptiResult, const char**) = nullptr;  // optional
};

class DlopenCuptiApi : public CuptiApi {
 public:
  explicit DlopenCuptiApi(const Symbols& s) : s_(s) {}
  // The library stays loaded: CUPTI may call back until the process ends.
  CUptiResult GetVersion(uint32_t* v) override { return s_.get_version(v); }
  CUptiResult Subscribe(CUpti_SubscriberHandle* h, CUpti_CallbackFunc f, void* d) override {
    return s_.subscribe(h, f, d);
  }
  CUptiResult Unsubscribe(CUpti_SubscriberHandle h) override { return s_.unsubscribe(h); }
  CUptiResult ActivityEnable(CUpti_ActivityKind k) override { return s_.enable(k); }
  CUptiResult ActivityDisable(CUpti_ActivityKind k) override { return s_.disable(k); }
  CUptiResult ActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc a,
                                        CUpti_BuffersCallbackCompleteFunc b) override {
    return s_.register_callbacks(a, b);
  }
  CUptiResult ActivityFlushAll(uint32_t flag) override { return s_.flush_all(flag); }
  CUptiResult ActivityGetNextRecord(uint8_t* b, size_t n, CUpti_Activity** r) override {
    return s_.get_next_record(b, n, r);
  }
  CUptiResult ActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t* d) override {
    return s_.get_num_dropped(c, s, d);
  }
  bool HasTimestampCallback() const override { return s_.register_timestamp != nullptr; }
  CUptiResult ActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) override {
    return s_.register_timestamp != nullptr ? s_.register_timestamp(f) : CUPTI_ERROR_NOT_SUPPORTED;
  }
  CUptiResult GetTimestamp(uint64_t* t) override { return s_.get_timestamp(t); }
  std::string ResultString(CUptiResult r) override {
    const char* text = nullptr;
    if (s_.result_string != nullptr && s_.result_string(r, &text) == CUPTI_SUCCESS && text != nullptr)
      return text;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  }

 private:
  Symbols s_;
};

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

Loaded Fail(GpuState state, std::string message) {
  Loaded out;
  out.status.state = state;
  out.status.message = std::move(message);
  return out;
}

// The first of `names` that dlopen loads; errors of each go to *errors.
void* OpenFirst(const std::vector<std::string>& names, std::string* errors, std::string* opened) {
  for (const std::string& name : names) {
    if (name.empty()) continue;
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *opened = name;
      return h;
    }
    if (!errors->empty()) *errors += "; ";
    *errors += DlError();
  }
  return nullptr;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

template <class F>
bool Find(void* lib, const char* name, F** out, std::string* missing) {
  *out = reinterpret_cast<F*>(dlsym(lib, name));
  if (*out == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

}  // namespace

bool CompatibleCuptiVersion(uint32_t version, std::string* why) {
  // CUDA 13 numbers the API as major * 10000 + minor (130001); CUDA 12 and
  // older used small integers, with other record layouts.
  const uint32_t built_major = CUPTI_API_VERSION / 10000;
  if (version / 10000 == built_major && built_major > 0) return true;
  if (why != nullptr) {
    *why = "libcupti reports CUPTI API version " + std::to_string(version) +
           "; this pipetune was built with " + std::to_string(CUPTI_API_VERSION) + " (CUDA " +
           std::to_string(built_major) + "), whose record layouts it decodes: GPU activity is not recorded";
  }
  return false;
}

Loaded LoadCupti(const LoadOptions& options) {
  std::string cuda_name = !Env("PIPETUNE_LIBCUDA").empty() ? Env("PIPETUNE_LIBCUDA")
                          : !options.libcuda.empty()       ? options.libcuda
                                                           : "libcuda.so.1";
  std::string errors, opened;
  void* cuda = OpenFirst({cuda_name}, &errors, &opened);
  if (cuda == nullptr) {
    return Fail(GpuState::kNoGpu, "no NVIDIA driver: " + cuda_name + " could not be loaded (" + errors + ")");
  }
  if (options.probe_devices) {
    using InitFn = int(unsigned);
    using CountFn = int(int*);
    InitFn* init = reinterpret_cast<InitFn*>(dlsym(cuda, "cuInit"));
    CountFn* count = reinterpret_cast<CountFn*>(dlsym(cuda, "cuDeviceGetCount"));
    if (init == nullptr || count == nullptr)
      return Fail(GpuState::kNoGpu, cuda_name + " lacks cuInit/cuDeviceGetCount");
    int devices = 0;
    int r = init(0);
    if (r != 0) return Fail(GpuState::kNoGpu, "no GPU: cuInit failed with CUDA error " + std::to_string(r));
    if (count(&devices) != 0 || devices <= 0)
      return Fail(GpuState::kNoGpu, "no GPU: the driver reports no device");
  }

  std::vector<std::string> cupti_names;
  if (!Env("PIPETUNE_LIBCUPTI").empty()) {
    cupti_names = {Env("PIPETUNE_LIBCUPTI")};
  } else if (!options.libcupti.empty()) {
    cupti_names = {options.libcupti};
  } else {
    cupti_names = {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                   "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
  }
  errors.clear();
  void* lib = OpenFirst(cupti_names, &errors, &opened);
  if (lib == nullptr) {
    return Fail(GpuState::kNoCupti, "the NVIDIA driver is there but libcupti could not be loaded (" + errors +
                                        "); set PIPETUNE_LIBCUPTI to its path");
  }
  Symbols s;
  std::string missing;
  if (!Find(lib, "cuptiGetVersion", &s.get_version, &missing)) {
    return Fail(GpuState::kNoCupti, opened + " has no cuptiGetVersion: not a CUPTI library");
  }
  uint32_t version = 0;
  std::string why;
  if (s.get_version(&version) != CUPTI_SUCCESS)
    return Fail(GpuState::kNoCupti, opened + ": cuptiGetVersion failed");
  if (!CompatibleCuptiVersion(version, &why)) {
    Loaded out = Fail(GpuState::kNoCupti, why);
    out.status.cupti_version = version;
    return out;
  }
  Find(lib, "cuptiSubscribe", &s.subscribe, &missing);
  Find(lib, "cuptiUnsubscribe", &s.unsubscribe, &missing);
  Find(lib, "cuptiActivityEnable", &s.enable, &missing);
  Find(lib, "cuptiActivityDisable", &s.disable, &missing);
  Find(lib, "cuptiActivityRegisterCallbacks", &s.register_callbacks, &missing);
  Find(lib, "cuptiActivityFlushAll", &s.flush_all, &missing);
  Find(lib, "cuptiActivityGetNextRecord", &s.get_next_record, &missing);
  Find(lib, "cuptiActivityGetNumDroppedRecords", &s.get_num_dropped, &missing);
  Find(lib, "cuptiGetTimestamp", &s.get_timestamp, &missing);
  if (!missing.empty()) {
    Loaded out = Fail(GpuState::kNoCupti, opened + " lacks " + missing);
    out.status.cupti_version = version;
    return out;
  }
  std::string optional_missing;
  Find(lib, "cuptiActivityRegisterTimestampCallback", &s.register_timestamp, &optional_missing);
  Find(lib, "cuptiGetResultString", &s.result_string, &optional_missing);
  Loaded out;
  out.api = std::make_unique<DlopenCuptiApi>(s);
  out.status.cupti_version = version;
  return out;
}

}  // namespace pipetune::cupti
