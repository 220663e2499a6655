// pipetune-rewrite: the finder on in-memory sources (clang::tooling::
// runToolOnCodeWithArgs through FindInCode) against a stub of the builder's
// header, plan -> edits -> golden diffs, the errors apply must refuse with,
// all-or-nothing writing, and extract on the example against its JSON twin.
//
// PIPETUNE_UPDATE_GOLDEN=1 rewrites tests/rewrite/golden/*.diff.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipetune/base/json.h"
#include "pipetune/models/config.h"
#include "pipetune/rewrite/apply.h"
#include "pipetune/rewrite/finder.h"

// Left as written: its raw strings are C++ sources whose layout the
// rewriter's diffs are compared against, and clang-format would re-indent
// them.
// clang-format off

namespace pipetune::rewrite {
namespace {


// The builder's interface as the finder sees it (the real header pulls in
// nlohmann/json, which would make every parse a second slower).
constexpr const char* kStubHeader = R"cc(
#pragma once
#include <string>
namespace pipetune {
struct Status { static Status Ok() { return {}; } };
namespace runtime {
struct Element {};
struct FnContext {};
using MapCallable = Status (*)(Element&, const FnContext&);
class StageBuilder {
 public:
  StageBuilder& Parallelism(int workers);
  StageBuilder& Buffer(long elements);
  StageBuilder& Location(const std::string& where);
  StageBuilder& Random(bool random = true);
  StageBuilder& Arg(const std::string& key, int value);
};
class PipelineBuilder {
 public:
  explicit PipelineBuilder(std::string name);
  PipelineBuilder& Cores(double cores);
  StageBuilder& Stage(const std::string& name, const std::string& op);
  StageBuilder& Range(const std::string& name, long count);
  StageBuilder& ListFiles(const std::string& name, const std::string& pattern);
  StageBuilder& ReadFile(const std::string& name);
  StageBuilder& Map(const std::string& name, const std::string& fn);
  StageBuilder& Map(const std::string& name, MapCallable fn);
  StageBuilder& Batch(const std::string& name, long size);
  StageBuilder& Prefetch(const std::string& name);
  StageBuilder& Cache(const std::string& name);
};
}  // namespace runtime
}  // namespace pipetune
)cc";

constexpr const char* kPrelude =
    "#include \"pipetune/runtime/builder.h\"\n"
    "using pipetune::runtime::PipelineBuilder;\n"
    "using pipetune::runtime::StageBuilder;\n";

FindResult Find(const std::string& body) {
  // The stub lives in an in-memory include directory (no such directory on disk).
  StatusOr<FindResult> found =
      FindInCode(std::string(kPrelude) + body, "pipeline.cc", {"-std=c++20", "-I/pipetune-virtual-include"},
                 {{"/pipetune-virtual-include/pipetune/runtime/builder.h", kStubHeader}});
  EXPECT_TRUE(found.ok()) << found.status().message();
  return found.ok() ? *found : FindResult{};
}

const FoundPipeline* PipelineNamed(const FindResult& r, const std::string& name) {
  for (const FoundPipeline& p : r.pipelines) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const KnobSite* KnobOf(const FoundPipeline& p, const std::string& stage, const std::string& knob) {
  for (const KnobSite& k : p.knobs) {
    if (k.stage == stage && k.knob == knob) return &k;
  }
  return nullptr;
}

Json Plan(const std::string& pipeline, const std::vector<std::tuple<std::string, std::string, std::string>>& knobs) {
  Json plan = {{"pipeline", pipeline}, {"knobs", Json::array()}};
  for (const auto& [stage, knob, value] : knobs) {
    plan["knobs"].push_back({{"stage", stage}, {"knob", knob}, {"old", "1"}, {"new", value}, {"changed", true}});
  }
  return plan;
}

// Applies the plan to the in-memory source; the diff, or the error.
StatusOr<std::string> Apply(const std::string& body, const Json& plan) {
  FindResult found = Find(body);
  PIPETUNE_ASSIGN_OR_RETURN(EditPlan edits, PlanEdits(found, plan));
  std::map<std::string, std::string> contents = {{"pipeline.cc", std::string(kPrelude) + body}};
  PIPETUNE_ASSIGN_OR_RETURN(auto files, ApplyEditsTo(edits.edits, contents));
  return DiffAll(files);
}

void ExpectGolden(const std::string& name, const std::string& diff) {
  const std::string path = std::string(PIPETUNE_SOURCE_DIR "/tests/rewrite/golden/") + name + ".diff";
  if (std::getenv("PIPETUNE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << diff;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " missing (PIPETUNE_UPDATE_GOLDEN=1 writes it); the diff:\n" << diff;
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), diff) << path;
}

constexpr const char* kLiterals = R"cc(
int main() {
  PipelineBuilder b("literals");
  b.Cores(2);
  b.ListFiles("files", "data/*.jpg");
  b.ReadFile("read").Parallelism(1);  // one reader: the disk is slow
  b.Map("decode", "jpeg_decode")
      .Parallelism(1)  /* decode workers */
      .Random(false);
  b.Cache("cache").Location("memory");
  b.Batch("batch", 64);
  b.Prefetch("prefetch").Buffer(1);
}
)cc";

TEST(RewriteFinderTest, LiteralsAreFoundWithTheirPlaces) {
  FindResult r = Find(kLiterals);
  ASSERT_EQ(r.pipelines.size(), 1u);
  const FoundPipeline& p = r.pipelines[0];
  EXPECT_EQ(p.name, "literals");
  ASSERT_EQ(p.stages.size(), 6u);
  EXPECT_EQ(p.stages[1].name, "read");
  EXPECT_EQ(p.stages[1].op, "read_file");
  EXPECT_EQ(p.stages[2].fn, "jpeg_decode");
  const KnobSite* decode = KnobOf(p, "decode", "parallelism");
  ASSERT_NE(decode, nullptr);
  EXPECT_TRUE(decode->rewritable);
  EXPECT_EQ(decode->value, "1");
  EXPECT_EQ(decode->literal.file, "pipeline.cc");
  EXPECT_EQ(decode->literal.line, 11u);
  EXPECT_EQ(decode->literal.column, 20u);
  const KnobSite* location = KnobOf(p, "cache", "location");
  ASSERT_NE(location, nullptr);
  EXPECT_EQ(location->value, "memory");
  EXPECT_EQ(location->text, "\"memory\"");
  EXPECT_EQ(KnobOf(p, "decode", "random")->value, "false");
  EXPECT_EQ(KnobOf(p, "prefetch", "buffer")->value, "1");
}

TEST(RewriteApplyTest, LiteralsGolden) {
  StatusOr<std::string> diff = Apply(kLiterals, Plan("literals", {{"decode", "parallelism", "3"},
                                                                  {"read", "parallelism", "2"},
                                                                  {"cache", "location", "cache dir"},
                                                                  {"prefetch", "buffer", "4"}}));
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ExpectGolden("literals", *diff);
  // The comments stay, only the literals change.
  EXPECT_NE(diff->find("+  b.ReadFile(\"read\").Parallelism(2);  // one reader: the disk is slow"),
            std::string::npos)
      << *diff;
  EXPECT_NE(diff->find("+      .Parallelism(3)  /* decode workers */"), std::string::npos) << *diff;
}

constexpr const char* kConstants = R"cc(
constexpr int kDecodeWorkers = 2;  // tuned by pipetune
const int kPrefetch = 1;
constexpr int kShared = 1;
int main() {
  PipelineBuilder b("constants");
  b.Range("source", 100);
  b.Map("decode", "cpu_work").Parallelism(kDecodeWorkers);
  b.Map("a", "cpu_work").Parallelism(kShared);
  b.Map("b", "cpu_work").Parallelism(kShared);
  b.Prefetch("prefetch").Buffer(kPrefetch);
}
)cc";

