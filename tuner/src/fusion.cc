// Graph rewrites the tuner proposes (fusion.h).
#include "pipetune/tuner/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "pipetune/models/decode_crop.h"

namespace pipetune::tuner {
namespace {

// Index shift for a profile index when the stage at `removed` goes.
void Shift(std::optional<size_t>& index, size_t removed) {
  if (index && *index > removed) --*index;
}

// The fused stage's profile: the decode's, with the CPU and latency of the
// share `cost` of its decode plus the whole crop, and the crop's output.
models::StageProfile FusedStage(const models::StageProfile& decode, const models::StageProfile& crop,
                                double cost) {
  models::StageProfile fused = decode;
  fused.random = true;
  fused.cpu_seconds_per_element = decode.cpu_seconds_per_element * cost + crop.cpu_seconds_per_element;
  fused.latency_seconds = decode.latency_seconds * cost + crop.latency_seconds;
  fused.measured_latency_seconds = decode.measured_latency_seconds * cost + crop.measured_latency_seconds;
  TakeOutputOf(crop, fused);
  // The fitted curve keeps its shape; one worker's rate follows the latency.
  if (fused.scaling.lambda > 0 && fused.latency_seconds > 0) {
    fused.scaling.lambda *= decode.latency_seconds / fused.latency_seconds;
  }
  return fused;
}

std::string Describe(const models::StageConfig& decode, const models::StageConfig& crop) {
  const std::string size =
      crop.args.is_object() && crop.args.contains("size") ? crop.args["size"].dump() : "?";
  return fmt::format(
      "\"{}\" + \"{}\" -> \"{}\": jpeg_decode with crop_size {}, decoding only the crop's window",
      decode.name, crop.name, decode.name, size);
}

// Whether `fused` is the better plan (fusion.h's rule).
bool Pays(const Plan& plain, const Plan& fused, Objective objective) {
  if (objective == Objective::kDemand && fused.demand_met) {
    if (!plain.demand_met) return true;
    if (fused.cores_needed != plain.cores_needed) return fused.cores_needed < plain.cores_needed;
  }
  return fused.predicted_throughput >= plain.predicted_throughput * (1 + kMinRewriteGain);
}

void AddStageChanges(const GraphRewrite& rewrite, const std::string& decode_size, Plan& plan) {
  std::vector<KnobChange> changes;
  changes.push_back({rewrite.stages[0], Knob::kStage, "jpeg_decode", "jpeg_decode crop_size " + decode_size,
                     true, fmt::format("fused with \"{}\": {}", rewrite.stages[1], rewrite.reason)});
  changes.push_back({rewrite.stages[1], Knob::kStage, "random_crop_flip", "-", true,
                     fmt::format("done by \"{}\" now (predicted x{:.2f} throughput)", rewrite.stages[0],
                                 rewrite.predicted_gain)});
  plan.knobs.insert(plan.knobs.begin(), changes.begin(), changes.end());
}

}  // namespace

void TakeOutputOf(const models::StageProfile& tail, models::StageProfile& fused) {
  fused.elements = tail.elements;
  fused.cpu_seconds = fused.cpu_seconds_per_element * fused.elements;
  fused.work_seconds = fused.measured_latency_seconds * fused.elements;
  fused.bytes_per_element = tail.bytes_per_element;
  fused.bytes = tail.bytes;
  fused.visit_ratio = tail.visit_ratio;
  fused.cpu_seconds_per_output = fused.cpu_seconds_per_element * fused.visit_ratio;
  fused.latency_bound = fused.latency_seconds > 2 * fused.cpu_seconds_per_element;
}

std::optional<RewrittenInput> ProposeDecodeCropFusion(const TuneInput& input) {
  if (!input.config) return std::nullopt;
  const models::Profile& profile = input.profile;
  std::optional<models::DecodeCropPrice> price = models::PriceDecodeCropFusion(*input.config, profile);
  if (!price) return std::nullopt;
  StatusOr<models::PipelineConfig> fused_config = models::FuseDecodeCrop(*input.config, price->pair);
  if (!fused_config.ok()) return std::nullopt;
  const models::StageConfig& decode_config = input.config->stages[price->pair.decode];
  const models::StageConfig& crop_config = input.config->stages[price->pair.crop];

  RewrittenInput rewritten{input, {}, {}};
  rewritten.input.config = std::move(fused_config).value();
  models::Profile& fused = rewritten.input.profile;
  fused.stages[price->decode_stage] =
      FusedStage(profile.stages[price->decode_stage], profile.stages[price->crop_stage], price->share.cost);
  fused.stages.erase(fused.stages.begin() + static_cast<std::ptrdiff_t>(price->crop_stage));
  Shift(fused.storage_stage, price->crop_stage);
  Shift(fused.cache_stage, price->crop_stage);
  const std::string entropy_source =
      price->entropy_measured
          ? fmt::format("measured on {} of the pipeline's files on this host", profile.jpeg_entropy->files)
          : std::string("assumed: the pipeline's files could not be read to measure it");
  rewritten.pricing = fmt::format(
      "\"{}\" fused with \"{}\" is priced at {:.2f} of the measured decode (a crop needs {:.0f}% of the rows "
      "entropy-decoded and {:.0f}% of the pixels transformed; {:.0f}% of a decode's CPU is entropy decoding, "
      "{}) plus the measured crop",
      decode_config.name, crop_config.name, price->share.cost, 100 * price->share.rows,
      100 * price->share.pixels, 100 * price->share.entropy_share, entropy_source);
  fused.assumptions.push_back(rewritten.pricing);

  GraphRewrite& rewrite = rewritten.rewrite;
  rewrite.kind = kFuseDecodeCrop;
  rewrite.stages = {decode_config.name, crop_config.name};
  rewrite.description = Describe(decode_config, crop_config);
  rewrite.reason = fmt::format(
      "a random crop needs {:.0f}% of the decode's work on average; CPU per image {:.0f} -> {:.0f} us",
      100 * price->share.cost, price->separate_cpu_seconds * 1e6, price->fused_cpu_seconds * 1e6);
  return rewritten;
}

std::optional<RewrittenInput> ProposeRepeatMove(const TuneInput& input, size_t after) {
  const models::Profile& profile = input.profile;
  if (!input.config || profile.cache_stage || after + 1 >= profile.stages.size()) return std::nullopt;
  const models::StageProfile& point = profile.stages[after];
  if (point.op == models::Op::kPrefetch || point.op == models::Op::kCache || point.op == models::Op::kRepeat)
    return std::nullopt;
  // Exactly one repeat before the point, after the source, and no take:
  // the stages from the source to the point then make one epoch per pass.
  std::optional<size_t> repeat;
  for (size_t i = 1; i <= after; ++i) {
    const models::StageProfile& stage = profile.stages[i];
    if (stage.op == models::Op::kTake || (stage.op == models::Op::kRepeat && repeat)) return std::nullopt;
    if (stage.op == models::Op::kRepeat) repeat = i;
  }
  if (!repeat) return std::nullopt;
  std::optional<size_t> repeat_config = input.config->FindStage(profile.stages[*repeat].name);
  std::optional<size_t> point_config = input.config->FindStage(point.name);
  if (!repeat_config || !point_config || *repeat_config > *point_config) return std::nullopt;

  RewrittenInput moved{input, {}, {}};
  models::Profile& p = moved.input.profile;
  models::StageProfile repeat_stage = p.stages[*repeat];
  p.stages.erase(p.stages.begin() + static_cast<std::ptrdiff_t>(*repeat));
  // The repeat now passes the point's elements: its visits are the point's.
  repeat_stage.visit_ratio = p.stages[after - 1].visit_ratio;
  repeat_stage.cpu_seconds_per_output = repeat_stage.cpu_seconds_per_element * repeat_stage.visit_ratio;
  p.stages.insert(p.stages.begin() + static_cast<std::ptrdiff_t>(after), std::move(repeat_stage));
  if (p.storage_stage && *p.storage_stage > *repeat && *p.storage_stage <= after) --*p.storage_stage;
  std::vector<models::StageConfig>& stages = moved.input.config->stages;
  models::StageConfig repeat_config_stage = stages[*repeat_config];
  stages.erase(stages.begin() + static_cast<std::ptrdiff_t>(*repeat_config));
  stages.insert(stages.begin() + static_cast<std::ptrdiff_t>(*point_config), std::move(repeat_config_stage));
  for (size_t i = 0; i < stages.size(); ++i) stages[i].index = i;
  // The move exists for a cache at the point; without one it buys nothing.
  models::Profile unbudgeted = p;
  unbudgeted.memory_budget_bytes.reset();
  if (models::CacheNotAllowed(unbudgeted, after - 1)) return std::nullopt;

  GraphRewrite& rewrite = moved.rewrite;
  rewrite.kind = kMoveRepeat;
  rewrite.stages = {profile.stages[*repeat].name, point.name};
  rewrite.description =
      fmt::format("\"{}\" moved after \"{}\", so that a cache there replays every later epoch",
                  profile.stages[*repeat].name, point.name);
  rewrite.reason = fmt::format(
      "the stages between them hold the same files every epoch; \"{}\" and the stages before it run once",
      point.name);
  return moved;
}

namespace {

// One pipeline the search prices: the traced one, or it rewritten.
struct Alternative {
  TuneInput input;
  std::vector<GraphRewrite> rewrites;  // predicted_gain not yet known
  std::vector<std::string> pricing;    // how rewritten stages were priced
  std::string only_cache_after;        // SolverOptions::only_cache_after
  std::vector<bool> folds;             // per rewrite: RewrittenInput::folds
};

// `base` rewritten once more.
Alternative Rewritten(const Alternative& base, RewrittenInput rewritten) {
  Alternative alternative = base;
  alternative.input = std::move(rewritten.input);
  alternative.rewrites.push_back(std::move(rewritten.rewrite));
  alternative.folds.push_back(rewritten.folds);
  if (!rewritten.pricing.empty()) alternative.pricing.push_back(std::move(rewritten.pricing));
  return alternative;
}

// Every graph alternative: the traced pipeline and the decode-crop fusion;
// each of them with every run of two or more adjacent maps fused; and each
// of those as it is and with its repeat moved after each stage a cache could
// then hold (the cache points the repeat had ruled out).
std::vector<Alternative> GraphAlternatives(const TuneInput& input, bool caches_allowed) {
  std::vector<Alternative> bases;
  bases.push_back({input, {}, {}, {}});
  if (std::optional<RewrittenInput> fused = ProposeDecodeCropFusion(input)) {
    bases.push_back(Rewritten(bases.front(), std::move(*fused)));
  }
  for (size_t b = 0, unfused = bases.size(); b < unfused; ++b) {
    const size_t stages = bases[b].input.profile.stages.size();
    for (size_t first = 0; first < stages; ++first) {
      for (size_t last = first + 1; last < stages; ++last) {
        std::optional<RewrittenInput> maps = ProposeMapFusion(bases[b].input, first, last);
        if (!maps) break;  // a longer run holds this one
        bases.push_back(Rewritten(bases[b], std::move(*maps)));
      }
    }
  }
  std::vector<Alternative> all = bases;
  for (const Alternative& base : bases) {
    if (!caches_allowed) break;  // a moved repeat exists for a cache
    for (size_t k = 1; k < base.input.profile.stages.size(); ++k) {
      std::optional<RewrittenInput> moved = ProposeRepeatMove(base.input, k);
      if (!moved) continue;
      all.push_back(Rewritten(base, std::move(*moved)));
      all.back().only_cache_after = base.input.profile.stages[k].name;
    }
  }
  return all;
}

std::string Label(const std::vector<GraphRewrite>& rewrites) {
  std::string label;
  for (const GraphRewrite& rewrite : rewrites) {
    if (!label.empty()) label += ", ";
    if (rewrite.kind == kMoveRepeat) {
      label += fmt::format("\"{}\" after \"{}\"", rewrite.stages[0], rewrite.stages[1]);
      continue;
    }
    if (rewrite.kind == kFuseDecodeCrop) {
      label += fmt::format("\"{}\" decoding \"{}\"'s window", rewrite.stages[0], rewrite.stages[1]);
      continue;
    }
    std::string names;
    for (const std::string& name : rewrite.stages)
      names += fmt::format("{}\"{}\"", names.empty() ? "" : " + ", name);
    label += names + " as one stage";
  }
  return label;
}

// Whether `alternative` is `base` (nullptr: the pipeline as traced) with
// folds added and nothing else: the same output for less work, which needs
// no gain over the model's error. The rewrites may come in any order (a
// fold is proposed before a repeat is moved after a cache point).
bool OnlyAddsFolds(const Alternative& alternative, const Alternative* base) {
  const size_t kept = base ? base->rewrites.size() : 0;
  if (alternative.rewrites.size() <= kept) return false;
  std::vector<bool> matched(alternative.rewrites.size(), false);
  for (size_t i = 0; i < kept; ++i) {
    bool found = false;
    for (size_t j = 0; j < alternative.rewrites.size() && !found; ++j) {
      if (!matched[j] && alternative.rewrites[j].kind == base->rewrites[i].kind &&
          alternative.rewrites[j].stages == base->rewrites[i].stages) {
        matched[j] = found = true;
      }
    }
    if (!found) return false;
  }
  for (size_t j = 0; j < alternative.rewrites.size(); ++j) {
    if (!matched[j] && !alternative.folds[j]) return false;
  }
  return true;
}

// The better of two plans of rewritten pipelines (both or neither have
// rewrites): the demand met with fewer cores, else the higher throughput.
bool Better(const Plan& a, const Plan& b, Objective objective) {
  if (objective == Objective::kDemand && a.demand_met != b.demand_met) return a.demand_met;
  if (objective == Objective::kDemand && a.demand_met && a.cores_needed != b.cores_needed)
    return a.cores_needed < b.cores_needed;
  return a.predicted_throughput > b.predicted_throughput;
}

}  // namespace

StatusOr<Plan> SolveWithRewrites(const TuneInput& input, const Resources& resources, Objective objective,
                                 const SolverOptions& options) {
  std::vector<Alternative> alternatives = GraphAlternatives(input, resources.caches_allowed);
  PIPETUNE_ASSIGN_OR_RETURN(Plan plain, Solve(input, resources, objective, options));
  // Every alternative's cache options, labelled, for the plan's table: each
  // keeps whether its own plan chose it, and only the winner's stays so.
  std::vector<std::pair<size_t, CacheOption>> table;
  for (const CacheOption& option : plain.cache_options) table.emplace_back(0, option);
  std::vector<std::string> declined;
  if (input.profile.handoff_cpu_seconds) {
    declined.push_back(
        fmt::format("a hand-off between two stages costs {:.1f} us of CPU per element {}: what fusing "
                    "adjacent maps into one stage saves per boundary",
                    *input.profile.handoff_cpu_seconds * 1e6,
                    input.profile.handoff_given ? "(given with --handoff-ns)" : "on this host (measured)"));
  }
  // Fewer rewrites first: a rewrite added to a plan must pay for itself
  // (kMinRewriteGain over the best plan with fewer rewrites), not only the
  // rewrites together over the pipeline as traced.
  std::vector<size_t> order(alternatives.size() - 1);
  std::iota(order.begin(), order.end(), size_t{1});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return alternatives[x].rewrites.size() < alternatives[y].rewrites.size();
  });
  std::optional<Plan> best, top;  // the winner; the highest-throughput alternative, for the note
  size_t best_index = 0, top_index = 0;
  for (size_t a : order) {
    const Alternative& alternative = alternatives[a];
    SolverOptions alternative_options = options;
    alternative_options.only_cache_after = alternative.only_cache_after;
    StatusOr<Plan> plan = Solve(alternative.input, resources, objective, alternative_options);
    const std::string label = Label(alternative.rewrites);
    if (!plan.ok()) {
      declined.push_back(fmt::format("not rewritten ({}): {}", label, plan.status().message()));
      continue;
    }
    for (CacheOption option : plan->cache_options) {
      // An inadmissible point is listed for a rewritten pipeline only where
      // the rewrite made it so: the pipeline as traced had it feasible (a
      // fusion made the stage before it random).
      auto point = [](const std::string& description) {
        size_t at = description.find("cache after");
        return at == std::string::npos ? description : description.substr(at);
      };
      bool made_inadmissible =
          std::any_of(plain.cache_options.begin(), plain.cache_options.end(), [&](const CacheOption& o) {
            return o.feasible && point(o.description) == point(option.description);
          });
      if (!option.feasible && !made_inadmissible) continue;
      option.description = label + ": " + option.description;
      table.emplace_back(a, std::move(option));
    }
    if (!alternative.only_cache_after.empty() && alternative.rewrites.size() == 1) {
      for (auto& [index, option] : table) {
        if (index == 0 && !option.feasible &&
            option.description == fmt::format("cache after \"{}\"", alternative.only_cache_after)) {
          option.note += "; priced below with the repeat moved after it";
        }
      }
    }
    const Plan& current = best ? *best : plain;
    const bool more_rewrites =
        !best || alternative.rewrites.size() > alternatives[best_index].rewrites.size();
    bool wins = Better(*plan, current, objective);
    if (more_rewrites) {
      wins = OnlyAddsFolds(alternative, best ? &alternatives[best_index] : nullptr)
                 ? !Better(current, *plan, objective)
                 : Pays(current, *plan, objective);
    }
    if (!top || Better(*plan, *top, objective)) {
      top = *plan;
      top_index = a;
    }
    if (wins) {
      best = std::move(plan).value();
      best_index = a;
    }
  }
  if (top && top_index != best_index) {
    const Plan& against = best ? *best : plain;
    const double ratio =
        against.predicted_throughput > 0 ? top->predicted_throughput / against.predicted_throughput : 1.0;
    declined.push_back(fmt::format("not rewritten ({}): predicted x{:.2f} throughput over {}, {}",
                                   Label(alternatives[top_index].rewrites), ratio,
                                   best ? "the plan chosen" : "the pipeline as traced",
                                   ratio >= 1 ? "within the model's error" : "worse"));
  }
  std::vector<CacheOption> options_table;
  for (auto& [alternative, option] : table) {
    option.chosen = option.chosen && alternative == best_index;
    options_table.push_back(std::move(option));
  }
  if (!best) {
    plain.cache_options = std::move(options_table);
    plain.notes.insert(plain.notes.end(), declined.begin(), declined.end());
    return plain;
  }

  Plan plan = std::move(*best);
  const Alternative& chosen = alternatives[best_index];
  const double gain =
      plain.predicted_throughput > 0 ? plan.predicted_throughput / plain.predicted_throughput : 1;
  // "Before" is the pipeline as traced, not as rewritten.
  plan.measured_throughput = plain.measured_throughput;
  plan.predicted_throughput_before = plain.predicted_throughput_before;
  plan.cache_options = std::move(options_table);
  for (GraphRewrite rewrite : chosen.rewrites) {
    rewrite.predicted_gain = gain;
    if (rewrite.kind == kFuseDecodeCrop) {
      const models::StageConfig& crop = input.config->stages[*input.config->FindStage(rewrite.stages[1])];
      AddStageChanges(rewrite, crop.args.contains("size") ? crop.args["size"].dump() : "?", plan);
    } else if (rewrite.kind == kFuseMaps) {
      std::vector<KnobChange> changes;
      changes.push_back({rewrite.stages[0], Knob::kStage, "map", "map chain", true, rewrite.description});
      for (size_t i = 1; i < rewrite.stages.size(); ++i) {
        changes.push_back({rewrite.stages[i], Knob::kStage, "map", "-", true,
                           fmt::format("done by \"{}\" now: {}", rewrite.stages[0], rewrite.reason)});
      }
      plan.knobs.insert(plan.knobs.begin(), changes.begin(), changes.end());
    } else {
      plan.knobs.insert(plan.knobs.begin(),
                        KnobChange{rewrite.stages[0], Knob::kStage, "before \"" + rewrite.stages[1] + "\"",
                                   "after \"" + rewrite.stages[1] + "\"", true, rewrite.reason});
    }
    plan.notes.push_back(
        fmt::format("graph rewrite: {} (predicted x{:.2f} over the best plan without rewrites)",
                    rewrite.description, gain));
    plan.rewrites.push_back(std::move(rewrite));
  }
  plan.notes.insert(plan.notes.end(), chosen.pricing.begin(), chosen.pricing.end());
  plan.notes.insert(plan.notes.end(), declined.begin(), declined.end());
  return plan;
}

