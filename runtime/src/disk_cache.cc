#include "disk_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace pipetune::runtime {
namespace {

constexpr char kMagic[8] = {'P', 'T', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr char kEndMagic[8] = {'P', 'T', 'C', 'E', 'N', 'D', '0', '1'};
constexpr uint32_t kVersion = 2;  // 2: elements carry their label
constexpr uint32_t kByteOrderMark = 0x01020304;
constexpr uint8_t kRecordTag = 0x01;
constexpr uint8_t kFooterTag = 0xFF;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr size_t kFooterBytes = 1 + 8 + 8 + 8;
// Sanity bounds a damaged file cannot make us exceed.
constexpr int kMaxDepth = 8;
constexpr uint32_t kMaxPath = 1u << 20;
constexpr uint32_t kMaxItems = 1u << 24;
constexpr size_t kIoBuffer = 1u << 20;

std::string Errno() { return std::strerror(errno); }

}  // namespace

StatusOr<std::unique_ptr<DiskCacheWriter>> DiskCacheWriter::Create(const std::string& path,
                                                                   uint64_t fingerprint) {
  namespace fs = std::filesystem;
  fs::path final_path(path);
  std::error_code ec;
  std::string prefix = final_path.filename().string() + ".tmp.";
  for (const auto& entry : fs::directory_iterator(final_path.parent_path(), ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove(entry.path(), ec);
  }
  std::string temp_path = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr) return IoError(fmt::format("cannot create {}: {}", temp_path, Errno()));
  std::setvbuf(file, nullptr, _IOFBF, kIoBuffer);
  std::unique_ptr<DiskCacheWriter> writer(new DiskCacheWriter(path, temp_path, file));
  if (!writer->Put(kMagic, sizeof(kMagic)) || !writer->Put(&kVersion, 4) ||
      !writer->Put(&kByteOrderMark, 4) || !writer->Put(&fingerprint, 8)) {
    return IoError(fmt::format("cannot write {}: {}", temp_path, Errno()));
  }
  return writer;
}

DiskCacheWriter::~DiskCacheWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove(temp_path_.c_str());
}

bool DiskCacheWriter::Put(const void* data, size_t size) {
  return size == 0 || std::fwrite(data, 1, size, file_) == size;
}

Status DiskCacheWriter::WriteElement(const Element& element, int depth) {
  if (depth > kMaxDepth) return Failed("elements nest too deeply to cache");
  uint8_t dtype = static_cast<uint8_t>(element.dtype);
  uint32_t path_size = static_cast<uint32_t>(element.path.size());
  uint8_t has_data = element.data ? 1 : 0;
  uint64_t data_size = element.data ? element.data->size() : 0;
  uint32_t items = static_cast<uint32_t>(element.items.size());
  bool ok = Put(&element.id, 8) && Put(&element.epoch, 4) && Put(&element.label, 8) && Put(&dtype, 1) &&
            Put(element.shape.data(), 12) && Put(&path_size, 4) && Put(element.path.data(), path_size) &&
            Put(&has_data, 1) && Put(&data_size, 8) &&
            (data_size == 0 || Put(element.data->data(), data_size)) && Put(&items, 4);
  if (!ok) return IoError(fmt::format("cannot write {}: {}", temp_path_, Errno()));
  record_bytes_ += 8 + 4 + 8 + 1 + 12 + 4 + path_size + 1 + 8 + data_size + 4;
  for (const Element& item : element.items) PIPETUNE_RETURN_IF_ERROR(WriteElement(item, depth + 1));
  return Status::Ok();
}

Status DiskCacheWriter::Write(const Element& element) {
  if (!Put(&kRecordTag, 1)) return IoError(fmt::format("cannot write {}: {}", temp_path_, Errno()));
  record_bytes_ += 1;
  ++count_;
  return WriteElement(element, 0);
}

Status DiskCacheWriter::Finish() {
  bool ok = Put(&kFooterTag, 1) && Put(&count_, 8) && Put(&record_bytes_, 8) &&
            Put(kEndMagic, sizeof(kEndMagic)) && std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  int closed = std::fclose(file_);
  file_ = nullptr;
  if (!ok || closed != 0) return IoError(fmt::format("cannot write {}: {}", temp_path_, Errno()));
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return IoError(fmt::format("cannot rename {} to {}: {}", temp_path_, path_, Errno()));
  }
  finished_ = true;
  return Status::Ok();
}

