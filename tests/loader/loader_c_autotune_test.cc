// The C API's autotune path (loader/include/pipetune/loader/loader_c.h) as
// a binding sees it, through libpipetune_loader.so itself: a stage left at
// one worker is raised while epochs run, later epochs (also one rebuilt
// after a pass left half-read) keep the workers, every epoch hands out all
// of its elements, the decisions come out as JSON lines, the settled config
// is written beside the config and the temporary trace is removed; bad
// options are named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/loader/loader_c.h"

namespace {

namespace fs = std::filesystem;
using pipetune::Json;
using ::testing::HasSubstr;

// 5 ms of waiting per element at one worker: an epoch of 80 takes 0.4 s,
// where a dozen workers take a few tens of ms.
constexpr int kElements = 80;
constexpr const char* kSlow = R"({
  "name": "remote",
  "stages": [
    { "name": "source", "op": "range", "args": { "count": 80 } },
    { "name": "fetch", "op": "map", "fn": "io_wait", "args": { "ms": 5 }, "parallelism": 1 },
    { "name": "again", "op": "repeat", "args": { "count": 2 } },
    { "name": "prefetch", "op": "prefetch", "buffer": 1 }
  ]
})";

class LoaderAutotuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loader_c_autotune_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tmp");
    config_path_ = (dir_ / "remote.json").string();
    std::ofstream(config_path_) << kSlow;
    // The temporary trace goes here, where the test can see it removed.
    setenv("TMPDIR", (dir_ / "tmp").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("TMPDIR");
    fs::remove_all(dir_);
  }

  pipetune_loader_options Options() const {
    pipetune_loader_options options;
    pipetune_loader_options_init(&options);
    options.config_json = kSlow;
    options.config_path = config_path_.c_str();
    options.autotune = 1;
    options.autotune_refit_seconds = 0.3;
    options.autotune_max_threads = 12;
    return options;
  }

  fs::path dir_;
  std::string config_path_;
};

struct Epoch {
  int outputs = 0;
  double seconds = 0;
};

// One pass (or `stop_after` outputs of it, then stopped).
Epoch RunEpoch(pipetune_loader* loader, uint32_t number, int stop_after = -1) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(pipetune_loader_start_epoch(loader, number), PIPETUNE_LOADER_OK);
  Epoch epoch;
  pipetune_batch* batch = nullptr;
  while (epoch.outputs != stop_after && pipetune_loader_next(loader, -1, &batch) == PIPETUNE_LOADER_BATCH) {
    pipetune_batch_free(batch);
    ++epoch.outputs;
  }
  if (epoch.outputs == stop_after) pipetune_loader_stop(loader);
  epoch.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return epoch;
}

std::vector<Json> Drain(pipetune_loader* loader) {
  std::vector<Json> decisions;
  while (const char* line = pipetune_loader_next_decision(loader)) decisions.push_back(Json::parse(line));
  return decisions;
}

int FetchWorkers(const Json& config) {
  for (const Json& stage : config["stages"]) {
    if (stage["name"] == "fetch") return stage.value("parallelism", 1);
  }
  return 0;
}

