// Where a workflow's runs write their traces: the directory the user asked
// for, or a fresh private one (mkdtemp: unique, mode 0700, never a name
// another process could guess or share) removed with everything in it when
// the RunDirectory goes. The one implementation verify, baseline/check and
// the source rewrite use. Private to the workflow.
#pragma once

#include <string>

#include "pipetune/base/status.h"

namespace pipetune::workflow::internal {

class RunDirectory {
 public:
  // `configured` empty: a temporary directory named after `prefix`
  // ("pipetune-verify-XXXXXX" under $TMPDIR or /tmp). kIoError naming the
  // path when it cannot be created.
  static StatusOr<RunDirectory> Make(const std::string& configured, const std::string& prefix);

  RunDirectory(RunDirectory&& other) noexcept;
  RunDirectory& operator=(RunDirectory&&) = delete;
  RunDirectory(const RunDirectory&) = delete;
  ~RunDirectory();

  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  bool temporary() const { return temporary_; }

 private:
  RunDirectory() = default;
  std::string path_;
  bool temporary_ = false;
};

}  // namespace pipetune::workflow::internal
