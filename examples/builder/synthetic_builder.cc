// A small synthetic pipeline built in code: a range, two CPU-bound maps (one
// built-in, one the program's own function object), a batch and a prefetch.
// synthetic_builder.json is its JSON twin.
//
//   synthetic_builder [--seconds S] [--print-config]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pipetune/runtime/builder.h"

namespace {

using pipetune::Status;
using pipetune::runtime::Element;
using pipetune::runtime::FnContext;

constexpr int kWorkUs = 400;

// A function object: spins for `us` microseconds of CPU per element.
struct Spin {
  int us;
  Status operator()(Element&, const FnContext& context) const {
    volatile uint64_t x = context.seed;
    for (int i = 0; i < us * 200; ++i) x = x * 6364136223846793005ULL + 1;
    return Status::Ok();
  }
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--print-config") == 0) {
      print_config = true;
    } else {
      std::fprintf(stderr, "usage: synthetic_builder [--seconds S] [--print-config]\n");
      return 2;
    }
  }
  pipetune::runtime::PipelineBuilder b("synthetic_builder");
  b.Range("source", 4000);
  b.Map("decode", "cpu_work").Arg("us", kWorkUs).Parallelism(1);
  b.Map("augment", "spin", Spin{kWorkUs}).Parallelism(1);
  b.Batch("batch", 32);
  b.Prefetch("prefetch").Buffer(1);
  if (print_config) {
    pipetune::StatusOr<std::string> json = b.ToJson();
    if (!json.ok()) {
      std::fprintf(stderr, "synthetic_builder: %s\n", json.status().message().c_str());
      return 2;
    }
    std::fputs(json->c_str(), stdout);
    return 0;
  }
  pipetune::runtime::RunOptions options;
  options.max_seconds = seconds;
  pipetune::StatusOr<pipetune::runtime::RunSummary> summary = b.Run(options);
  if (!summary.ok()) {
    std::fprintf(stderr, "synthetic_builder: %s\n", summary.status().message().c_str());
    return 2;
  }
  std::printf("throughput: %.3f outputs/s over %.1f s\n", summary->throughput, summary->seconds);
  return 0;
}