TEST_F(LoaderAutotuneTest, ASlowStageGetsWorkersWhileEpochsRunAndKeepsThem) {
  pipetune_loader_options options = Options();
  pipetune_loader* loader = nullptr;
  ASSERT_EQ(pipetune_loader_create(&options, &loader), PIPETUNE_LOADER_OK) << pipetune_loader_last_error();

  std::vector<Epoch> epochs;
  std::vector<Json> decisions;
  bool kept = false;
  auto start = std::chrono::steady_clock::now();
  // Until a change is kept and two epochs more, at most 20 s.
  for (int after = 0; after < 2 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20);) {
    epochs.push_back(RunEpoch(loader, static_cast<uint32_t>(epochs.size())));
    for (Json& d : Drain(loader)) {
      kept = kept || d["kind"] == "kept";
      decisions.push_back(std::move(d));
    }
    if (kept) ++after;
  }
  for (size_t i = 0; i < epochs.size(); ++i) EXPECT_EQ(epochs[i].outputs, kElements) << "epoch " << i;
  ASSERT_TRUE(kept) << "no change kept in 20 s";

  auto change =
      std::find_if(decisions.begin(), decisions.end(), [](const Json& d) { return d["kind"] == "change"; });
  ASSERT_NE(change, decisions.end());
  EXPECT_EQ((*change)["moves"][0]["stage"], "fetch");
  EXPECT_EQ((*change)["moves"][0]["old"], 1);
  EXPECT_THAT((*change)["line"].get<std::string>(), HasSubstr("fetch parallelism 1 -> "));
  EXPECT_GT((*change)["predicted"].get<double>(), 0);

  // The workers run: an epoch takes a fraction of the first one's time, also
  // after a pass left half-read rebuilt the pipeline.
  EXPECT_LT(epochs.back().seconds, 0.5 * epochs.front().seconds);
  RunEpoch(loader, 100, /*stop_after=*/5);
  Epoch rebuilt = RunEpoch(loader, 101);
  EXPECT_EQ(rebuilt.outputs, kElements);
  EXPECT_LT(rebuilt.seconds, 0.5 * epochs.front().seconds);

  const char* written = nullptr;
  ASSERT_EQ(pipetune_loader_autotune_finish(loader, &written), PIPETUNE_LOADER_OK)
      << pipetune_loader_last_error();
  EXPECT_EQ(std::string(written), (dir_ / "remote.autotuned.json").string());
  Json settled = Json::parse(pipetune_loader_autotuned_config(loader));
  EXPECT_GT(FetchWorkers(settled), 1);
  EXPECT_LE(FetchWorkers(settled) + 2, 12);  // the source's and prefetch's threads and fetch's workers
  EXPECT_EQ(settled["stages"].size(), 4u) << "the config as given, its repeat kept";
  EXPECT_EQ(Json::parse(std::ifstream(written)), settled);
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp")) << "the temporary trace is left behind";
  // Finished, the loader still runs its epochs with the settled workers.
  EXPECT_EQ(RunEpoch(loader, 102).outputs, kElements);
  pipetune_loader_destroy(loader);
}

// What a DDP job's ranks but the first are given: "" writes nothing, and
// the settled config is still there to read.
TEST_F(LoaderAutotuneTest, AnEmptyOutputWritesNothing) {
  pipetune_loader_options options = Options();
  options.autotune_output = "";
  pipetune_loader* loader = nullptr;
  ASSERT_EQ(pipetune_loader_create(&options, &loader), PIPETUNE_LOADER_OK) << pipetune_loader_last_error();
  EXPECT_EQ(RunEpoch(loader, 0).outputs, kElements);
  const char* written = nullptr;
  ASSERT_EQ(pipetune_loader_autotune_finish(loader, &written), PIPETUNE_LOADER_OK);
  EXPECT_STREQ(written, "");
  EXPECT_FALSE(fs::exists(dir_ / "remote.autotuned.json"));
  EXPECT_EQ(Json::parse(pipetune_loader_autotuned_config(loader))["stages"].size(), 4u);
  pipetune_loader_destroy(loader);
}

TEST_F(LoaderAutotuneTest, BadOptionsAreNamed) {
  struct Case {
    void (*set)(pipetune_loader_options&, const fs::path&);
    const char* words;
  };
  const std::vector<Case> cases = {
      {[](pipetune_loader_options& o, const fs::path&) { o.autotune_refit_seconds = -1; },
       "autotune_refit_seconds: must be > 0"},
      {[](pipetune_loader_options& o, const fs::path&) { o.autotune_cores = -2; },
       "autotune_cores: must be > 0"},
      {[](pipetune_loader_options& o, const fs::path&) { o.autotune_max_threads = -3; },
       "autotune_max_threads: must be > 0"},
      {[](pipetune_loader_options& o, const fs::path& dir) {
         static std::string missing;
         missing = (dir / "missing" / "out.json").string();
         o.autotune_output = missing.c_str();
       },
       "autotune_output: "},
  };
  for (const Case& c : cases) {
    pipetune_loader_options options = Options();
    c.set(options, dir_);
    pipetune_loader* loader = nullptr;
    EXPECT_EQ(pipetune_loader_create(&options, &loader), PIPETUNE_LOADER_BAD_CONFIG) << c.words;
    EXPECT_THAT(pipetune_loader_last_error(), HasSubstr(c.words));
    EXPECT_EQ(loader, nullptr);
  }
  // Without autotune there are no decisions and nothing to write.
  pipetune_loader_options options = Options();
  options.autotune = 0;
  pipetune_loader* loader = nullptr;
  ASSERT_EQ(pipetune_loader_create(&options, &loader), PIPETUNE_LOADER_OK) << pipetune_loader_last_error();
  EXPECT_EQ(pipetune_loader_next_decision(loader), nullptr);
  EXPECT_EQ(pipetune_loader_autotuned_config(loader), nullptr);
  const char* written = nullptr;
  EXPECT_EQ(pipetune_loader_autotune_finish(loader, &written), PIPETUNE_LOADER_OK);
  EXPECT_STREQ(written, "");
  pipetune_loader_destroy(loader);
}

}  // namespace
