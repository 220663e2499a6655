// pipetune_make_images: writes photo-like JPEG files for the image example.
//
// Each image is a smooth two-colour gradient, a dozen shaded shapes with soft
// edges, a low-frequency lighting field and per-pixel sensor noise, encoded at
// quality 90 with 4:2:0 chroma subsampling: files that decode like photographs
// (entropy-heavy, ImageNet-average dimensions, about 100-130 KB). Output is a
// pure function of (seed, index), so every machine gets the same data set.
//
// A marker file in the output folder records the generator version, seed and
// count; when it matches and every file is there, the run does nothing, so
// the demo can call this unconditionally.
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pipetune/base/rng.h"

namespace {

namespace fs = std::filesystem;

// Bump when the pixels a given (seed, index) produces change, so stale data
// sets are regenerated instead of reused.
constexpr int kGeneratorVersion = 1;
constexpr const char* kMarkerName = ".pipetune_make_images";
constexpr int kQuality = 90;

struct Options {
  int count = 4000;
  uint64_t seed = 1;
  std::string out = "data";
  int threads = 2;
  bool quiet = false;
};

using ::pipetune::Rng;  // splitmix64: tiny, fast and good enough for synthetic pixels

struct Colour {
  float r, g, b;
};

Colour RandomColour(Rng& rng) {
  return {static_cast<float>(rng.Uniform(20, 235)), static_cast<float>(rng.Uniform(20, 235)),
          static_cast<float>(rng.Uniform(20, 235))};
}

// A filled ellipse or rectangle with its own gradient, a soft edge and a
// surface roughness (how much fine detail it carries: sky vs foliage).
struct Shape {
  bool ellipse;
  float cx, cy, rx, ry, cos_a, sin_a;
  Colour inner, outer;
  float softness;   // edge width in pixels
  float roughness;  // 0..1, scales the detail layer
  float reach;      // bounding radius: pixels further away are untouched
};

Shape RandomShape(Rng& rng, int width, int height) {
  Shape s;
  s.ellipse = rng.Uniform() < 0.6;
  s.cx = static_cast<float>(rng.Uniform(0, width));
  s.cy = static_cast<float>(rng.Uniform(0, height));
  s.rx = static_cast<float>(rng.Uniform(10, width * 0.35));
  s.ry = static_cast<float>(rng.Uniform(10, height * 0.35));
  const double angle = rng.Uniform(0, M_PI);
  s.cos_a = static_cast<float>(std::cos(angle));
  s.sin_a = static_cast<float>(std::sin(angle));
  s.inner = RandomColour(rng);
  s.outer = RandomColour(rng);
  s.softness = static_cast<float>(rng.Uniform(0.7, 3.0));
  s.roughness = static_cast<float>(rng.Uniform() < 0.25 ? rng.Uniform(0.1, 0.4) : rng.Uniform(0.6, 1.0));
  s.reach = 1.5f * std::max(s.rx, s.ry) + s.softness + 1.0f;
  return s;
}

// Coverage in [0,1] of pixel (x, y) by the shape, and t in [0,1] from centre
// to edge for its shading.
void ShapeCoverage(const Shape& s, float x, float y, float& coverage, float& t) {
  const float dx = x - s.cx, dy = y - s.cy;
  const float u = (dx * s.cos_a + dy * s.sin_a) / s.rx;
  const float v = (-dx * s.sin_a + dy * s.cos_a) / s.ry;
  float d;  // normalised distance: 1 on the boundary
  if (s.ellipse) {
    d = std::sqrt(u * u + v * v);
  } else {
    d = std::max(std::fabs(u), std::fabs(v));
  }
  t = std::min(d, 1.0f);
  const float edge_px = (1.0f - d) * std::min(s.rx, s.ry);  // > 0 inside
  coverage = std::clamp(0.5f + edge_px / s.softness, 0.0f, 1.0f);
}

// One octave of value noise: random values on a lattice of `cell` pixels,
// bilinearly interpolated, in [-1, 1]. Adds `amplitude` * noise to `out`.
void AddValueNoise(Rng& rng, int width, int height, float cell, float amplitude, std::vector<float>& out) {
  const int lw = static_cast<int>(width / cell) + 2, lh = static_cast<int>(height / cell) + 2;
  std::vector<float> lattice(static_cast<size_t>(lw) * lh);
  for (float& v : lattice) v = static_cast<float>(rng.Uniform(-1, 1));
  for (int y = 0; y < height; ++y) {
    const float ly = y / cell;
    const int y0 = static_cast<int>(ly);
    const float fy = ly - y0;
    const float* row0 = &lattice[static_cast<size_t>(y0) * lw];
    const float* row1 = row0 + lw;
    float* dst = &out[static_cast<size_t>(y) * width];
    for (int x = 0; x < width; ++x) {
      const float lx = x / cell;
      const int x0 = static_cast<int>(lx);
      const float fx = lx - x0;
      const float top = row0[x0] + (row0[x0 + 1] - row0[x0]) * fx;
      const float bottom = row1[x0] + (row1[x0 + 1] - row1[x0]) * fx;
      dst[x] += amplitude * (top + (bottom - top) * fy);
    }
  }
}

// Sum of low-frequency waves sin(fx*x + fy*y + phase), computed separably.
std::vector<float> Lighting(Rng& rng, int width, int height) {
  std::vector<float> light(static_cast<size_t>(width) * height, 0.0f);
  std::vector<float> sx(width), cx(width);
  for (int i = 0; i < 3; ++i) {
    const double fx = rng.Uniform(0.002, 0.03), fy = rng.Uniform(0.002, 0.03);
    const double phase = rng.Uniform(0, 2 * M_PI);
    const float amplitude = static_cast<float>(rng.Uniform(5, 18));
    for (int x = 0; x < width; ++x) {
      sx[x] = static_cast<float>(std::sin(fx * x));
      cx[x] = static_cast<float>(std::cos(fx * x));
    }
    for (int y = 0; y < height; ++y) {
      // sin(a + b) = sin a cos b + cos a sin b
      const float cb = amplitude * static_cast<float>(std::cos(fy * y + phase));
      const float sb = amplitude * static_cast<float>(std::sin(fy * y + phase));
      float* dst = &light[static_cast<size_t>(y) * width];
      for (int x = 0; x < width; ++x) dst[x] += sx[x] * cb + cx[x] * sb;
    }
  }
  return light;
}

std::vector<uint8_t> RenderImage(uint64_t seed, int index, int& width, int& height) {
  Rng rng(seed * 0x100000001B3ull + static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull + 1);
  // ImageNet-like: landscape 400..500 x 333..375 mostly, some portrait.
  width = rng.IntInclusive(400, 500);
  height = rng.IntInclusive(333, 375);
  if (rng.Uniform() < 0.15) std::swap(width, height);
  const size_t pixels = static_cast<size_t>(width) * height;

  // Detail: fractal value noise, fine octaves strongest, as in foliage, fur
  // or fabric; it is what makes the files photo-sized.
  std::vector<float> detail(pixels, 0.0f);
  const float detail_amp = static_cast<float>(rng.Uniform(75, 95));
  AddValueNoise(rng, width, height, 1.7f, detail_amp, detail);
  AddValueNoise(rng, width, height, 3.1f, detail_amp * 0.8f, detail);
  AddValueNoise(rng, width, height, 7.3f, detail_amp * 0.6f, detail);
  AddValueNoise(rng, width, height, 17.0f, detail_amp * 0.5f, detail);
  const std::vector<float> light = Lighting(rng, width, height);

  const Colour a = RandomColour(rng), b = RandomColour(rng);
  const float background_roughness = static_cast<float>(rng.Uniform(0.2, 1.0));
  const double g_angle = rng.Uniform(0, 2 * M_PI);
  const float gx = static_cast<float>(std::cos(g_angle) / width);
  const float gy = static_cast<float>(std::sin(g_angle) / height);
  std::vector<Shape> shapes;
  const int shape_count = rng.IntInclusive(8, 20);
  for (int i = 0; i < shape_count; ++i) shapes.push_back(RandomShape(rng, width, height));
  const float noise_amp = static_cast<float>(rng.Uniform(50, 60));

  std::vector<uint8_t> rgb(pixels * 3);
  for (int y = 0; y < height; ++y) {
    const float fy = static_cast<float>(y);
    for (int x = 0; x < width; ++x) {
      const float fx = static_cast<float>(x);
      const float g = std::clamp(0.5f + (fx - width / 2.0f) * gx + (fy - height / 2.0f) * gy, 0.0f, 1.0f);
      float r = a.r + (b.r - a.r) * g, gr = a.g + (b.g - a.g) * g, bl = a.b + (b.b - a.b) * g;
      float roughness = background_roughness;
      for (const Shape& s : shapes) {
        if (std::fabs(fx - s.cx) > s.reach || std::fabs(fy - s.cy) > s.reach) continue;
        float coverage, t;
        ShapeCoverage(s, fx, fy, coverage, t);
        if (coverage <= 0.0f) continue;
        r += (s.inner.r + (s.outer.r - s.inner.r) * t - r) * coverage;
        gr += (s.inner.g + (s.outer.g - s.inner.g) * t - gr) * coverage;
        bl += (s.inner.b + (s.outer.b - s.inner.b) * t - bl) * coverage;
        roughness += (s.roughness - roughness) * coverage;
      }
      const size_t i = static_cast<size_t>(y) * width + x;
      // Sensor noise: zero-mean, triangular-ish, from one 64-bit draw.
      const uint64_t bits = rng.Next();
      auto noise = [&](int shift) {
        return (static_cast<float>((bits >> shift) & 0xFF) +
                static_cast<float>((bits >> (shift + 8)) & 0xFF) - 255.0f) *
               (noise_amp / 255.0f);
      };
      const float shared = light[i] + roughness * detail[i] + noise(0);
      uint8_t* px = &rgb[i * 3];
      px[0] = static_cast<uint8_t>(std::clamp(r + shared + noise(16) * 0.7f, 0.0f, 255.0f));
      px[1] = static_cast<uint8_t>(std::clamp(gr + shared + noise(32) * 0.7f, 0.0f, 255.0f));
      px[2] = static_cast<uint8_t>(std::clamp(bl + shared + noise(40) * 0.7f, 0.0f, 255.0f));
    }
  }
  return rgb;
}

std::string FileName(int index) {
  char name[32];
  std::snprintf(name, sizeof(name), "img_%06d.jpg", index);
  return name;
}

std::string MarkerText(const Options& options) {
  std::ostringstream text;
  text << "pipetune_make_images version " << kGeneratorVersion << " seed " << options.seed << " count "
       << options.count << "\n";
  return text.str();
}

bool UpToDate(const Options& options) {
  std::ifstream marker(fs::path(options.out) / kMarkerName);
  if (!marker) return false;
  std::stringstream text;
  text << marker.rdbuf();
  if (text.str() != MarkerText(options)) return false;
  for (int i = 0; i < options.count; ++i) {
    if (!fs::exists(fs::path(options.out) / FileName(i))) return false;
  }
  return true;
}

// Writes images index = first, first + stride, ...; returns false on error.
bool WriteImages(const Options& options, int first, int stride, std::atomic<int>& done,
                 std::atomic<uint64_t>& total_bytes) {
  tjhandle encoder = tjInitCompress();
  if (encoder == nullptr) {
    std::fprintf(stderr, "make_images: tjInitCompress failed: %s\n", tjGetErrorStr());
    return false;
  }
  bool ok = true;
  for (int i = first; i < options.count && ok; i += stride) {
    int width = 0, height = 0;
    std::vector<uint8_t> rgb = RenderImage(options.seed, i, width, height);
    unsigned char* jpeg = nullptr;
    unsigned long jpeg_size = 0;
    if (tjCompress2(encoder, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &jpeg_size, TJSAMP_420, kQuality,
                    TJFLAG_ACCURATEDCT) != 0) {
      std::fprintf(stderr, "make_images: encoding image %d failed: %s\n", i, tjGetErrorStr2(encoder));
      ok = false;
    } else {
      const fs::path path = fs::path(options.out) / FileName(i);
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file.write(reinterpret_cast<const char*>(jpeg), static_cast<std::streamsize>(jpeg_size));
      if (!file) {
        std::fprintf(stderr, "make_images: cannot write %s\n", path.c_str());
        ok = false;
      }
      total_bytes += jpeg_size;
    }
    tjFree(jpeg);
    ++done;
  }
  tjDestroy(encoder);
  return ok;
}

// Removes img_NNNNNN.jpg files with an index >= count left by a larger run,
// so a glob over the folder sees exactly `count` images.
void RemoveExtraImages(const Options& options) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(options.out, error)) {
    const std::string name = entry.path().filename().string();
    int index = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "img_%d.jp%c", &index, &tail) == 2 && tail == 'g' && name.size() == 14 &&
        index >= options.count) {
      fs::remove(entry.path(), error);
    }
  }
}

