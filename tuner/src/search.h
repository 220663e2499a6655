// The exact parallelism search for one candidate (solver.h has the argument,
// docs/tuner.md the longer version). Private to the tuner.
#pragma once

#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/tuner/candidate.h"

namespace pipetune::tuner {

class ParallelismSearch {
 public:
  // `candidate` must outlive the search; its knobs are what Assign() sets.
  ParallelismSearch(Candidate& candidate, const Resources& resources);

  // Checks that the candidate fits with every knob at its minimum and builds
  // the per-stage bound tables. kInvalidInput saying which budget it exceeds.
  Status Prepare();

  // The highest X reachable within the budgets (exact); leaves the candidate
  // at the least parallelism per stage that reaches X (1 - tolerance): a
  // scaling curve that creeps up forever is not worth a thread per 0.1%.
  // +inf when nothing in the model costs anything.
  double Maximise(double tolerance = 0);

  // What stops X from going higher, in words (after Maximise).
  const std::string& limit() const { return limit_; }

  // Gives every searched stage the least parallelism whose bound reaches `x`.
  // False when a stage cannot reach it or the threads or memory then exceed
  // their budgets (the candidate is left as assigned).
  bool Assign(double x);

  // Sets stage `index` to `parallelism` if the budgets still hold; otherwise
  // the largest value between its current one and `parallelism` that fits.
  // Returns the value it was left at.
  int RaiseWithinBudget(size_t index, int parallelism);

  bool Fits() const;
  // The least parallelism whose bound reaches `x` for a searched stage, or,
  // when none does, the least within 1% of the highest bound.
  int LeastParallelismFor(size_t index, double x) const;
  // Whether some parallelism of a searched stage reaches `x`.
  bool Reaches(size_t index, double x) const;
  // Indices (into the candidate's stages) of the stages the search sets.
  std::vector<size_t> SearchedStages() const;
  int max_parallelism() const { return max_parallelism_; }
  const Resources& resources() const { return resources_; }

 private:
  struct Table {
    size_t stage = 0;
    std::vector<double> bound;  // bound[p - 1]: outputs/s with p workers
  };
  const Table* FindTable(size_t index) const;
  std::string DescribeFailure(double x);

  Candidate& candidate_;
  const Resources& resources_;
  std::vector<Table> tables_;
  double upper_ = 0;  // the bounds parallelism does not move
  std::string upper_name_;
  int max_parallelism_ = 1;
  std::string limit_;
};

}  // namespace pipetune::tuner
