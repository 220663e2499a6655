// A finished candidate -> the plan a user reads (plan_builder.cc): what the
// solver, and a benchmark pricing a candidate of its own, hand back.
#pragma once

#include "pipetune/tuner/candidate.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

// Fills a plan from a finished candidate: knobs with old and new values,
// predictions, memory, threads. Reasons are left to the caller (the solver's
// are specific); knobs get a generic one when the caller leaves it empty.
Plan PlanFromCandidate(const TuneInput& input, const Resources& resources, Objective objective,
                       const Candidate& candidate);

}  // namespace pipetune::tuner
