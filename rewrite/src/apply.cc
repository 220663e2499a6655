// Plan -> edits -> tooling::Replacements -> new file contents, a diff, or the
// files rewritten all-or-nothing.
#include "pipetune/rewrite/apply.h"

#include <clang/Tooling/Core/Replacement.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/tuner/rewrite.h"

namespace pipetune::rewrite {
namespace {

std::string EscapeString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The literal that spells `value` for `knob`, in the style of `old_text`.
StatusOr<std::string> Spell(const KnobSite& site, const std::string& value) {
  if (site.knob == "location") return EscapeString(value);
  if (site.knob == "random") return value;
  for (char c : value) {
    if (c < '0' || c > '9') {
      return InvalidInput(fmt::format("stage \"{}\": knob {}: the plan's value \"{}\" is not a whole number",
                                      site.stage, site.knob, value));
    }
  }
  return value;
}

std::string Describe(const KnobSite& site) {
  if (site.rewritable) {
    return site.via.empty() ? fmt::format("literal at {}", site.literal.ToString())
                            : fmt::format("constant {} at {}", site.via, site.literal.ToString());
  }
  return site.why;
}

}  // namespace

StatusOr<EditPlan> PlanEdits(const FindResult& found, const Json& plan) {
  if (!plan.is_object() || !plan.contains("knobs") || !plan["knobs"].is_array() ||
      !plan.contains("pipeline")) {
    return InvalidInput(
        "the plan is not a tuning plan (`pipetune tune --format json` prints one): no \"knobs\" or "
        "\"pipeline\"");
  }
  const std::string pipeline_name = plan["pipeline"].is_string() ? plan["pipeline"].get<std::string>() : "";
  const FoundPipeline* pipeline = nullptr;
  std::vector<std::string> names;
  for (const FoundPipeline& p : found.pipelines) {
    names.push_back(p.name.empty() ? "?" : p.name);
    if (p.name == pipeline_name) pipeline = &p;
  }
  // A single pipeline whose name the finder could not tell (a builder made by
  // a function) is the plan's.
  if (pipeline == nullptr && found.pipelines.size() == 1 && found.pipelines[0].name.empty()) {
    pipeline = &found.pipelines[0];
  }
  if (pipeline == nullptr) {
    return InvalidInput(fmt::format("the plan's pipeline \"{}\" is not built in the source (it builds: {})",
                                    pipeline_name,
                                    names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  EditPlan out;
  // offset key -> (value, what) to catch two knobs sharing one literal.
  std::map<std::pair<std::string, unsigned>, std::pair<std::string, std::string>> claimed;
  for (const Json& k : plan["knobs"]) {
    if (!k.is_object() || !k.contains("stage") || !k.contains("knob") || !k.contains("new")) {
      return InvalidInput("the plan's \"knobs\" entries need \"stage\", \"knob\" and \"new\"");
    }
    const std::string stage = k["stage"].get<std::string>();
    const std::string knob = k["knob"].get<std::string>();
    const std::string value = k["new"].get<std::string>();
    const bool changed = k.value("changed", true);
    if (knob == "stage") {
      if (changed) {
        return InvalidInput(fmt::format(
            "stage \"{}\": the plan {} this stage; the source rewrite changes knobs only (add or remove the "
            "stage in the code, or tune with a config)",
            stage, value == "-" ? "removes" : "inserts"));
      }
      continue;
    }
    const FoundStage* found_stage = nullptr;
    for (const FoundStage& s : pipeline->stages) {
      if (s.name == stage) found_stage = &s;
    }
    if (found_stage == nullptr) {
      return InvalidInput(fmt::format(
          "stage \"{}\" of the plan is not a stage of pipeline \"{}\" in the source", stage, pipeline_name));
    }
    std::vector<const KnobSite*> sites;
    for (const KnobSite& s : pipeline->knobs) {
      if (s.stage == stage && s.knob == knob) sites.push_back(&s);
    }
    if (!changed) continue;
    if (sites.size() > 1) {
      std::vector<std::string> where;
      for (const KnobSite* s : sites) where.push_back(s->call.ToString());
      return InvalidInput(
          fmt::format("stage \"{}\": knob {} is set {} times (at {}): conflict, which one to rewrite?", stage,
                      knob, sites.size(), fmt::join(where, ", ")));
    }
    if (sites.empty()) {
      if (!found_stage->can_insert) {
        return InvalidInput(
            fmt::format("stage \"{}\": knob {} has no call in the source and the stage is made inside a "
                        "macro at {}: cannot "
                        "add one",
                        stage, knob, found_stage->where.ToString()));
      }
      std::string method = knob == "parallelism" ? "Parallelism" : knob == "buffer" ? "Buffer" : "Location";
      KnobSite probe;
      probe.stage = stage;
      probe.knob = knob;
      PIPETUNE_ASSIGN_OR_RETURN(std::string literal, Spell(probe, value));
      out.edits.push_back({found_stage->insert_file, found_stage->insert_offset, 0,
                           fmt::format(".{}({})", method, literal),
                           fmt::format("stage \"{}\": {} (unset) -> {}, a call added at {}", stage, knob,
                                       value, found_stage->where.ToString())});
      continue;
    }
    const KnobSite& site = *sites.front();
    if (!site.rewritable) {
      return InvalidInput(fmt::format("stage \"{}\": knob {} (at {}) cannot be rewritten: its value is {}",
                                      stage, knob, site.call.ToString(), site.why));
    }
    PIPETUNE_ASSIGN_OR_RETURN(std::string literal, Spell(site, value));
    std::string what = fmt::format("stage \"{}\": {} {} -> {} ({})", stage, knob, site.value.value_or("?"),
                                   value, Describe(site));
    auto key = std::make_pair(site.edit_file, site.offset);
    auto [it, inserted] = claimed.emplace(key, std::make_pair(literal, what));
    if (!inserted) {
      if (it->second.first != literal) {
        return InvalidInput(
            fmt::format("conflict: {} and {} share one literal ({}) but the plan wants {} and {}",
                        it->second.second, what, Describe(site), it->second.first, literal));
      }
      continue;
    }
    if (literal == site.text) {
      out.notes.push_back(what + ": already so");
      continue;
    }
    out.edits.push_back({site.edit_file, site.offset, site.length, literal, what});
  }
  // A shared constant: a knob the plan leaves alone must not change with it.
  for (const KnobSite& s : pipeline->knobs) {
    if (!s.rewritable) continue;
    auto it = claimed.find({s.edit_file, s.offset});
    if (it == claimed.end() || it->second.first == s.text) continue;
    bool planned = false;
    for (const Json& k : plan["knobs"]) {
      if (k["stage"] == s.stage && k["knob"] == s.knob) planned = true;
    }
    if (!planned) {
      return InvalidInput(
          fmt::format("conflict: {} also sets stage \"{}\" {} (call at {}), which the plan does not change",
                      Describe(s), s.stage, s.knob, s.call.ToString()));
    }
  }
  return out;
}

StatusOr<std::map<std::string, std::pair<std::string, std::string>>> ApplyEditsTo(
    const std::vector<Edit>& edits, const std::map<std::string, std::string>& contents) {
  std::map<std::string, clang::tooling::Replacements> by_file;
  for (const Edit& e : edits) {
    llvm::Error err =
        by_file[e.file].add(clang::tooling::Replacement(e.file, e.offset, e.length, e.replacement));
    if (err) {
      return InvalidInput(fmt::format("conflict: {}: {}", e.what, llvm::toString(std::move(err))));
    }
  }
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& [file, replacements] : by_file) {
    auto it = contents.find(file);
    if (it == contents.end()) return IoError(file + ": not read");
    llvm::Expected<std::string> changed = clang::tooling::applyAllReplacements(it->second, replacements);
    if (!changed) return InvalidInput(fmt::format("{}: {}", file, llvm::toString(changed.takeError())));
    out[file] = {it->second, *changed};
  }
  return out;
}

StatusOr<std::map<std::string, std::pair<std::string, std::string>>> ApplyEdits(
    const std::vector<Edit>& edits) {
  std::map<std::string, std::string> contents;
  for (const Edit& e : edits) {
    if (contents.count(e.file) != 0) continue;
    PIPETUNE_ASSIGN_OR_RETURN(contents[e.file], ReadFile(e.file));
  }
  return ApplyEditsTo(edits, contents);
}

std::string DiffAll(const std::map<std::string, std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [file, texts] : files) {
    out += tuner::UnifiedDiff(texts.first, texts.second, "a/" + file, "b/" + file);
  }
  return out;
}

Status WriteAll(const std::map<std::string, std::pair<std::string, std::string>>& files) {
  // Every file is written and flushed before any is renamed into place, so a
  // failure leaves every source as it was.
  std::vector<PendingFile> pending;
  for (const auto& [file, texts] : files) {
    PIPETUNE_ASSIGN_OR_RETURN(PendingFile written, PendingFile::Write(file, texts.second));
    pending.push_back(std::move(written));
  }
  for (PendingFile& file : pending) PIPETUNE_RETURN_IF_ERROR(file.Commit());
  return Status::Ok();
}

}  // namespace pipetune::rewrite
