// A small GPU "training" loop fed by pipetune's image pipeline: each step
// takes the next batch from the runtime (C++ pull API), copies it to the GPU
// and runs cuBLAS matrix products sized to a chosen step time. It records
// its steps with the tracer (wait for the batch, step time) and its GPU
// activity with pipetune::cupti, so `pipetune profile` shows whether the GPU
// waits for data. It also measures its own kernel time with CUDA events, to
// check the trace against.
//
// Usage: pipetune_gpu_train CONFIG [--seconds S] [--step-ms MS] [--matrix N]
// Prints one JSON line: images_per_second, steps_per_second, step count,
// kernels launched, kernel_seconds measured with CUDA events.
// Exit: 0 ok, 2 bad usage or bad config, 3 no usable GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tracer/tracer.h"
#ifdef PIPETUNE_GPU_TRAIN_CUPTI
#include "pipetune/cupti/gpu_tracing.h"
#endif

namespace {

using pipetune::tracer::NowNs;

struct Args {
  std::string config;
  double seconds = 20;
  double step_ms = 20;
  int matrix = 2048;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](double* out) {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      *out = std::strtod(argv[++i], &end);
      return end != nullptr && *end == '\0' && *out > 0;
    };
    double v = 0;
    if (arg == "--seconds") {
      if (!value(&a->seconds)) return false;
    } else if (arg == "--step-ms") {
      if (!value(&a->step_ms)) return false;
    } else if (arg == "--matrix") {
      if (!value(&v)) return false;
      a->matrix = static_cast<int>(v);
    } else if (a->config.empty() && arg.rfind("--", 0) != 0) {
      a->config = arg;
    } else {
      return false;
    }
  }
  return !a->config.empty();
}

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gpu_train: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// The GPU side of a step: the batch copied in, then `products` GEMMs.
class Trainer {
 public:
  bool Init(int n) {
    n_ = n;
    size_t bytes = sizeof(float) * static_cast<size_t>(n) * n;
    if (!Check(cudaStreamCreate(&stream_), "cudaStreamCreate")) return false;
    if (!Check(cudaMalloc(&a_, bytes), "cudaMalloc") || !Check(cudaMalloc(&b_, bytes), "cudaMalloc") ||
        !Check(cudaMalloc(&c_, bytes), "cudaMalloc")) {
      return false;
    }
    cudaMemset(a_, 0, bytes);
    cudaMemset(b_, 0, bytes);
    if (cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS) return false;
    cublasSetStream(blas_, stream_);
    cudaEventCreate(&begin_);
    cudaEventCreate(&end_);
    return true;
  }
  // Copies `bytes` of input in (through a pinned staging buffer).
  bool CopyIn(const void* data, size_t bytes) {
    if (bytes > staging_bytes_) {
      if (staging_ != nullptr) cudaFreeHost(staging_);
      if (input_ != nullptr) cudaFree(input_);
      if (!Check(cudaMallocHost(&staging_, bytes), "cudaMallocHost")) return false;
      if (!Check(cudaMalloc(&input_, bytes), "cudaMalloc")) return false;
      staging_bytes_ = bytes;
    }
    std::memcpy(staging_, data, bytes);
    return Check(cudaMemcpyAsync(input_, staging_, bytes, cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync");
  }
  // Runs `products` GEMMs and waits; adds their time (CUDA events) to kernel_ms.
  bool Products(int products) {
    const float one = 1.0f, zero = 0.0f;
    cudaEventRecord(begin_, stream_);
    for (int i = 0; i < products; ++i) {
      cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, n_, n_, n_, &one, a_, n_, b_, n_, &zero, c_, n_);
    }
    cudaEventRecord(end_, stream_);
    if (!Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize")) return false;
    float ms = 0;
    cudaEventElapsedTime(&ms, begin_, end_);
    kernel_ms += ms;
    launches += static_cast<uint64_t>(products);
    return true;
  }
  double kernel_ms = 0;
  uint64_t launches = 0;

 private:
  int n_ = 0;
  cudaStream_t stream_{};
  cublasHandle_t blas_{};
  cudaEvent_t begin_{}, end_{};
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  void* staging_ = nullptr;
  void* input_ = nullptr;
  size_t staging_bytes_ = 0;
};

size_t BatchBytes(const pipetune::runtime::Element& e) {
  size_t total = e.data ? e.data->size() : 0;
  for (const auto& item : e.items) total += BatchBytes(item);
  return total;
}

void Gather(const pipetune::runtime::Element& e, std::vector<uint8_t>* out) {
  if (e.data) out->insert(out->end(), e.data->begin(), e.data->end());
  for (const auto& item : e.items) Gather(item, out);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr, "usage: pipetune_gpu_train CONFIG [--seconds S] [--step-ms MS] [--matrix N]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_train: no usable GPU (cudaGetDeviceCount found none)\n");
    return 3;
  }
#ifdef PIPETUNE_GPU_TRAIN_CUPTI
  // The tracer started before main() under `pipetune profile`; GPU activity
  // goes into the same trace.
  if (pipetune::tracer::Enabled()) {
    pipetune::tracer::GpuStatus gpu = pipetune::cupti::StartGpuTracing();
    std::fprintf(stderr, "gpu_train: GPU activity: %s\n", gpu.message.c_str());
  }
#endif
  Trainer trainer;
  if (!trainer.Init(args.matrix)) return 3;
  // Size a step: time a few products, then pick how many fill step_ms.
  trainer.Products(2);
  double before = trainer.kernel_ms;
  trainer.Products(5);
  double per_product_ms = std::max(1e-3, (trainer.kernel_ms - before) / 5);
  int products = std::max(1, static_cast<int>(args.step_ms / per_product_ms + 0.5));
  trainer.kernel_ms = 0;
  trainer.launches = 0;

