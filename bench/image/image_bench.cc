// pipetune_image_bench: the C++ side of the image pipeline comparison with
// PyTorch's DataLoader (bench/image/compare.sh runs both).
//
//   pipetune_image_bench pipeline CONFIG [--seconds S] [--runs N]
//     Runs CONFIG with RunPipeline, the consumer draining as fast as it can,
//     and prints images/s in the steady state: from the first batch out to
//     the last (thread start-up and the first fill of the buffers excluded,
//     as the Python side excludes worker start-up), and images per CPU-second
//     of the whole process (a measure that other load on the machine
//     disturbs less), over the whole run and over the steady window alone.
//     Best of N runs.
//
//   pipetune_image_bench stages DIR [--count N]
//     Single-thread cost of each image function, microseconds of CPU per
//     image over N files of DIR held in memory (file reads excluded):
//     jpeg_decode, random_crop_flip 224, normalize, the fused
//     jpeg_decode{crop_size: 224} (exact), the same with normalize folded
//     into its resampling ({normalize: true}), and the fused one with DCT-scaled
//     decoding allowed (max_scale_down 8); and that option's difference from
//     the exact output in levels, at crop_size 112 (at 224 our files' crops
//     are rarely large enough for it to apply). Outputs are dropped in batches of 64, as
//     a pipeline's consumer drops them, so buffer reuse is what a run sees.
//     Last, "cpp_us fused.libjpeg_window": the part of the fused decode
//     spent inside libjpeg-turbo (the same crops' windows decoded, nothing
//     else), the floor no change to pipetune's own code goes below.
//
//   pipetune_image_bench dump FILE OUT_PREFIX [SEED]
//     Writes OUT_PREFIX.decoded.rgb (jpeg_decode), OUT_PREFIX.224.rgb
//     (resize to 224x224) and OUT_PREFIX.crop.rgb (the fused
//     jpeg_decode{crop_size: 224} with FnContext seed SEED, default 1) as raw
//     RGB bytes, prints their shapes, and prints the crop the fused op drew
//     ("crop X Y WIDTH HEIGHT FLIP", the same draw random_crop_flip makes):
//     check_pixels.py compares them with Pillow's.
//
// Every result line is "key value"; compare.sh greps them.
#include <glob.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "image_jpeg.h"     // runtime/src: DecodeJpegRegion, libjpeg's part of the fused decode
#include "image_kernels.h"  // runtime/src: SampleResizedCrop, to tell Pillow the crop
#include "pipetune/base/clock.h"
#include "pipetune/base/rng.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/function_registry.h"
#include "pipetune/runtime/pipeline.h"

