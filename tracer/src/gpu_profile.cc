#include "pipetune/tracer/gpu_profile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "format.h"
#include "host.h"
#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::tracer {
namespace {

constexpr const char* kInjectionFile = "libpipetune_cupti_injection.so";

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Whether a trace's records include a GPU status.
class GpuStatusFinder : public TraceVisitor {
 public:
  void OnGpuStatus(const GpuStatus&) override { found = true; }
  bool found = false;
};

Status WriteBytes(const std::string& path, const std::string& bytes, int flags) {
  int fd = ::open(path.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path + ": cannot open for writing: " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int saved = errno;
      ::close(fd);
      std::string message = path + ": cannot write: ";
      message += std::strerror(saved);
      return IoError(message);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return IoError(path + ": cannot close: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

std::string FindInjectionLibrary() {
  if (const char* env = std::getenv("PIPETUNE_CUPTI_INJECTION"); env != nullptr && *env != '\0') return env;
  std::error_code error;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {};
  std::filesystem::path candidate = exe.parent_path().parent_path() / "lib" / kInjectionFile;
  return IsFile(candidate.string()) ? candidate.string() : std::string();
}

std::vector<std::pair<std::string, std::string>> GpuProfileEnvironment(const std::string& injection_library,
                                                                       const char* current_injection,
                                                                       std::string* note) {
  std::string current = current_injection != nullptr ? current_injection : "";
  if (!current.empty() && current != "none") {
    *note = "CUDA_INJECTION64_PATH is already set (" + current +
            "): GPU activity goes to that tool, not to this trace";
    return {};
  }
  if (injection_library.empty()) {
    *note = "this pipetune was built without CUPTI: GPU activity is not recorded";
    return {};
  }
  return {{"CUDA_INJECTION64_PATH", injection_library}};
}

GpuStatus ProbeGpu() {
  GpuStatus status;
  status.time_ns = NowNs();
  status.state = GpuState::kNoGpu;
  const char* env = std::getenv("PIPETUNE_LIBCUDA");
  std::string name = env != nullptr && *env != '\0' ? env : "libcuda.so.1";
  void* cuda = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    const char* why = dlerror();
    status.message = "no GPU found: no NVIDIA driver (" + name +
                     " could not be loaded: " + (why != nullptr ? why : "unknown error") + ")";
    return status;
  }
  using InitFn = int(unsigned);
  using CountFn = int(int*);
  auto* init = reinterpret_cast<InitFn*>(dlsym(cuda, "cuInit"));
  auto* count = reinterpret_cast<CountFn*>(dlsym(cuda, "cuDeviceGetCount"));
  int devices = 0;
  if (init == nullptr || count == nullptr) {
    status.message = "no GPU found: " + name + " lacks cuInit";
  } else if (int r = init(0); r != 0) {
    status.message = "no GPU found: cuInit failed with CUDA error " + std::to_string(r);
  } else if (count(&devices) != 0 || devices <= 0) {
    status.message = "no GPU found: the NVIDIA driver reports no device";
  } else {
    status.state = GpuState::kStopped;
    status.message =
        std::to_string(devices) +
        " GPU(s) found, but the program recorded no GPU activity: it did not use CUDA, or it links "
        "pipetune's tracer without pipetune::cupti (docs/gpu.md)";
  }
  return status;  // the driver stays loaded: unloading it after cuInit is not supported
}

Status CompleteProfileTrace(const std::string& path, const std::string& program, const std::string& gpu_note,
                            bool* wrote_trace) {
  *wrote_trace = false;
  bool exists = IsFile(path);
  if (exists) {
    GpuStatusFinder finder;
    PIPETUNE_RETURN_IF_ERROR(ReadTrace(path, finder).status());
    if (finder.found) return Status::Ok();
  }
  GpuStatus status = ProbeGpu();
  if (!gpu_note.empty() && status.state != GpuState::kNoGpu) status.message = gpu_note;
  if (!exists) {
    TraceHeader h;
    h.format_version = kTraceFormatVersion;
    h.tracer_version = "pipetune 0.1.0 (pipetune profile)";
    h.clock = internal::DescribeClock();
    h.host = CollectHostFacts();
    h.pipeline.name = program;
    std::string bytes = internal::EncodeFilePreamble(h);
    internal::AppendGpuStatusChunk(bytes, status);
    internal::AppendEndChunk(bytes, TraceEnd{NowNs()});
    // Written under another name and renamed: never a half-written trace.
    std::string temporary = path + ".tmp" + std::to_string(::getpid());
    Status written = WriteBytes(temporary, bytes, O_CREAT | O_TRUNC);
    if (written.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
      written = IoError(path + ": cannot rename the trace into place: " + std::strerror(errno));
    }
    if (!written.ok()) ::unlink(temporary.c_str());
    *wrote_trace = written.ok();
    return written;
  }
  std::string chunk;
  internal::AppendGpuStatusChunk(chunk, status);
  return WriteBytes(path, chunk, O_APPEND);
}

}  // namespace pipetune::tracer