StatusOr<std::unique_ptr<DiskCacheReader>> DiskCacheReader::Open(const std::string& path,
                                                                 uint64_t fingerprint) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return NotFound(fmt::format("{}: {}", path, Errno()));
  std::setvbuf(file, nullptr, _IOFBF, kIoBuffer);
  std::unique_ptr<DiskCacheReader> reader(new DiskCacheReader(path, file, 0, 0));
  char magic[8];
  uint32_t version = 0, mark = 0;
  uint64_t file_fingerprint = 0;
  if (!reader->Get(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !reader->Get(&version, 4) ||
      !reader->Get(&mark, 4) || !reader->Get(&file_fingerprint, 8)) {
    return InvalidInput(fmt::format("{}: not a pipetune cache file", path));
  }
  if (version != kVersion || mark != kByteOrderMark) {
    return InvalidInput(fmt::format("{}: cache format version {} is not supported", path, version));
  }
  if (file_fingerprint != fingerprint) {
    return InvalidInput(fmt::format("{}: written by a pipeline whose stages differ", path));
  }
  uint8_t tag = 0;
  uint64_t count = 0, record_bytes = 0;
  char end_magic[8];
  if (std::fseek(file, -static_cast<long>(kFooterBytes), SEEK_END) != 0 || !reader->Get(&tag, 1) ||
      !reader->Get(&count, 8) || !reader->Get(&record_bytes, 8) || !reader->Get(end_magic, 8) ||
      tag != kFooterTag || std::memcmp(end_magic, kEndMagic, 8) != 0) {
    return InvalidInput(fmt::format("{}: incomplete cache file (no footer)", path));
  }
  long size = std::ftell(file);
  if (size < 0 || static_cast<uint64_t>(size) != kHeaderBytes + record_bytes + kFooterBytes ||
      std::fseek(file, static_cast<long>(kHeaderBytes), SEEK_SET) != 0) {
    return InvalidInput(fmt::format("{}: damaged cache file (sizes disagree)", path));
  }
  reader->count_ = count;
  reader->record_bytes_ = record_bytes;
  return reader;
}

DiskCacheReader::~DiskCacheReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool DiskCacheReader::Get(void* data, size_t size) {
  return size == 0 || std::fread(data, 1, size, file_) == size;
}

Status DiskCacheReader::ReadElement(Element* element, int depth) {
  auto damaged = [this] { return Failed(fmt::format("{}: damaged cache record {}", path_, read_)); };
  if (depth > kMaxDepth) return damaged();
  uint8_t dtype = 0, has_data = 0;
  uint32_t path_size = 0, items = 0;
  uint64_t data_size = 0;
  if (!Get(&element->id, 8) || !Get(&element->epoch, 4) || !Get(&element->label, 8) || !Get(&dtype, 1) ||
      !Get(element->shape.data(), 12) || !Get(&path_size, 4) || path_size > kMaxPath ||
      dtype > static_cast<uint8_t>(DType::kF32)) {
    return damaged();
  }
  element->dtype = static_cast<DType>(dtype);
  element->path.resize(path_size);
  if (!Get(element->path.data(), path_size) || !Get(&has_data, 1) || !Get(&data_size, 8) ||
      data_size > record_bytes_) {
    return damaged();
  }
  element->data.reset();
  if (has_data) {
    auto data = std::make_shared<Bytes>(data_size);
    if (!Get(data->data(), data_size)) return damaged();
    element->data = std::move(data);
  }
  if (!Get(&items, 4) || items > kMaxItems) return damaged();
  element->items.clear();
  element->items.resize(items);
  for (Element& item : element->items) PIPETUNE_RETURN_IF_ERROR(ReadElement(&item, depth + 1));
  return Status::Ok();
}

StatusOr<bool> DiskCacheReader::Next(Element* element) {
  uint8_t tag = 0;
  if (!Get(&tag, 1)) return Failed(fmt::format("{}: damaged cache file (truncated)", path_));
  if (tag == kFooterTag) {
    if (read_ != count_) return Failed(fmt::format("{}: damaged cache file (count)", path_));
    return false;
  }
  if (tag != kRecordTag) return Failed(fmt::format("{}: damaged cache record {}", path_, read_));
  PIPETUNE_RETURN_IF_ERROR(ReadElement(element, 0));
  ++read_;
  return true;
}

}  // namespace pipetune::runtime
