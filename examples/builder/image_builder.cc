// The image pipeline of examples/image/image_train.json built in C++ code
// (pipetune/runtime/builder.h), repeating its files for as long as it runs,
// with one element function of the program's own: a brightness jitter
// written as a lambda. image_builder.json is its JSON
// twin: the same config, knob for knob (a test checks it).
//
//   image_builder [--dir DIR] [--seconds S] [--print-config]
//
// DIR holds data/*.jpg (pipetune_make_images --out DIR/data); default: the
// current directory. Prints the throughput on stdout. It links the tracer, so
//   pipetune profile -- ./image_builder --seconds 10
// records it, and `pipetune tune TRACE --source image_builder.cc` rewrites the
// knobs below in place (docs/rewrite.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pipetune/runtime/builder.h"

namespace {

using pipetune::Status;
using pipetune::runtime::DType;
using pipetune::runtime::Element;
using pipetune::runtime::FnContext;
using pipetune::runtime::PipelineBuilder;

// Workers decoding JPEGs: the stage that limits this pipeline untuned.
constexpr int kDecodeWorkers = 1;

// Scales an 8-bit image's pixels by a factor in [0.8, 1.2) drawn from the
// element's seed: a random augmentation, different every epoch.
Status Brightness(Element& element, const FnContext& context) {
  if (element.dtype != DType::kU8 || !element.data) {
    return pipetune::InvalidInput("brightness: expected an 8-bit image");
  }
  const double factor = 0.8 + 0.4 * static_cast<double>(context.seed % 1024) / 1024.0;
  auto out = std::make_shared<pipetune::runtime::Bytes>(*element.data);
  for (uint8_t& v : *out) {
    const double scaled = v * factor;
    v = scaled > 255.0 ? 255 : static_cast<uint8_t>(scaled);
  }
  element.data = std::move(out);
  return Status::Ok();
}

void BuildImagePipeline(PipelineBuilder& b) {
  b.Cores(2).Memory("4GiB").StepTimeMs(20);
  b.ListFiles("files", "data/*.jpg").Arg("shuffle_seed", 7);
  b.Repeat("repeat");  // epochs until --seconds: a few hundred images make a steady run
  b.ReadFile("read").Parallelism(1);
  b.Map("decode", "jpeg_decode").Parallelism(kDecodeWorkers);
  b.Map("augment", "random_crop_flip").Arg("size", 224).Parallelism(1).Random();
  // The program's own function, beside the built-in ones.
  b.Map("brightness", [](Element& e, const FnContext& c) { return Brightness(e, c); })
      .Parallelism(1)
      .Random();
  b.Map("normalize", "normalize").Parallelism(1);
  b.Batch("batch", 64);
  b.Prefetch("prefetch").Buffer(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  double seconds = 10;
  bool print_config = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--print-config") == 0) {
      print_config = true;
    } else {
      std::fprintf(stderr, "usage: image_builder [--dir DIR] [--seconds S] [--print-config]\n");
      return 2;
    }
  }
  PipelineBuilder builder("image_builder");
  BuildImagePipeline(builder);
  if (print_config) {
    pipetune::StatusOr<std::string> json = builder.ToJson();
    if (!json.ok()) {
      std::fprintf(stderr, "image_builder: %s\n", json.status().message().c_str());
      return 2;
    }
    std::fputs(json->c_str(), stdout);
    return 0;
  }
  pipetune::runtime::RunOptions options;
  options.max_seconds = seconds;
  options.base_dir = dir;
  pipetune::StatusOr<pipetune::runtime::RunSummary> summary = builder.Run(options);
  if (!summary.ok()) {
    std::fprintf(stderr, "image_builder: %s\n", summary.status().message().c_str());
    return 2;
  }
  std::printf("throughput: %.3f outputs/s (%.1f images/s) over %.1f s, consumer stalled %.0f%%\n",
              summary->throughput, summary->examples_per_second, summary->seconds,
              100 * summary->stall_fraction);
  return 0;
}
