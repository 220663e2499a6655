// `pipetune-rewrite extract FILE.cc [-p BUILD_DIR | -- FLAGS...] [--format text|json]`
// `pipetune-rewrite apply FILE.cc --plan PLAN.json [-i] [-p BUILD_DIR | -- FLAGS...]`
#include "pipetune/rewrite/command.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "pipetune/base/files.h"
#include "pipetune/rewrite/apply.h"
#include "pipetune/rewrite/finder.h"

namespace pipetune::rewrite {
namespace {

constexpr const char* kUsage =
    "usage: pipetune-rewrite extract FILE.cc [--format text|json] [-p BUILD_DIR | -- COMPILER_FLAGS...]\n"
    "       pipetune-rewrite apply FILE.cc --plan PLAN.json [-i] [-p BUILD_DIR | -- COMPILER_FLAGS...]\n"
    "extract: the pipelines FILE.cc builds with pipetune's builder, their knobs, and where each knob's\n"
    "         literal is (or why it cannot be rewritten).\n"
    "apply:   sets the knobs of PLAN.json (`pipetune tune --format json`) in the source: a unified diff\n"
    "         on stdout, or with -i the files rewritten (all or none).\n"
    "-p BUILD_DIR: a directory holding compile_commands.json; -- FLAGS: the compiler flags.\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "pipetune-rewrite: %s\n", message.c_str());
  return 2;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "pipetune-rewrite: %s\n%s", message.c_str(), kUsage);
  return 2;
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  if (command != "extract" && command != "apply") return Usage("unknown command \"" + command + "\"");
  std::string file, plan_path, format = "text";
  bool in_place = false;
  CompileSetup setup;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      setup.has_flags = true;
      setup.flags.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if ((a == "-p" || a == "--plan" || a == "--format") && i + 1 >= args.size())
      return Usage(a + " needs a value");
    if (a == "-p") {
      setup.build_dir = args[++i];
    } else if (a == "--plan" && command == "apply") {
      plan_path = args[++i];
    } else if (a == "--format" && command == "extract") {
      format = args[++i];
      if (format != "text" && format != "json") return Usage("--format: text or json");
    } else if (a == "-i" && command == "apply") {
      in_place = true;
    } else if (!a.empty() && a[0] != '-' && file.empty()) {
      file = a;
    } else {
      return Usage("unexpected argument \"" + a + "\"");
    }
  }
  if (file.empty()) return Usage("which FILE.cc?");
  if (!setup.build_dir.empty() && setup.has_flags) return Usage("give -p or --, not both");
  if (command == "apply" && plan_path.empty()) return Usage("apply needs --plan PLAN.json");
  {
    std::ifstream probe(file);
    if (!probe) return Fail(file + ": cannot read");
  }

  Json plan;
  if (command == "apply") {
    StatusOr<std::string> text = ReadFile(plan_path, "the plan");
    if (!text.ok()) return Fail(text.status().message());
    try {
      plan = Json::parse(*text);
    } catch (const Json::exception& e) {
      return Fail(fmt::format("{}: not JSON: {}", plan_path, e.what()));
    }
  }

  StatusOr<FindResult> found = FindInFile(file, setup);
  if (!found.ok()) return Fail(found.status().message());
  if (command == "extract") {
    std::fputs((format == "json" ? FormatFindJson(*found) : FormatFindText(*found)).c_str(), stdout);
    return 0;
  }
  StatusOr<EditPlan> edits = PlanEdits(*found, plan);
  if (!edits.ok()) return Fail(fmt::format("{}: {}: {}", file, plan_path, edits.status().message()));
  StatusOr<std::map<std::string, std::pair<std::string, std::string>>> files = ApplyEdits(edits->edits);
  if (!files.ok()) return Fail(files.status().message());
  for (const Edit& e : edits->edits) std::fprintf(stderr, "%s\n", e.what.c_str());
  for (const std::string& n : edits->notes) std::fprintf(stderr, "%s\n", n.c_str());
  if (!in_place) {
    std::string diff = DiffAll(*files);
    std::fputs(diff.empty() ? "(no change)\n" : diff.c_str(), stdout);
    return 0;
  }
  Status written = WriteAll(*files);
  if (!written.ok()) return Fail(written.message());
  for (const auto& f : *files) std::printf("rewrote %s\n", f.first.c_str());
  if (files->empty()) std::printf("%s: no change\n", file.c_str());
  return 0;
}

}  // namespace pipetune::rewrite