void Usage() {
  std::fprintf(stderr,
               "usage: pipetune_make_images [--count N] [--out DIR] [--seed S] [--threads T] [--quiet]\n"
               "  writes N photo-like JPEGs (default 4000) named img_NNNNNN.jpg into DIR (default ./data);\n"
               "  does nothing when DIR already holds the same N images.\n");
}

bool ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "make_images: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "--count" || arg == "--out" || arg == "--seed" || arg == "--threads") {
      const char* v = value(arg.c_str());
      if (v == nullptr) return false;
      char* end = nullptr;
      if (arg == "--out") {
        options.out = v;
        continue;
      }
      const long long number = std::strtoll(v, &end, 10);
      if (*v == '\0' || *end != '\0' || number < 0 || (arg != "--seed" && number < 1) || number > 100000000) {
        std::fprintf(stderr, "make_images: %s: expected a positive integer, got \"%s\"\n", arg.c_str(), v);
        return false;
      }
      if (arg == "--count") options.count = static_cast<int>(number);
      if (arg == "--seed") options.seed = static_cast<uint64_t>(number);
      if (arg == "--threads") options.threads = static_cast<int>(number);
    } else if (arg == "--quiet") {
      options.quiet = true;
    } else if (arg == "--help" || arg == "-h") {
      Usage();
      std::exit(0);
    } else {
      std::fprintf(stderr, "make_images: unknown argument \"%s\"\n", arg.c_str());
      Usage();
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, options)) return 2;
  if (UpToDate(options)) {
    if (!options.quiet) {
      std::printf("%s already holds %d images (generator v%d, seed %llu); nothing to do\n",
                  options.out.c_str(), options.count, kGeneratorVersion,
                  static_cast<unsigned long long>(options.seed));
    }
    return 0;
  }
  std::error_code error;
  fs::create_directories(options.out, error);
  if (error) {
    std::fprintf(stderr, "make_images: cannot create %s: %s\n", options.out.c_str(), error.message().c_str());
    return 1;
  }
  // The marker goes last: an interrupted run leaves no marker and is redone.
  fs::remove(fs::path(options.out) / kMarkerName, error);
  RemoveExtraImages(options);

  std::atomic<int> done{0};
  std::atomic<uint64_t> total_bytes{0};
  std::atomic<bool> ok{true};
  std::vector<std::thread> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.emplace_back([&, t] {
      if (!WriteImages(options, t, options.threads, done, total_bytes)) ok = false;
    });
  }
  // Progress: a live counter on a terminal, a line per 10% otherwise.
  const bool tty = isatty(fileno(stdout)) != 0;
  int reported_tenths = 0;
  auto last_draw = std::chrono::steady_clock::now();
  while (done.load() < options.count && ok.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (options.quiet) continue;
    const int now_done = done.load();
    if (tty && std::chrono::steady_clock::now() - last_draw >= std::chrono::milliseconds(200)) {
      std::printf("\rwriting images: %d/%d", now_done, options.count);
      last_draw = std::chrono::steady_clock::now();
    } else if (!tty && now_done * 10 / options.count > reported_tenths) {
      reported_tenths = now_done * 10 / options.count;
      std::printf("writing images: %d/%d\n", now_done, options.count);
    }
    std::fflush(stdout);
  }
  for (std::thread& worker : workers) worker.join();
  if (!ok) return 1;
  std::ofstream marker(fs::path(options.out) / kMarkerName, std::ios::trunc);
  marker << MarkerText(options);
  if (!marker) {
    std::fprintf(stderr, "make_images: cannot write the marker file in %s\n", options.out.c_str());
    return 1;
  }
  if (!options.quiet) {
    std::printf("%swrote %d images to %s, %.0f KB on average\n", tty ? "\r" : "", options.count,
                options.out.c_str(), total_bytes.load() / 1024.0 / std::max(options.count, 1));
  }
  return 0;
}
