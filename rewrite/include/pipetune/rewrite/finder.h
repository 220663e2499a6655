// The finder of `pipetune-rewrite` (docs/rewrite.md): parses a C++ source
// with Clang and finds the pipelines it builds with pipetune's builder
// (pipetune/runtime/builder.h): each stage made by name and op, and each knob
// call (Parallelism, Buffer, Location, Random) with its value and where that
// value is written: a literal at the call, or a named constant's initializer
// (`constexpr int kDecodeWorkers = 2;` is rewritten at its definition). A
// knob whose value is a variable, a computed value, a macro or a template
// parameter is reported with where the value comes from and why it cannot be
// rewritten.
//
// This header names no Clang type: the core libraries and `pipetune` never
// link LLVM; only the rewrite library and its executable do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"

namespace pipetune::rewrite {

struct SourceLocation {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
  std::string ToString() const;  // "file:line:col"
};

// One knob call on a stage: `.Parallelism(kDecodeWorkers)`.
struct KnobSite {
  std::string pipeline;  // "" when the pipeline's name cannot be told
  std::string stage;
  std::string knob;                  // "parallelism", "buffer", "location", "random"
  std::optional<std::string> value;  // as a config spells it: "2", "memory", "true"; nullopt: unknown
  SourceLocation call;               // the knob call (the method name)
  bool rewritable = false;
  // Rewritable: the literal to replace, its byte range in `edit_file` and its
  // text; `via` names the constant it is the initializer of, if any.
  SourceLocation literal;
  std::string edit_file;  // the file as Clang opened it
  unsigned offset = 0;
  unsigned length = 0;
  std::string text;
  std::string via;
  // Not rewritable: where the value comes from and why.
  std::string why;
};

struct FoundStage {
  std::string name;
  std::string op;        // as the config spells it: "map", "list_files", ...
  std::string fn;        // map / filter: the function's name when known
  SourceLocation where;  // the call making the stage
  // Where a missing knob call can be added: just after the call making the
  // stage (edit_file, offset); unset when that call is inside a macro.
  bool can_insert = false;
  std::string insert_file;
  unsigned insert_offset = 0;
};

struct FoundPipeline {
  std::string name;  // "" when it cannot be told
  SourceLocation where;
  std::vector<FoundStage> stages;  // in source order
  std::vector<KnobSite> knobs;     // in source order
};

struct FindResult {
  std::vector<FoundPipeline> pipelines;
  // Stages or knobs the finder saw but could not attribute (a stage name that
  // is not a literal, a knob on a StageBuilder from nowhere it can follow).
  std::vector<std::string> warnings;
};

// How Clang compiles the file.
struct CompileSetup {
  std::string build_dir;           // -p: a directory with compile_commands.json
  std::vector<std::string> flags;  // after --: the compiler flags
  bool has_flags = false;          // `--` given (possibly with no flags)
};

// Parses `path` (errors: it does not compile, naming the first diagnostics).
StatusOr<FindResult> FindInFile(const std::string& path, const CompileSetup& setup);

// Parses in-memory code named `file_name`; `headers` are more in-memory files
// (path, contents) it may include. For the tests.
StatusOr<FindResult> FindInCode(const std::string& code, const std::string& file_name,
                                const std::vector<std::string>& args,
                                const std::vector<std::pair<std::string, std::string>>& headers = {});

// What `extract` prints: each pipeline, its stages with their knob values,
// and for each knob where its literal is or why it cannot be rewritten.
std::string FormatFindText(const FindResult& result);
// The same as JSON: {"pipelines": [{"name", "where", "stages": [{"name",
// "op", "fn", "parallelism", "buffer", "location", "random"}], "knobs":
// [{"stage", "knob", "value", "rewritable", "literal" | "why", "call"}]}],
// "warnings": [...]}.
std::string FormatFindJson(const FindResult& result);

}  // namespace pipetune::rewrite
