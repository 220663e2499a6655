// The C API of pipetune/loader/loader_c.h: a Pipeline run epoch by epoch,
// its batches handed out as buffers the caller owns.
//
// One Pipeline lives across whole epochs (its memory caches stay filled); a
// pass left half-read is ended by stopping it (threads joined, buffers
// freed) and the next epoch builds it again, because cancelling the pass
// instead would make the caller wait for every element already in flight.
#include "pipetune/loader/loader_c.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader_autotune.h"
#include "pipetune/base/json.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tracer/tracer.h"

namespace {

namespace models = pipetune::models;
namespace runtime = pipetune::runtime;
namespace tracer = pipetune::tracer;
using pipetune::Json;
using pipetune::Status;
using pipetune::StatusOr;

thread_local std::string g_last_error;

int Error(int code, const std::string& message) {
  g_last_error = message;
  return code;
}

// The args object of the last normalize the stages run, where the Loader's
// layout is stated: a normalize stage's, a chain step's, or the `normalize`
// arg of a resampling function it is folded into (`true` made `{}`, the same
// defaults). A normalize without args gets an empty object. nullptr: no
// normalize.
Json* LastNormalizeArgs(Json& stages) {
  Json* found = nullptr;
  auto consider = [&found](Json& step) {
    if (step.value("fn", "") == "normalize") {
      Json& args = step["args"];
      if (!args.is_object()) args = Json::object();
      found = &args;
    } else if (step.contains("args") && step["args"].is_object() && step["args"].contains("normalize")) {
      Json& folded = step["args"]["normalize"];
      if (folded == true) folded = Json::object();
      if (folded.is_object()) found = &folded;
    }
  };
  for (Json& stage : stages) {
    if (stage.value("op", "") != "map") continue;
    if (stage.value("fn", "") != "chain") {
      consider(stage);
      continue;
    }
    Json& args = stage["args"];
    if (!args.is_object() || !args.contains("steps") || !args["steps"].is_array()) continue;
    for (Json& step : args["steps"]) consider(step);
  }
  return found;
}

// The config as the Loader runs it (see the header): repeat dropped, channels
// first unless the config's normalize states a layout, drop_last applied.
StatusOr<models::PipelineConfig> LoaderConfig(const models::PipelineConfig& parsed,
                                              const pipetune_loader_options& options,
                                              const std::string& source) {
  Json document = parsed.raw;
  Json stages = Json::array();
  for (const Json& stage : document["stages"]) {
    if (stage.value("op", "") == "repeat") continue;
    stages.push_back(stage);
  }
  if (Json* normalize = LastNormalizeArgs(stages); normalize && !normalize->contains("layout")) {
    (*normalize)["layout"] = "chw";
  }
  for (Json& stage : stages) {
    if (stage.value("op", "") != "batch" || options.drop_last < 0) continue;
    Json& args = stage["args"];
    args.erase("drop_remainder");
    args["drop_last"] = options.drop_last != 0;
  }
  document["stages"] = std::move(stages);
  return models::ParseConfig(document.dump(), source);
}

bool ChannelsFirst(const models::PipelineConfig& config) {
  Json stages = config.raw.value("stages", Json::array());
  const Json* normalize = LastNormalizeArgs(stages);
  return normalize != nullptr && normalize->value("layout", "hwc") == "chw";
}

// Batches per epoch from the source's elements: through take and batch;
// a filter's or a skipped element's losses are not known in advance.
uint64_t BatchesPerEpoch(const models::PipelineConfig& config, uint64_t elements) {
  uint64_t count = elements;
  for (const models::StageConfig& stage : config.stages) {
    if (stage.op == models::Op::kTake) {
      count = std::min<uint64_t>(count, stage.args.value("count", uint64_t{0}));
    } else if (stage.op == models::Op::kBatch) {
      const uint64_t size = std::max<uint64_t>(stage.args.value("size", uint64_t{1}), 1);
      StatusOr<bool> drop = models::BatchDropsRemainder(stage);
      count = drop.ok() && *drop ? count / size : (count + size - 1) / size;
    }
  }
  return count;
}

}  // namespace

struct pipetune_batch {
  runtime::Element element;
  std::vector<int64_t> labels;
  std::vector<uint64_t> ids;
  bool channels_first = false;
};

struct pipetune_loader {
  models::PipelineConfig config;
  runtime::BuildOptions build;
  bool channels_first = false;
  uint64_t batches_per_epoch = 0;
  std::unique_ptr<runtime::Pipeline> pipeline;
  bool in_epoch = false;  // a pass was asked for and its end not yet seen
  bool traced = false;
  // The consumer's clock: when the last batch was handed out, and when the
  // caller first asked for the one it waits for now (across timeouts).
  uint64_t handed_out_ns = 0;
  uint64_t asked_ns = 0;
  uint64_t last_wait_ns = 0;                                   // the last batch's wait
  std::unique_ptr<pipetune::loader::LoaderAutotune> autotune;  // null: autotune off
  std::string returned;  // the string last handed to the caller (decision, config)
  std::string written;   // the settled config's file ("" none)

