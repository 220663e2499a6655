// The apply half of `pipetune-rewrite` (docs/rewrite.md): a tuning plan
// (`pipetune tune --format json`) and what the finder found -> the edits that
// set every changed knob in the source, as tooling::Replacements on the
// literals only (formatting and comments stay), then a unified diff or the
// files rewritten all-or-nothing (temporary files, then renames).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/rewrite/finder.h"

namespace pipetune::rewrite {

struct Edit {
  std::string file;
  unsigned offset = 0;
  unsigned length = 0;
  std::string replacement;
  std::string what;  // "stage \"decode\": parallelism 1 -> 2 (constant kDecodeWorkers)"
};

struct EditPlan {
  std::vector<Edit> edits;
  std::vector<std::string> notes;  // knobs already at the planned value, skipped plan entries
};

// The edits that put `plan`'s changed knobs into the source. Errors
// (kInvalidInput): the plan is not a tuning plan; its pipeline is not in the
// source; a stage of the plan is not in it; a changed knob has no literal to
// rewrite (naming where its value comes from); two knobs share a constant but
// the plan wants different values (a conflict); the plan inserts or removes a
// stage.
StatusOr<EditPlan> PlanEdits(const FindResult& found, const Json& plan);

// The new contents of every edited file: file -> (old, new). Errors: a file
// cannot be read, an edit no longer matches the file, edits overlap.
StatusOr<std::map<std::string, std::pair<std::string, std::string>>> ApplyEdits(
    const std::vector<Edit>& edits);
// The same on contents given in memory (file -> contents), for the tests.
StatusOr<std::map<std::string, std::pair<std::string, std::string>>> ApplyEditsTo(
    const std::vector<Edit>& edits, const std::map<std::string, std::string>& contents);

// A unified diff of every changed file ("--- a/FILE", "+++ b/FILE").
std::string DiffAll(const std::map<std::string, std::pair<std::string, std::string>>& files);

// Writes every file or none: each to a temporary file beside it first, then
// renames them all. A failure before the renames removes the temporaries and
// leaves every file as it was.
Status WriteAll(const std::map<std::string, std::pair<std::string, std::string>>& files);

}  // namespace pipetune::rewrite