StatusOr<models::PipelineConfig> ApplyRewrites(const models::PipelineConfig& config,
                                               const std::vector<GraphRewrite>& rewrites) {
  models::PipelineConfig current = config;
  for (const GraphRewrite& rewrite : rewrites) {
    if (rewrite.kind == kFuseMaps && rewrite.stages.size() >= 2) {
      PIPETUNE_ASSIGN_OR_RETURN(current, FuseMapsInConfig(current, rewrite.stages));
      continue;
    }
    if (rewrite.stages.size() != 2 || (rewrite.kind != kFuseDecodeCrop && rewrite.kind != kMoveRepeat)) {
      return InvalidInput(
          fmt::format("unknown graph rewrite \"{}\": a plan of a newer pipetune?", rewrite.kind));
    }
    if (rewrite.kind == kMoveRepeat) {
      std::optional<size_t> repeat = current.FindStage(rewrite.stages[0]);
      std::optional<size_t> point = current.FindStage(rewrite.stages[1]);
      if (!repeat || !point || *repeat >= *point || current.stages[*repeat].op != models::Op::kRepeat) {
        return InvalidInput(fmt::format(
            "the plan moves the repeat \"{}\" after \"{}\", which the config does not have in that order: a "
            "plan of another pipeline?",
            rewrite.stages[0], rewrite.stages[1]));
      }
      models::StageConfig moved = current.stages[*repeat];
      current.stages.erase(current.stages.begin() + static_cast<std::ptrdiff_t>(*repeat));
      current.stages.insert(current.stages.begin() + static_cast<std::ptrdiff_t>(*point), std::move(moved));
      for (size_t i = 0; i < current.stages.size(); ++i) current.stages[i].index = i;
      continue;
    }
    std::optional<models::DecodeCropPair> pair = models::FindDecodeCropPair(current);
    if (!pair || current.stages[pair->decode].name != rewrite.stages[0] ||
        current.stages[pair->crop].name != rewrite.stages[1]) {
      return InvalidInput(
          fmt::format("the plan fuses \"{}\" (jpeg_decode) with \"{}\" (random_crop_flip), which the config "
                      "does not have "
                      "one after the other: a plan of another pipeline?",
                      rewrite.stages[0], rewrite.stages[1]));
    }
    PIPETUNE_ASSIGN_OR_RETURN(current, models::FuseDecodeCrop(current, *pair));
  }
  return current;
}

}  // namespace pipetune::tuner