TEST(RewriteApplyTest, NamedConstantsAreRewrittenAtTheirDefinition) {
  FindResult r = Find(kConstants);
  ASSERT_EQ(r.pipelines.size(), 1u);
  const KnobSite* decode = KnobOf(r.pipelines[0], "decode", "parallelism");
  ASSERT_NE(decode, nullptr);
  EXPECT_TRUE(decode->rewritable);
  EXPECT_EQ(decode->via, "kDecodeWorkers");
  EXPECT_EQ(decode->literal.line, 5u);  // the constant's line (3 lines of prelude, 1 empty)
  EXPECT_EQ(decode->value, "2");
  StatusOr<std::string> diff =
      Apply(kConstants, Plan("constants", {{"decode", "parallelism", "4"}, {"prefetch", "buffer", "3"}}));
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ExpectGolden("constants", *diff);
  // A constant shared by two knobs: the same value is fine, two are a conflict.
  StatusOr<std::string> same =
      Apply(kConstants, Plan("constants", {{"a", "parallelism", "2"}, {"b", "parallelism", "2"}}));
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_NE(same->find("+constexpr int kShared = 2;"), std::string::npos) << *same;
  StatusOr<std::string> conflict =
      Apply(kConstants, Plan("constants", {{"a", "parallelism", "2"}, {"b", "parallelism", "3"}}));
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("conflict"), std::string::npos) << conflict.status().message();
  EXPECT_NE(conflict.status().message().find("kShared"), std::string::npos) << conflict.status().message();
  // Changing one of the two alone would change the other: refused too.
  StatusOr<std::string> alone = Apply(kConstants, Plan("constants", {{"a", "parallelism", "2"}}));
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("stage \"b\""), std::string::npos) << alone.status().message();
}