  auto config = pipetune::models::LoadConfig(args.config);
  if (!config.ok()) {
    std::fprintf(stderr, "gpu_train: %s\n", config.status().message().c_str());
    return 2;
  }
  pipetune::runtime::BuildOptions build;
  build.base_dir = std::filesystem::path(args.config).parent_path().string();
  auto pipeline = pipetune::runtime::Pipeline::Create(*config, build);
  if (!pipeline.ok()) {
    std::fprintf(stderr, "gpu_train: %s\n", pipeline.status().message().c_str());
    return 2;
  }
  const uint64_t start = NowNs();
  const uint64_t deadline = start + static_cast<uint64_t>(args.seconds * 1e9);
  uint64_t steps = 0, images = 0;
  std::vector<uint8_t> host;
  while (NowNs() < deadline) {
    uint64_t wait_begin = NowNs();
    pipetune::runtime::Element batch;
    auto more = (*pipeline)->Next(&batch);
    if (!more.ok()) {
      std::fprintf(stderr, "gpu_train: %s\n", more.status().message().c_str());
      return 2;
    }
    if (!*more) break;
    uint64_t step_begin = NowNs();
    host.clear();
    host.reserve(BatchBytes(batch));
    Gather(batch, &host);
    if (!trainer.CopyIn(host.data(), std::max<size_t>(host.size(), 1)) || !trainer.Products(products))
      return 3;
    uint64_t step_end = NowNs();
    pipetune::tracer::ConsumerStep(step_begin - wait_begin, step_end - step_begin, step_end);
    ++steps;
    images += batch.items.empty() ? 1 : batch.items.size();
  }
  (*pipeline)->Stop();
  double seconds = static_cast<double>(NowNs() - start) / 1e9;
#ifdef PIPETUNE_GPU_TRAIN_CUPTI
  pipetune::cupti::StopGpuTracing();
#endif
  std::printf(
      "{\"images_per_second\": %.1f, \"steps_per_second\": %.2f, \"steps\": %llu, \"products_per_step\": %d, "
      "\"kernels\": %llu, \"kernel_seconds\": %.4f, \"seconds\": %.2f}\n",
      static_cast<double>(images) / seconds, static_cast<double>(steps) / seconds,
      static_cast<unsigned long long>(steps), products, static_cast<unsigned long long>(trainer.launches),
      trainer.kernel_ms / 1e3, seconds);
  return 0;
}