  // With autotune, from the knobs decided so far (a new pass keeps them).
  Status Build() {
    if (autotune != nullptr) {
      PIPETUNE_ASSIGN_OR_RETURN(pipeline, autotune->Build(build));
    } else {
      PIPETUNE_ASSIGN_OR_RETURN(pipeline, runtime::Pipeline::Create(config, build));
    }
    return Status::Ok();
  }
  // The pass's threads stopped and its buffers freed; the next pass builds
  // the pipeline again.
  void DropPipeline() {
    if (autotune != nullptr) autotune->Detach();
    pipeline.reset();
  }
};

extern "C" {

void pipetune_loader_options_init(pipetune_loader_options* options) {
  *options = pipetune_loader_options{};
  options->world_size = 1;
  options->drop_last = -1;
}

int pipetune_loader_create(const pipetune_loader_options* options, pipetune_loader** out) {
  *out = nullptr;
  if (options->config_json == nullptr) return Error(PIPETUNE_LOADER_BAD_CONFIG, "no config given");
  const uint32_t world = std::max<uint32_t>(options->world_size, 1);
  if (options->rank >= world) {
    return Error(PIPETUNE_LOADER_BAD_CONFIG, "rank " + std::to_string(options->rank) +
                                                 " is not below world_size " + std::to_string(world));
  }
  auto loader = std::make_unique<pipetune_loader>();
  const std::string source = options->config_path != nullptr && *options->config_path != '\0'
                                 ? options->config_path
                                 : std::string("<config>");
  StatusOr<models::PipelineConfig> original = models::ParseConfig(options->config_json, source);
  if (!original.ok()) return Error(PIPETUNE_LOADER_BAD_CONFIG, original.status().message());
  StatusOr<models::PipelineConfig> config = LoaderConfig(*original, *options, source);
  if (!config.ok()) return Error(PIPETUNE_LOADER_BAD_CONFIG, config.status().message());
  loader->config = std::move(*config);
  loader->channels_first = ChannelsFirst(loader->config);
  loader->build.seed = options->seed;
  loader->build.shard_index = options->rank;
  loader->build.shard_count = world;
  loader->build.collate_batches = true;
  if (options->config_path != nullptr && *options->config_path != '\0') {
    loader->build.base_dir = std::filesystem::path(options->config_path).parent_path().string();
  }
  if (options->trace_path != nullptr && *options->trace_path != '\0') {
    tracer::SessionOptions session;
    session.path = options->trace_path;
    session.pipeline_name = loader->config.name;
    session.config_json = models::Serialize(loader->config);
    if (options->config_path != nullptr) session.config_path = options->config_path;
    Status started = tracer::Start(session);
    if (!started.ok()) return Error(PIPETUNE_LOADER_ERROR, "cannot record a trace: " + started.message());
    loader->traced = true;
    // The session outlives the loader (a script may make several in turn)
    // and ends with the process, its end record written.
    static const bool registered = [] { return std::atexit([] { (void)tracer::Stop(); }) == 0; }();
    (void)registered;
  }
  if (options->autotune != 0) {
    StatusOr<std::unique_ptr<pipetune::loader::LoaderAutotune>> autotune =
        pipetune::loader::LoaderAutotune::Create(*options, std::move(*original), loader->config,
                                                 loader->traced);
    if (!autotune.ok()) {
      if (loader->traced) (void)tracer::Stop();
      const bool bad = autotune.status().code() == pipetune::StatusCode::kInvalidInput;
      return Error(bad ? PIPETUNE_LOADER_BAD_CONFIG : PIPETUNE_LOADER_ERROR, autotune.status().message());
    }
    loader->autotune = std::move(*autotune);
  }
  Status built = loader->Build();
  if (!built.ok()) {
    const int code = built.code() == pipetune::StatusCode::kInvalidInput ? PIPETUNE_LOADER_BAD_CONFIG
                                                                         : PIPETUNE_LOADER_ERROR;
    loader->autotune.reset();  // its driver and temporary trace end with it
    if (loader->traced) (void)tracer::Stop();
    return Error(code, built.message());
  }
  loader->batches_per_epoch =
      BatchesPerEpoch(loader->config, loader->pipeline->SourceElementsPerPass().value_or(0));
  *out = loader.release();
  return PIPETUNE_LOADER_OK;
}

uint64_t pipetune_loader_batches_per_epoch(const pipetune_loader* loader) {
  return loader->batches_per_epoch;
}

int pipetune_loader_start_epoch(pipetune_loader* loader, uint32_t epoch) {
  if (loader->in_epoch) pipetune_loader_stop(loader);
  if (loader->pipeline == nullptr) {
    Status built = loader->Build();
    if (!built.ok()) return Error(PIPETUNE_LOADER_ERROR, built.message());
  }
  loader->pipeline->StartEpoch(epoch);
  loader->in_epoch = true;
  loader->handed_out_ns = loader->asked_ns = 0;
  return PIPETUNE_LOADER_OK;
}

int pipetune_loader_next(pipetune_loader* loader, int64_t timeout_ms, pipetune_batch** out) {
  *out = nullptr;
  if (!loader->in_epoch || loader->pipeline == nullptr) return PIPETUNE_LOADER_END;
  if (loader->asked_ns == 0) loader->asked_ns = tracer::NowNs();
  runtime::Element element;
  bool timed_out = false;
  StatusOr<bool> next = timeout_ms < 0 ? loader->pipeline->Next(&element)
                                       : loader->pipeline->NextFor(&element, timeout_ms, &timed_out);
  if (!next.ok()) {
    loader->in_epoch = false;
    loader->DropPipeline();  // it stopped: the next epoch builds it again
    return Error(PIPETUNE_LOADER_ERROR, next.status().message());
  }
  if (timed_out) return PIPETUNE_LOADER_TIMEOUT;
  const uint64_t now = tracer::NowNs();
  // The caller's loop is the consumer (what RunPipeline records for a
  // config's): the previous batch's step ran from its hand-out to this ask.
  if (loader->handed_out_ns != 0) {
    tracer::ConsumerStep(loader->last_wait_ns, loader->asked_ns - loader->handed_out_ns, loader->asked_ns);
  }
  loader->last_wait_ns = now - loader->asked_ns;
  loader->asked_ns = 0;
  if (!*next) {
    loader->in_epoch = false;
    loader->handed_out_ns = 0;
    return PIPETUNE_LOADER_END;
  }
  loader->handed_out_ns = now;
  auto batch = std::make_unique<pipetune_batch>();
  batch->channels_first = loader->channels_first;
  const std::vector<runtime::Element>& items = element.items;
  batch->labels.reserve(items.size());
  batch->ids.reserve(items.size());
  for (const runtime::Element& item : items) {
    batch->labels.push_back(item.label);
    batch->ids.push_back(item.id);
  }
  batch->element = std::move(element);
  *out = batch.release();
  return PIPETUNE_LOADER_BATCH;
}

void pipetune_loader_stop(pipetune_loader* loader) {
  loader->in_epoch = false;
  loader->DropPipeline();
}

void pipetune_loader_destroy(pipetune_loader* loader) {
  if (loader == nullptr) return;
  (void)pipetune_loader_autotune_finish(loader, nullptr);
  pipetune_loader_stop(loader);
  delete loader;
}

const char* pipetune_loader_next_decision(pipetune_loader* loader) {
  if (loader->autotune == nullptr) return nullptr;
  std::optional<std::string> line = loader->autotune->NextDecision();
  if (!line) return nullptr;
  loader->returned = std::move(*line);
  return loader->returned.c_str();
}

const char* pipetune_loader_autotuned_config(pipetune_loader* loader) {
  if (loader->autotune == nullptr) return nullptr;
  loader->returned = loader->autotune->SettledConfigJson();
  return loader->returned.c_str();
}

int pipetune_loader_autotune_finish(pipetune_loader* loader, const char** written_path) {
  static const char* const kNone = "";
  if (written_path != nullptr) *written_path = kNone;
  if (loader->autotune == nullptr) return PIPETUNE_LOADER_OK;
  Status finished = loader->autotune->Finish(&loader->written);
  if (written_path != nullptr) *written_path = loader->written.c_str();
  if (!finished.ok()) return Error(PIPETUNE_LOADER_ERROR, "the settled config: " + finished.message());
  return PIPETUNE_LOADER_OK;
}

void pipetune_batch_get_info(const pipetune_batch* batch, pipetune_batch_info* info) {
  const runtime::Element& element = batch->element;
  *info = pipetune_batch_info{};
  if (element.data) {
    info->data = const_cast<uint8_t*>(element.data->data());
    info->bytes = element.data->size();
  }
  info->dtype = element.dtype == runtime::DType::kF32 ? PIPETUNE_DTYPE_F32 : PIPETUNE_DTYPE_U8;
  info->channels_first = batch->channels_first ? 1 : 0;
  info->count = static_cast<uint32_t>(batch->labels.size());
  info->height = element.shape[0];
  info->width = element.shape[1];
  info->channels = element.shape[2];
  info->labels = batch->labels.data();
  info->ids = batch->ids.data();
}

void pipetune_batch_free(pipetune_batch* batch) { delete batch; }

const char* pipetune_loader_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