constexpr const char* kNotRewritable = R"cc(
#define WORKERS 4
#define ADD_MAP(builder, name, n) builder.Map(name, "cpu_work").Parallelism(n)
constexpr int kBase = 2;
int main(int argc, char**) {
  PipelineBuilder b("fixed");
  b.Range("source", 100);
  b.Map("macro", "cpu_work").Parallelism(WORKERS);
  ADD_MAP(b, "macro_arg", 3);
  int workers = argc;
  b.Map("variable", "cpu_work").Parallelism(workers);
  b.Map("computed", "cpu_work").Parallelism(kBase * 2);
  b.Prefetch("prefetch").Buffer(1);
}
)cc";

TEST(RewriteFinderTest, MacrosVariablesAndComputedValuesAreReported) {
  FindResult r = Find(kNotRewritable);
  ASSERT_EQ(r.pipelines.size(), 1u);
  const FoundPipeline& p = r.pipelines[0];
  struct Case {
    const char* stage;
    const char* value;
    const char* why;
  };
  for (const Case& c : {Case{"macro", "4", "the macro WORKERS"}, Case{"macro_arg", "3", "a macro argument"},
                        Case{"variable", nullptr, "the variable `workers`"},
                        Case{"computed", "4", "a computed value `kBase * 2`"}}) {
    SCOPED_TRACE(c.stage);
    const KnobSite* k = KnobOf(p, c.stage, "parallelism");
    ASSERT_NE(k, nullptr);
    EXPECT_FALSE(k->rewritable);
    if (c.value != nullptr) {
      EXPECT_EQ(k->value, c.value);
    } else {
      EXPECT_FALSE(k->value.has_value());
    }
    EXPECT_NE(k->why.find(c.why), std::string::npos) << k->why;
  }
  EXPECT_NE(KnobOf(p, "macro_arg", "parallelism")->why.find("ADD_MAP"), std::string::npos);
  // The one that can be rewritten still is; the plan touching a fixed one fails, naming it.
  StatusOr<std::string> ok = Apply(kNotRewritable, Plan("fixed", {{"prefetch", "buffer", "2"}}));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  StatusOr<std::string> refused = Apply(kNotRewritable, Plan("fixed", {{"variable", "parallelism", "2"}}));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stage \"variable\": knob parallelism"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("workers"), std::string::npos) << refused.status().message();
}

constexpr const char* kTwoPipelines = R"cc(
void Train() {
  PipelineBuilder train("train");
  train.Range("source", 100);
  train.Map("decode", "cpu_work").Parallelism(1);
}
void Eval() {
  PipelineBuilder eval("eval");
  eval.Range("source", 100);
  eval.Map("decode", "cpu_work").Parallelism(1);
}
)cc";

