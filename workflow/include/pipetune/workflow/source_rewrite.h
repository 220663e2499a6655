// `pipetune tune TRACE --source FILE.cc`: after tuning, put the plan's knobs
// into the C++ source that builds the pipeline (docs/rewrite.md). pipetune
// never links LLVM: the rewrite runs as a subprocess, the `pipetune-rewrite`
// executable found beside the running pipetune binary or on PATH.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"

namespace pipetune::workflow {

struct SourceRewriteRequest {
  std::string source;  // FILE.cc, rewritten in place
  Json plan;           // what `pipetune tune --format json` prints (TuneResultToJson)
  // A directory with compile_commands.json (pipetune-rewrite -p). Empty: the
  // build directory the rewriter sits in, when it has one, else the
  // rewriter's own search from the source's directory.
  std::string build_dir;
  // The executable; empty: $PIPETUNE_REWRITE, else beside this program, else
  // "pipetune-rewrite" on PATH.
  std::string rewriter;
  bool in_place = true;  // false: only the diff (apply without -i)
};

struct SourceRewriteResult {
  std::string rewriter;  // the executable run
  std::vector<std::string> command;
  std::string output;  // what it printed (stdout and stderr together)
};

// Where pipetune-rewrite is: $PIPETUNE_REWRITE, beside /proc/self/exe, or
// nullopt (then PATH).
std::optional<std::string> FindRewriter();

// Writes the plan to a temporary file, runs `pipetune-rewrite apply SOURCE
// --plan PLAN [-i] [-p DIR]` and waits. Errors (kInvalidInput, exit 2 in the
// CLI): the rewriter cannot be run (not built: PIPETUNE_WITH_CLANG), or it
// failed; the message is the rewriter's own (the stage or knob it could not
// rewrite). A failed rewrite has written nothing.
StatusOr<SourceRewriteResult> RewriteSource(const SourceRewriteRequest& request);

}  // namespace pipetune::workflow