namespace {

using namespace pipetune;

double ThreadCpuMicros() { return static_cast<double>(ThreadCpuNs()) / 1e3; }

int Fail(const std::string& message) {
  std::fprintf(stderr, "pipetune_image_bench: %s\n", message.c_str());
  return 2;
}

int RunPipelineMode(const std::string& config_path, double seconds, int runs) {
  StatusOr<models::PipelineConfig> config = models::LoadConfig(config_path);
  if (!config.ok()) return Fail(config.status().message());
  config->consumer.step_time_ms.reset();  // drain: measure the pipeline, not a trainer
  double best = 0, best_per_cpu = 0, best_steady_per_cpu = 0;
  for (int run = 0; run < runs; ++run) {
    using Clock = std::chrono::steady_clock;
    Clock::time_point first, last;
    double cpu_first = 0, cpu_last = 0;  // process CPU seconds at the first and the last batch out
    uint64_t images_after_first = 0;
    bool seen_first = false;
    runtime::RunOptions options;
    options.max_seconds = seconds;
    options.base_dir = std::filesystem::path(config_path).parent_path().string();
    options.on_output = [&](const runtime::Element& batch) {
      const Clock::time_point now = Clock::now();
      if (!seen_first) {
        seen_first = true;
        first = now;
        cpu_first = ProcessCpuSeconds();
        return;
      }
      images_after_first += batch.items.empty() ? 1 : batch.items.size();
      last = now;
      cpu_last = ProcessCpuSeconds();
    };
    const double cpu_start = ProcessCpuSeconds();
    StatusOr<runtime::RunSummary> summary = runtime::RunPipeline(*config, options);
    if (!summary.ok()) return Fail(summary.status().message());
    const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
    const double window = std::chrono::duration<double>(last - first).count();
    const double rate = window > 0 ? images_after_first / window : 0;
    const double per_cpu = cpu_seconds > 0 ? summary->source_elements / cpu_seconds : 0;
    // The same window as the steady rate: start-up and the first fill of
    // the buffers (fresh pages for every buffer in flight) left out.
    const double steady_per_cpu = cpu_last > cpu_first ? images_after_first / (cpu_last - cpu_first) : 0;
    std::printf(
        "run %d: %.1f images/s steady (%.1f overall, %llu images in %.2f s), %.1f images per CPU-second "
        "(%.1f steady)\n",
        run + 1, rate, summary->examples_per_second,
        static_cast<unsigned long long>(summary->source_elements), summary->seconds, per_cpu, steady_per_cpu);
    best = std::max(best, rate);
    best_per_cpu = std::max(best_per_cpu, per_cpu);
    best_steady_per_cpu = std::max(best_steady_per_cpu, steady_per_cpu);
  }
  std::printf("pipetune_images_per_cpu_second %.1f\n", best_per_cpu);
  std::printf("pipetune_steady_images_per_cpu_second %.1f\n", best_steady_per_cpu);
  std::printf("pipetune_images_per_second %.1f\n", best);
  return 0;
}

struct Stage {
  const char* label;
  std::unique_ptr<runtime::MapFunction> fn;
};

StatusOr<std::unique_ptr<runtime::MapFunction>> Make(const runtime::FunctionRegistry& registry,
                                                     const char* fn, Json args, bool random) {
  models::StageConfig stage;
  stage.name = fn;
  stage.fn = fn;
  stage.args = std::move(args);
  stage.random = random;
  return registry.MakeMap(stage);
}

// The seed TimeChain gives the first function of a chain for file i.
uint64_t ChainSeed(size_t i) { return i * 0x9E3779B97F4A7C15ull; }

// CPU microseconds per image of each stage of a chain, applied image by image.
StatusOr<std::vector<double>> TimeChain(const std::vector<runtime::Element>& files,
                                        const std::vector<const runtime::MapFunction*>& chain) {
  std::vector<double> micros(chain.size(), 0.0);
  std::vector<runtime::Element> batch;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms caches and the buffer pool
    std::fill(micros.begin(), micros.end(), 0.0);
    for (size_t i = 0; i < files.size(); ++i) {
      runtime::Element element = files[i];
      for (size_t s = 0; s < chain.size(); ++s) {
        const double start = ThreadCpuMicros();
        Status status = chain[s]->Apply(element, runtime::FnContext{ChainSeed(i) + s});
        micros[s] += ThreadCpuMicros() - start;
        if (!status.ok()) return status;
      }
      batch.push_back(std::move(element));
      if (batch.size() == 64) batch.clear();
    }
    batch.clear();
  }
  for (double& m : micros) m /= static_cast<double>(files.size());
  return micros;
}

// CPU microseconds per image inside libjpeg-turbo for the fused decode's
// windows: the crop each file's seed draws (as the fused jpeg_decode draws
// it, image_functions.cc's DrawCrop), decoded with DecodeJpegRegion alone.
StatusOr<double> TimeLibjpegWindows(const std::vector<runtime::Element>& files) {
  std::vector<uint8_t> scratch;
  double micros = 0;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms caches
    micros = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      const runtime::Bytes& jpeg = *files[i].data;
      StatusOr<runtime::image::JpegInfo> info = runtime::image::ReadJpegInfo(jpeg.data(), jpeg.size());
      if (!info.ok()) return info.status();
      pipetune::Rng rng(ChainSeed(i));
      const runtime::image::PixelCrop crop = runtime::image::SampleResizedCrop(
          info->height, info->width, runtime::image::ResizedCropSampling{}, rng);
      const double start = ThreadCpuMicros();
      StatusOr<runtime::image::ImageView> view =
          runtime::image::DecodeJpegRegion(jpeg.data(), jpeg.size(), {}, crop, scratch);
      micros += ThreadCpuMicros() - start;
      if (!view.ok()) return view.status();
    }
  }
  return micros / static_cast<double>(files.size());
}