TEST(RewriteApplyTest, TwoPipelinesInOneFile) {
  FindResult r = Find(kTwoPipelines);
  ASSERT_EQ(r.pipelines.size(), 2u);
  ASSERT_NE(PipelineNamed(r, "train"), nullptr);
  ASSERT_NE(PipelineNamed(r, "eval"), nullptr);
  StatusOr<std::string> diff = Apply(kTwoPipelines, Plan("eval", {{"decode", "parallelism", "2"}}));
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ExpectGolden("two_pipelines", *diff);
  StatusOr<std::string> unknown = Apply(kTwoPipelines, Plan("test", {{"decode", "parallelism", "2"}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("\"test\""), std::string::npos) << unknown.status().message();
}

constexpr const char* kHelpers = R"cc(
void AddDecode(PipelineBuilder& p) {
  p.Map("decode", "jpeg_decode").Parallelism(1);
}
StageBuilder& AddAugment(PipelineBuilder& p) { return p.Map("augment", "random_crop_flip"); }
int main() {
  PipelineBuilder b("helpers");
  b.ListFiles("files", "data/*.jpg");
  AddDecode(b);
  AddAugment(b).Parallelism(1);
  StageBuilder& batch = b.Batch("batch", 64);
  batch.Random(false);
  StageBuilder& prefetch = b.Prefetch("prefetch");
  prefetch.Buffer(1);
}
)cc";

TEST(RewriteApplyTest, PipelineBuiltAcrossHelperFunctions) {
  FindResult r = Find(kHelpers);
  ASSERT_EQ(r.pipelines.size(), 1u) << FormatFindText(r);
  const FoundPipeline& p = r.pipelines[0];
  EXPECT_EQ(p.name, "helpers");
  // Stages in the order the program makes them, helpers' at their calls.
  std::vector<std::string> names;
  for (const FoundStage& s : p.stages) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"files", "decode", "augment", "batch", "prefetch"}));
  EXPECT_TRUE(KnobOf(p, "decode", "parallelism") != nullptr) << FormatFindText(r);
  EXPECT_TRUE(KnobOf(p, "prefetch", "buffer") != nullptr) << FormatFindText(r);
  StatusOr<std::string> diff = Apply(kHelpers, Plan("helpers", {{"decode", "parallelism", "2"},
                                                                {"augment", "parallelism", "3"},
                                                                {"prefetch", "buffer", "4"}}));
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ExpectGolden("helpers", *diff);
}

constexpr const char* kUnrelated = R"cc(
struct Pool {
  Pool& Parallelism(int n);
  Pool& Buffer(long n);
};
struct OtherBuilder {
  Pool& Map(const char* name, const char* fn);
};
int main() {
  Pool pool;
  pool.Parallelism(8).Buffer(16);
  OtherBuilder other;
  other.Map("decode", "x").Parallelism(4);
  PipelineBuilder b("real");
  b.Range("source", 10);
  b.Map("decode", "cpu_work").Parallelism(1);
}
)cc";

TEST(RewriteFinderTest, UnrelatedCallsWithTheSameNamesAreLeftAlone) {
  FindResult r = Find(kUnrelated);
  ASSERT_EQ(r.pipelines.size(), 1u);
  EXPECT_EQ(r.pipelines[0].knobs.size(), 1u) << FormatFindText(r);
  EXPECT_TRUE(r.warnings.empty()) << FormatFindText(r);
  StatusOr<std::string> diff = Apply(kUnrelated, Plan("real", {{"decode", "parallelism", "2"}}));
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ExpectGolden("unrelated", *diff);
}

constexpr const char* kTemplates = R"cc(
template <int N>
void AddWorkers(PipelineBuilder& b) {
  b.Map("workers", "cpu_work").Parallelism(N);
}
template <typename Builder>
void AddPrefetch(Builder& b) {
  b.Prefetch("prefetch").Buffer(2);
}
int main() {
  PipelineBuilder b("templates");
  b.Range("source", 10);
  AddWorkers<3>(b);
  AddPrefetch(b);
}
)cc";

TEST(RewriteApplyTest, Templates) {
  FindResult r = Find(kTemplates);
  ASSERT_EQ(r.pipelines.size(), 1u) << FormatFindText(r);
  const FoundPipeline& p = r.pipelines[0];
  const KnobSite* workers = KnobOf(p, "workers", "parallelism");
  ASSERT_NE(workers, nullptr) << FormatFindText(r);
  EXPECT_FALSE(workers->rewritable);
  EXPECT_NE(workers->why.find("template parameter N"), std::string::npos) << workers->why;
  const KnobSite* prefetch = KnobOf(p, "prefetch", "buffer");
  ASSERT_NE(prefetch, nullptr) << FormatFindText(r);
  EXPECT_TRUE(prefetch->rewritable) << prefetch->why;
  EXPECT_EQ(prefetch->value, "2");
  StatusOr<std::string> diff = Apply(kTemplates, Plan("templates", {{"prefetch", "buffer", "5"}}));
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ExpectGolden("templates", *diff);
}

