// The pipelines of the tuner quality benchmark, each started from bad
// settings (every parallelism 1, no prefetch, no cache), and the grid the
// oracle searches for each. Budgets: 2 cores; memory per pipeline.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipetune::bench {

struct GridAxis {
  std::string stage;        // a parallel stage
  std::vector<int> values;  // parallelism values the oracle tries
};

struct QualityCase {
  std::string name;
  std::string what;         // one line for the table
  std::string config_json;  // the misconfigured start
  std::vector<GridAxis> grid;
  // Cache points the oracle tries besides none (stage names to cache after).
  std::vector<std::string> cache_after;
};

inline std::vector<QualityCase> QualitySuite() {
  return {
      {"cpu_chain_light",
       "CPU-bound chain, 0.2 + 0.6 ms per element",
       R"({"name": "cpu_chain_light", "resources": {"cores": 2, "memory": "512MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"bytes": 1000}},
         {"name": "parse", "op": "map", "fn": "cpu_work", "args": {"us": 200}},
         {"name": "transform", "op": "map", "fn": "cpu_work", "args": {"us": 600}},
         {"name": "batch", "op": "batch", "args": {"size": 8}}]})",
       {{"parse", {1, 2, 3}}, {"transform", {1, 2, 3, 4}}},
       {}},
      {"cpu_chain_heavy",
       "CPU-bound chain, 2 + 0.5 ms per element, batch 16",
       R"({"name": "cpu_chain_heavy", "resources": {"cores": 2, "memory": "512MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"bytes": 1000}},
         {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 2000, "bytes": 10000}},
         {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 500}, "random": true},
         {"name": "batch", "op": "batch", "args": {"size": 16}}]})",
       {{"decode", {1, 2, 3, 4}}, {"augment", {1, 2, 3}}},
       {}},
      {"remote_io",
       "remote-storage-like 10 ms io_wait, then 0.3 ms of CPU",
       R"({"name": "remote_io", "resources": {"cores": 2, "memory": "512MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"bytes": 1000}},
         {"name": "fetch", "op": "map", "fn": "io_wait", "args": {"ms": 10, "jitter": 0.5}},
         {"name": "parse", "op": "map", "fn": "cpu_work", "args": {"us": 300}},
         {"name": "batch", "op": "batch", "args": {"size": 8}}]})",
       {{"fetch", {1, 4, 16, 32, 64, 96}}, {"parse", {1, 2, 3}}},
       {}},
      {"per_batch",
       "per-batch stage after batch: 6 ms per batch of 32",
       R"({"name": "per_batch", "resources": {"cores": 2, "memory": "512MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"bytes": 1000}},
         {"name": "tokenize", "op": "map", "fn": "cpu_work", "args": {"us": 30}},
         {"name": "batch", "op": "batch", "args": {"size": 32}},
         {"name": "collate", "op": "map", "fn": "cpu_work", "args": {"us": 6000}}]})",
       {{"tokenize", {1, 2}}, {"collate", {1, 2, 3, 4}}},
       {}},
      {"cache_fits",
       "1.5 ms decode of a 400-element epoch (8 MB) before a random augment",
       R"({"name": "cache_fits", "resources": {"cores": 2, "memory": "256MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"count": 400, "bytes": 100}},
         {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 1500, "bytes": 20000}},
         {"name": "repeat", "op": "repeat"},
         {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 250}, "random": true},
         {"name": "batch", "op": "batch", "args": {"size": 8}}]})",
       {{"decode", {1, 2, 3}}, {"augment", {1, 2, 3}}},
       {"decode"}},
      {"cache_too_big",
       "as cache_fits, but the epoch (160 MB) exceeds the 96 MiB budget",
       R"({"name": "cache_too_big", "resources": {"cores": 2, "memory": "96MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"count": 400, "bytes": 100}},
         {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 1500, "bytes": 400000}},
         {"name": "repeat", "op": "repeat"},
         {"name": "augment", "op": "map", "fn": "cpu_work", "args": {"us": 250}, "random": true},
         {"name": "batch", "op": "batch", "args": {"size": 8}}]})",
       {{"decode", {1, 2, 3}}, {"augment", {1, 2, 3}}},
       {}},
      {"slow_consumer",
       "consumer slower than a tuned pipeline: 10 ms steps, 3 ms (+-80%) per element",
       R"({"name": "slow_consumer", "resources": {"cores": 2, "memory": "512MiB"}, "stages": [
         {"name": "src", "op": "range", "args": {"bytes": 1000}},
         {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 3000, "jitter": 0.8}},
         {"name": "batch", "op": "batch", "args": {"size": 4}}],
         "consumer": {"step_time_ms": 10}})",
       {{"work", {1, 2, 3, 4}}},
       {}},
  };
}

}  // namespace pipetune::bench