// The opt-in DCT-scaled fused decode against the exact one, same seeds.
void PrintScaledError(const std::vector<runtime::Element>& files, const runtime::MapFunction& exact,
                      const runtime::MapFunction& scaled) {
  double total = 0, values = 0;
  int max_difference = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    runtime::Element a = files[i], b = files[i];
    if (!exact.Apply(a, runtime::FnContext{i}).ok() || !scaled.Apply(b, runtime::FnContext{i}).ok()) continue;
    for (size_t k = 0; k < a.data->size(); ++k) {
      const int d = std::abs(int((*a.data)[k]) - int((*b.data)[k]));
      total += d;
      max_difference = std::max(max_difference, d);
    }
    values += static_cast<double>(a.data->size());
  }
  std::printf("scaled_decode_112_mean_abs_difference %.3f\n", values > 0 ? total / values : 0.0);
  std::printf("scaled_decode_112_max_abs_difference %d\n", max_difference);
}

int RunStagesMode(const std::string& dir, size_t count) {
  glob_t matches;
  const std::string pattern = dir + "/*.jpg";
  if (glob(pattern.c_str(), 0, nullptr, &matches) != 0) return Fail("no JPEG files in " + dir);
  std::vector<runtime::Element> files;
  for (size_t i = 0; i < matches.gl_pathc && files.size() < count; ++i) {
    std::ifstream in(matches.gl_pathv[i], std::ios::binary);
    runtime::Element element;
    element.id = i;
    element.path = matches.gl_pathv[i];
    element.dtype = runtime::DType::kBytes;
    element.data = std::make_shared<runtime::Bytes>(std::istreambuf_iterator<char>(in),
                                                    std::istreambuf_iterator<char>());
    files.push_back(std::move(element));
  }
  globfree(&matches);

  runtime::FunctionRegistry registry;
  runtime::RegisterImageFunctions(registry);
  struct Chain {
    std::string name;
    std::vector<std::pair<std::string, std::unique_ptr<runtime::MapFunction>>> stages;
  };
  auto make = [&](const char* fn, Json args, bool random) {
    auto made = Make(registry, fn, std::move(args), random);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().message().c_str());
      std::exit(2);
    }
    return std::move(made).value();
  };
  std::vector<Chain> chains;
  {
    Chain c{"separate", {}};
    c.stages.emplace_back("decode", make("jpeg_decode", Json::object(), false));
    c.stages.emplace_back("crop_flip", make("random_crop_flip", {{"size", 224}}, true));
    c.stages.emplace_back("normalize", make("normalize", Json::object(), false));
    chains.push_back(std::move(c));
  }
  {
    Chain c{"separate_bilinear", {}};
    c.stages.emplace_back("decode", make("jpeg_decode", Json::object(), false));
    c.stages.emplace_back("crop_flip", make("random_crop_flip", {{"size", 224}, {"antialias", false}}, true));
    chains.push_back(std::move(c));
  }
  {
    Chain c{"fused", {}};
    c.stages.emplace_back("decode_crop_flip", make("jpeg_decode", {{"crop_size", 224}}, true));
    c.stages.emplace_back("normalize", make("normalize", Json::object(), false));
    chains.push_back(std::move(c));
  }
  {
    // normalize folded into the fused decode's resampling (what a chain of
    // the two runs): one pass writing floats.
    Chain c{"fused_folded", {}};
    c.stages.emplace_back("decode_crop_flip_normalize",
                          make("jpeg_decode", {{"crop_size", 224}, {"normalize", true}}, true));
    chains.push_back(std::move(c));
  }
  {
    Chain c{"fused_scaled", {}};
    c.stages.emplace_back("decode_crop_flip",
                          make("jpeg_decode", {{"crop_size", 224}, {"max_scale_down", 8}}, true));
    c.stages.emplace_back("normalize", make("normalize", Json::object(), false));
    chains.push_back(std::move(c));
  }
  std::printf("%zu files from %s, single thread, CPU us per image\n", files.size(), dir.c_str());
  // At 224 our files' crops are rarely 448 px on both sides, so the error
  // is measured at 112, where most crops allow 1/2 or 1/4.
  PrintScaledError(files, *make("jpeg_decode", {{"crop_size", 112}}, true),
                   *make("jpeg_decode", {{"crop_size", 112}, {"max_scale_down", 8}}, true));
  for (const Chain& chain : chains) {
    std::vector<const runtime::MapFunction*> fns;
    for (const auto& stage : chain.stages) fns.push_back(stage.second.get());
    StatusOr<std::vector<double>> micros = TimeChain(files, fns);
    if (!micros.ok()) return Fail(micros.status().message());
    double total = 0;
    for (size_t s = 0; s < fns.size(); ++s) {
      std::printf("cpp_us %s.%s %.1f\n", chain.name.c_str(), chain.stages[s].first.c_str(), (*micros)[s]);
      total += (*micros)[s];
    }
    std::printf("cpp_us %s.total %.1f\n", chain.name.c_str(), total);
  }
  StatusOr<double> libjpeg = TimeLibjpegWindows(files);
  if (!libjpeg.ok()) return Fail(libjpeg.status().message());
  std::printf("cpp_us fused.libjpeg_window %.1f\n", *libjpeg);
  return 0;
}