TEST(RewriteApplyTest, PlanErrorsNameWhatTheyCannotDo) {
  StatusOr<std::string> unknown = Apply(kLiterals, Plan("literals", {{"resize", "parallelism", "2"}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("stage \"resize\""), std::string::npos) << unknown.status().message();
  Json inserts = Plan("literals", {});
  inserts["knobs"].push_back({{"stage", "cache2"}, {"knob", "stage"}, {"old", "-"}, {"new", "cache"}, {"changed", true}});
  StatusOr<std::string> insert = Apply(kLiterals, inserts);
  ASSERT_FALSE(insert.ok());
  EXPECT_NE(insert.status().message().find("stage \"cache2\""), std::string::npos) << insert.status().message();
  StatusOr<std::string> not_plan = Apply(kLiterals, Json::object());
  ASSERT_FALSE(not_plan.ok());
  // A knob with no call: added after the call making the stage.
  StatusOr<std::string> added = Apply(kLiterals, Plan("literals", {{"batch", "buffer", "2"}}));
  ASSERT_TRUE(added.ok()) << added.status().message();
  EXPECT_NE(added->find("+  b.Batch(\"batch\", 64).Buffer(2);"), std::string::npos) << *added;
}

TEST(RewriteApplyTest, WriteAllWritesEveryFileOrNone) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("pipetune_rewrite_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string a = (dir / "a.cc").string();
  std::ofstream(a) << "old a\n";
  std::map<std::string, std::pair<std::string, std::string>> files = {
      {a, {"old a\n", "new a\n"}}, {(dir / "missing" / "b.cc").string(), {"old b\n", "new b\n"}}};
  EXPECT_FALSE(WriteAll(files).ok());
  std::ifstream in(a);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "old a");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // a.cc alone: no temporaries left
  files.erase((dir / "missing" / "b.cc").string());
  ASSERT_TRUE(WriteAll(files).ok());
  std::ifstream again(a);
  std::getline(again, line);
  EXPECT_EQ(line, "new a");
  fs::remove_all(dir);
}

// Acceptance: extract on the example prints the config of its JSON twin,
// knob for knob.
TEST(RewriteExampleTest, ExtractEqualsTheJsonTwin) {
  CompileSetup setup;
  setup.build_dir = PIPETUNE_BINARY_DIR;
  StatusOr<FindResult> found = FindInFile(PIPETUNE_SOURCE_DIR "/examples/builder/image_builder.cc", setup);
  ASSERT_TRUE(found.ok()) << found.status().message();
  ASSERT_EQ(found->pipelines.size(), 1u);
  Json extracted = Json::parse(FormatFindJson(*found))["pipelines"][0];
  StatusOr<models::PipelineConfig> twin =
      models::LoadConfig(PIPETUNE_SOURCE_DIR "/examples/builder/image_builder.json");
  ASSERT_TRUE(twin.ok()) << twin.status().message();
  EXPECT_EQ(extracted["name"], twin->name);
  ASSERT_EQ(extracted["stages"].size(), twin->stages.size()) << extracted.dump(2);
  for (size_t i = 0; i < twin->stages.size(); ++i) {
    const models::StageConfig& want = twin->stages[i];
    const Json& got = extracted["stages"][i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(got["name"], want.name);
    EXPECT_EQ(got["op"], models::OpName(want.op));
    EXPECT_EQ(got.value("fn", ""), want.fn);
    EXPECT_EQ(got.contains("parallelism"), want.raw.contains("parallelism"));
    if (got.contains("parallelism")) {
      EXPECT_EQ(got["parallelism"], want.parallelism);
    }
    EXPECT_EQ(got.contains("buffer"), want.buffer.has_value());
    if (want.buffer) {
      EXPECT_EQ(got["buffer"], *want.buffer);
    }
    EXPECT_EQ(got.value("random", false), want.random);
    EXPECT_EQ(got.contains("location"), want.location.has_value());
  }
  // Every knob the tuner sets can be rewritten; decode's through its constant.
  for (const Json& k : extracted["knobs"]) {
    if (k["knob"] != "random") {
      EXPECT_TRUE(k["rewritable"].get<bool>()) << k.dump();
    }
  }
  const KnobSite* decode = KnobOf(found->pipelines[0], "decode", "parallelism");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(decode->via, "kDecodeWorkers");
}

}  // namespace
}  // namespace pipetune::rewrite
// clang-format on
