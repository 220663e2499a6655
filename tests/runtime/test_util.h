// Helpers shared by the runtime tests: configs from JSON text, running a
// pipeline to its end, and test-only element functions.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"

namespace pipetune::runtime::test {

// Parses a config (the test fails on a parse error).
models::PipelineConfig Config(const std::string& json);

// A range of `count` elements followed by `stages` (a JSON array's contents).
models::PipelineConfig RangeThen(uint64_t count, const std::string& stages);

struct Outputs {
  Status status;
  std::vector<Element> elements;
  std::vector<StageSummary> stages;
  uint64_t peak_buffer_bytes = 0;
  uint64_t cache_bytes = 0;
};

// Pulls every output through the Pipeline API.
Outputs Drain(const models::PipelineConfig& config, const BuildOptions& options = {});

// (epoch, id) of every source element inside `outputs` (batches flattened), in order.
std::vector<std::pair<uint32_t, uint64_t>> Leaves(const std::vector<Element>& outputs);

// How often each (epoch, id) occurs.
std::map<std::pair<uint32_t, uint64_t>, int> Histogram(const std::vector<Element>& outputs);

// The built-in functions plus:
//   count        map; counts its calls in CallCount()
//   fail         map; fails on elements whose id % args.every == args.at
//                ("injected failure")
//   throw        map; throws std::runtime_error where `fail` would fail
//   fail_filter  filter; keeps all, fails like `fail`
const FunctionRegistry& TestRegistry();
std::atomic<uint64_t>& CallCount();
// steady_clock nanoseconds of the last failure `fail` or `fail_filter` returned.
std::atomic<int64_t>& LastFailureNs();

// A fresh empty directory under the build tree for this test.
std::string TempDir(const std::string& name);

}  // namespace pipetune::runtime::test
