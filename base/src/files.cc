// Atomic file writes (files.h): temporary beside the target, fsync, rename.
#include "pipetune/base/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

namespace pipetune {
namespace {

std::string TemporaryFor(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
}

// Flushes the written temporary to disk: the rename must not make a file
// visible whose data is still only in memory.
Status Sync(const std::string& temporary) {
  int fd = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(fmt::format("{}: cannot reopen to flush: {}", temporary, std::strerror(errno)));
  int flush_errno = ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  if (flush_errno != 0)
    return IoError(fmt::format("{}: cannot flush: {}", temporary, std::strerror(flush_errno)));
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    std::string message =
        fmt::format("{}: cannot read{}{}: {}", path, what.empty() ? "" : " ", what, std::strerror(error));
    return error == ENOENT ? NotFound(std::move(message)) : IoError(std::move(message));
  }
  std::string contents{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad())
    return IoError(fmt::format("{}: cannot read{}{}: read failed", path, what.empty() ? "" : " ", what));
  return contents;
}

StatusOr<PendingFile> PendingFile::Write(const std::string& path, std::string_view contents) {
  return Write(path, [contents](std::ostream& out) {
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    return Status::Ok();
  });
}

StatusOr<PendingFile> PendingFile::Write(const std::string& path,
                                         const std::function<Status(std::ostream&)>& fill) {
  PendingFile file(path, TemporaryFor(path));
  std::ofstream out(file.temporary_, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::string why = std::strerror(errno);
    file.temporary_.clear();  // nothing was created
    return IoError(fmt::format("{}: cannot create: {}", TemporaryFor(path), why));
  }
  struct stat existing {};
  if (::stat(path.c_str(), &existing) == 0) ::chmod(file.temporary_.c_str(), existing.st_mode & 07777);
  Status filled = fill(out);
  out.close();
  if (!filled.ok()) return filled;  // the destructor removes the temporary
  if (!out) return IoError(fmt::format("{}: write failed: {}", file.temporary_, std::strerror(errno)));
  PIPETUNE_RETURN_IF_ERROR(Sync(file.temporary_));
  return file;
}

PendingFile::PendingFile(PendingFile&& other) noexcept
    : path_(std::move(other.path_)), temporary_(std::exchange(other.temporary_, std::string())) {}

PendingFile::~PendingFile() {
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
}

Status PendingFile::Commit() {
  if (temporary_.empty()) return InvalidInput(fmt::format("{}: already committed", path_));
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    return IoError(fmt::format("{}: cannot rename into place: {}", path_, std::strerror(errno)));
  }
  temporary_.clear();
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  PIPETUNE_ASSIGN_OR_RETURN(PendingFile file, PendingFile::Write(path, contents));
  return file.Commit();
}

Status WriteFileAtomically(const std::string& path, const std::function<Status(std::ostream&)>& fill) {
  PIPETUNE_ASSIGN_OR_RETURN(PendingFile file, PendingFile::Write(path, fill));
  return file.Commit();
}

}  // namespace pipetune
