// The CI gate's judgement of measured runs, shared by the two kinds of
// baseline (a config's, check.cc; a DataLoader's, gate_dataloader.cc) so that
// both are judged by the same statistics and rules. Private to the workflow.
#pragma once

#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/check.h"

namespace pipetune::workflow::internal {

// The cost, throughput and machine judgements of check.h on `runs` against
// the baseline's; fills report.stages, throughput and the machine fields.
void JudgeRuns(const Baseline& baseline, const std::vector<RunRecord>& runs, const JudgeOptions& options,
               CheckReport& report);

// The identity every baseline records (IdentityHash, DataLoaderIdentityHash):
// `identity` serialised on one line, FNV-1a with the baselines' basis, as
// 16 hex digits. One function, so that the two kinds cannot drift apart.
std::string HashIdentity(const Json& identity);

// The verdict from what was judged: a regression when a stage, the
// throughput or the knobs regressed; else machine when the machine drifted.
void Conclude(CheckReport& report);

// A DataLoader's runs (gate_dataloader.cc): the program run `request.runs`
// times, or its traces read; the baseline built from them; and `check`
// against a baseline already loaded.
StatusOr<MeasuredRuns> MeasureDataLoaderRuns(const BaselineRequest& request, bool diagnose);
Baseline DataLoaderBaseline(MeasuredRuns measured, const std::vector<std::string>& command);
StatusOr<CheckReport> CheckDataLoader(const CheckRequest& request, const Baseline& baseline);

}  // namespace pipetune::workflow::internal
