// Element functions with known costs, for pipelines that need no data:
//   cpu_work   args us (required), jitter (0..1), bytes: `us` microseconds of
//              CPU per element, really burnt in a calibrated spin loop
//   io_wait    args ms (required), jitter (0..1): `ms` of latency per element
//              with no CPU use (a sleep), like a remote object store
//   keep_every args n (required): a filter keeping elements whose id % n == 0
// With jitter j an element's cost is scaled by 1 + j*u, u in [-1, 1) drawn
// from the element's id: it varies between elements, the mean stays put, and
// the same element costs the same in every epoch and every run.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "pipetune/base/clock.h"
#include "pipetune/runtime/function_registry.h"
#include "stage.h"

namespace pipetune::runtime {
namespace {

// A dependent chain of 64-bit multiply-adds: latency-bound, so it leaves the
// other execution ports (and an SMT sibling) alone and runs at a steady rate;
// the empty asm keeps the compiler from folding or vectorizing the loop.
uint64_t Spin(uint64_t iterations, uint64_t x) {
  for (uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// Spin iterations per nanosecond of this thread's CPU time: the median of a
// few runs of about a millisecond each, measured once per process (~15 ms).
double SpinRatePerNs() {
  static const double rate = [] {
    constexpr uint64_t kIterations = 1u << 20;
    std::vector<double> rates;
    uint64_t sink = 0;
    for (int trial = 0; trial < 11; ++trial) {
      uint64_t begin = ThreadCpuNs();
      sink += Spin(kIterations, sink + static_cast<uint64_t>(trial));
      uint64_t end = ThreadCpuNs();
      rates.push_back(static_cast<double>(kIterations) /
                      static_cast<double>(std::max<uint64_t>(end - begin, 1)));
    }
    std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
    asm volatile("" : : "r"(sink));
    return rates[rates.size() / 2];
  }();
  return rate;
}

// 1 + jitter * u with u in [-1, 1), fixed per element id.
double JitterFactor(double jitter, uint64_t id) {
  if (jitter <= 0) return 1.0;
  double u = static_cast<double>(Mix64(id ^ 0x6a09e667f3bcc908ull) >> 11) * 0x1.0p-53;  // [0, 1)
  return 1.0 + jitter * (2.0 * u - 1.0);
}

StatusOr<double> RequiredNumber(const models::StageConfig& stage, std::string_view key,
                                std::string_view what) {
  PIPETUNE_ASSIGN_OR_RETURN(auto value, models::ArgNumber(stage, key, 0));
  if (!value) {
    return InvalidInput(
        models::StageKeyError(stage, fmt::format("args.{}", key), fmt::format("missing: {}", what)));
  }
  return *value;
}

StatusOr<double> Jitter(const models::StageConfig& stage) {
  PIPETUNE_ASSIGN_OR_RETURN(auto jitter, models::ArgNumber(stage, "jitter", 0));
  if (jitter && *jitter > 1) {
    return InvalidInput(models::StageKeyError(
        stage, "args.jitter", fmt::format("expected a fraction between 0 and 1, got {}", *jitter)));
  }
  return jitter.value_or(0);
}

class CpuWork : public MapFunction {
 public:
  CpuWork(double us, double jitter, std::optional<uint64_t> bytes)
      : iterations_per_us_(SpinRatePerNs() * 1000.0), us_(us), jitter_(jitter), bytes_(bytes) {}

  Status Apply(Element& element, const FnContext&) const override {
    double us = us_ * JitterFactor(jitter_, element.id);
    uint64_t result = Spin(static_cast<uint64_t>(us * iterations_per_us_), element.id);
    if (bytes_) {
      auto data = std::make_shared<Bytes>(*bytes_);
      std::memcpy(data->data(), &result, std::min<uint64_t>(sizeof(result), *bytes_));
      element.dtype = DType::kBytes;
      element.shape = {0, 0, 0};
      element.data = std::move(data);
    } else {
      asm volatile("" : : "r"(result));
    }
    return Status::Ok();
  }

 private:
  const double iterations_per_us_;
  const double us_;
  const double jitter_;
  const std::optional<uint64_t> bytes_;
};

class IoWait : public MapFunction {
 public:
  IoWait(double ms, double jitter) : ms_(ms), jitter_(jitter) {}

  Status Apply(Element& element, const FnContext&) const override {
    double ns = ms_ * 1e6 * JitterFactor(jitter_, element.id);
    if (ns >= 1) std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<int64_t>(ns)));
    return Status::Ok();
  }

 private:
  const double ms_;
  const double jitter_;
};

class KeepEvery : public FilterFunction {
 public:
  explicit KeepEvery(uint64_t n) : n_(n) {}
  StatusOr<bool> Keep(const Element& element, const FnContext&) const override {
    return element.id % n_ == 0;
  }

 private:
  const uint64_t n_;
};

}  // namespace

void RegisterSyntheticFunctions(FunctionRegistry& registry) {
  registry.RegisterMap(
      "cpu_work", [](const models::StageConfig& stage) -> StatusOr<std::unique_ptr<MapFunction>> {
        PIPETUNE_ASSIGN_OR_RETURN(
            double us,
            RequiredNumber(stage, "us", "cpu_work needs the microseconds of CPU work per element"));
        PIPETUNE_ASSIGN_OR_RETURN(double jitter, Jitter(stage));
        PIPETUNE_ASSIGN_OR_RETURN(auto bytes, models::ArgSize(stage, "bytes"));
        return std::unique_ptr<MapFunction>(new CpuWork(us, jitter, bytes));
      });
  registry.RegisterMap(
      "io_wait", [](const models::StageConfig& stage) -> StatusOr<std::unique_ptr<MapFunction>> {
        PIPETUNE_ASSIGN_OR_RETURN(
            double ms, RequiredNumber(stage, "ms", "io_wait needs the milliseconds of latency per element"));
        PIPETUNE_ASSIGN_OR_RETURN(double jitter, Jitter(stage));
        return std::unique_ptr<MapFunction>(new IoWait(ms, jitter));
      });
  registry.RegisterFilter(
      "keep_every", [](const models::StageConfig& stage) -> StatusOr<std::unique_ptr<FilterFunction>> {
        PIPETUNE_ASSIGN_OR_RETURN(auto n, models::ArgInt(stage, "n", 1));
        if (!n) {
          return InvalidInput(
              models::StageKeyError(stage, "args.n", "missing: keep_every keeps one element in n"));
        }
        return std::unique_ptr<FilterFunction>(new KeepEvery(static_cast<uint64_t>(*n)));
      });
}

}  // namespace pipetune::runtime