Status Dump(const runtime::Element& element, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(element.data->data()),
            static_cast<std::streamsize>(element.data->size()));
  if (!out) return Failed("cannot write " + path);
  return Status::Ok();
}

int RunDumpMode(const std::string& file, const std::string& out_prefix, uint64_t seed) {
  runtime::FunctionRegistry registry;
  runtime::RegisterImageFunctions(registry);
  auto decode = Make(registry, "jpeg_decode", Json::object(), false);
  auto resize = Make(registry, "resize", {{"height", 224}, {"width", 224}}, false);
  auto fused = Make(registry, "jpeg_decode", {{"crop_size", 224}}, true);
  if (!decode.ok() || !resize.ok() || !fused.ok()) return Fail("cannot build the functions");
  std::ifstream in(file, std::ios::binary);
  runtime::Element jpeg;
  jpeg.path = file;
  jpeg.dtype = runtime::DType::kBytes;
  jpeg.data =
      std::make_shared<runtime::Bytes>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  runtime::Element element = jpeg;
  int height = 0, width = 0;
  for (const auto& [fn, suffix] : {std::pair{decode->get(), ".decoded.rgb"}, {resize->get(), ".224.rgb"}}) {
    Status status = fn->Apply(element, runtime::FnContext{0});
    if (status.ok()) status = Dump(element, out_prefix + suffix);
    if (!status.ok()) return Fail(status.message());
    std::printf("%s %d %d\n", suffix + 1, element.shape[0], element.shape[1]);
    if (height == 0) height = element.shape[0], width = element.shape[1];
  }
  runtime::Element cropped = jpeg;
  Status status = (*fused)->Apply(cropped, runtime::FnContext{seed});
  if (status.ok()) status = Dump(cropped, out_prefix + ".crop.rgb");
  if (!status.ok()) return Fail(status.message());
  // The draw the fused op made (image_functions.cc's DrawCrop): the crop,
  // then the flip, from one stream seeded by the element's seed.
  pipetune::Rng rng(seed);
  const runtime::image::PixelCrop crop =
      runtime::image::SampleResizedCrop(height, width, runtime::image::ResizedCropSampling{}, rng);
  const bool flip = rng.Uniform(0.0, 1.0) < 0.5;
  std::printf("crop.rgb %d %d\n", cropped.shape[0], cropped.shape[1]);
  std::printf("crop %d %d %d %d %d\n", crop.x, crop.y, crop.width, crop.height, flip ? 1 : 0);
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: pipetune_image_bench pipeline CONFIG [--seconds S] [--runs N]\n"
               "       pipetune_image_bench stages DIR [--count N]\n"
               "       pipetune_image_bench dump FILE OUT_PREFIX [SEED]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage();
  const std::string mode = argv[1], target = argv[2];
  double seconds = 0;
  int runs = 1;
  size_t count = 500;
  for (int i = 3; mode != "dump" && i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--runs") {
      runs = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--count") {
      count = static_cast<size_t>(std::max(1, std::atoi(argv[i + 1])));
    } else {
      return Usage();
    }
  }
  if (mode == "pipeline") return RunPipelineMode(target, seconds, runs);
  if (mode == "stages") return RunStagesMode(target, count);
  if (mode == "dump" && (argc == 4 || argc == 5)) {
    return RunDumpMode(target, argv[3], argc == 5 ? std::strtoull(argv[4], nullptr, 10) : 1);
  }
  return Usage();
}
