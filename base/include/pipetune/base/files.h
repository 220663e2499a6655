// Writing a file so that a reader never sees half of it: the contents go to a
// temporary file beside the target (same directory, so the rename cannot
// cross file systems), are flushed to disk, and are renamed over the target.
// A failure at any step removes the temporary file and leaves an existing
// target untouched. The target keeps its permission bits when it existed.
//
// Not thread-safe per object; distinct objects may be used from any thread.
// The temporary's name carries the process id, so two processes writing the
// same target do not share a temporary (the last rename wins).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "pipetune/base/status.h"

namespace pipetune {

// A file written but not yet in place: Commit() renames it over the target;
// destroying it uncommitted removes it. For several files that should appear
// together (a source rewrite), write them all, then commit them all.
class PendingFile {
 public:
  // Writes `contents` to a temporary beside `path` and flushes it.
  static StatusOr<PendingFile> Write(const std::string& path, std::string_view contents);
  // Streams into the temporary: `fill` writes to the stream; its error (or a
  // failed stream) is returned and nothing is left behind.
  static StatusOr<PendingFile> Write(const std::string& path,
                                     const std::function<Status(std::ostream&)>& fill);

  PendingFile(PendingFile&& other) noexcept;
  PendingFile& operator=(PendingFile&& other) = delete;
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;
  ~PendingFile();

  // Renames the temporary over the target. Once only.
  Status Commit();

  const std::string& path() const { return path_; }

 private:
  PendingFile(std::string path, std::string temporary)
      : path_(std::move(path)), temporary_(std::move(temporary)) {}
  std::string path_;
  std::string temporary_;  // empty once committed or moved from
};

// The whole of the file at `path`, read as bytes. Every whole-file read
// goes through here, so that a file that does not exist is kNotFound and
// any other failure kIoError wherever it is read, with one message:
// "PATH: cannot read WHAT: REASON" (`what` names the file's role for the
// user, "the baseline"; empty: "PATH: cannot read: REASON").
StatusOr<std::string> ReadFile(const std::string& path, std::string_view what = {});

// Write() then Commit().
Status WriteFileAtomically(const std::string& path, std::string_view contents);
Status WriteFileAtomically(const std::string& path, const std::function<Status(std::ostream&)>& fill);

}  // namespace pipetune
