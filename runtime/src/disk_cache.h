// The on-disk cache file: a self-describing sequence of elements.
//
//   header  "PTCACHE1" | u32 version (2) | u32 byte-order mark 0x01020304 |
//           u64 fingerprint of the stages that computed the elements
//   record  u8 0x01 | element
//   footer  u8 0xFF | u64 element count | u64 record bytes | "PTCEND01"
//   element u64 id | u32 epoch | i64 label | u8 dtype | i32 shape[3] | u32 path length |
//           path | u8 has payload | u64 payload length | payload |
//           u32 item count | items (elements, recursively)
//
// Integers are in host byte order (the mark tells a foreign file apart).
// A file is written as NAME.tmp.PID and renamed to NAME after its footer is
// written and synced: the rename is the completion marker, so a run that is
// killed mid-write leaves only a temporary file, which the next fill removes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/runtime/element.h"

namespace pipetune::runtime {

class DiskCacheWriter {
 public:
  // Removes stale temporary files of `path` and opens a new one.
  static StatusOr<std::unique_ptr<DiskCacheWriter>> Create(const std::string& path, uint64_t fingerprint);
  ~DiskCacheWriter();  // an unfinished file is removed

  Status Write(const Element& element);
  // Footer, fsync, rename to the final name.
  Status Finish();
  uint64_t bytes() const { return record_bytes_; }

 private:
  DiskCacheWriter(std::string path, std::string temp_path, std::FILE* file)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), file_(file) {}
  Status WriteElement(const Element& element, int depth);
  bool Put(const void* data, size_t size);

  std::string path_;
  std::string temp_path_;
  std::FILE* file_;
  uint64_t count_ = 0;
  uint64_t record_bytes_ = 0;
  bool finished_ = false;
};

class DiskCacheReader {
 public:
  // Opens a complete cache file written for `fingerprint`. kNotFound when
  // there is none; kInvalidInput when it is incomplete, damaged or was
  // written by a pipeline that computes something else.
  static StatusOr<std::unique_ptr<DiskCacheReader>> Open(const std::string& path, uint64_t fingerprint);
  ~DiskCacheReader();

  // The next element; false after the last one. A damaged record is an error.
  StatusOr<bool> Next(Element* element);
  uint64_t count() const { return count_; }
  uint64_t bytes() const { return record_bytes_; }

 private:
  DiskCacheReader(std::string path, std::FILE* file, uint64_t count, uint64_t record_bytes)
      : path_(std::move(path)), file_(file), count_(count), record_bytes_(record_bytes) {}
  Status ReadElement(Element* element, int depth);
  bool Get(void* data, size_t size);

  std::string path_;
  std::FILE* file_;
  uint64_t count_;
  uint64_t record_bytes_;
  uint64_t read_ = 0;
};

}  // namespace pipetune::runtime
