// A tracing session: the trace file, the sampler thread that appends a chunk
// group every snapshot interval, Start/Stop and the PIPETUNE_TRACE
// environment variable.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "format.h"
#include "host.h"
#include "registry.h"

namespace pipetune::tracer {
namespace {

using internal::Tick;

constexpr const char* kTracerVersion = "pipetune 0.1.0";

struct Session {
  SessionOptions options;
  bool from_environment = false;
  pid_t pid = 0;
  int fd = -1;
  ProcessSample process_baseline;
  std::thread sampler;

  std::mutex mu;  // guards stop
  std::condition_variable cv;
  bool stop = false;

  // Used by the sampler thread, then by Stop() after joining it.
  Tick tick;
  std::string buffer;
  Status write_error;
  int64_t recorder_cpu_ns = 0;  // the sampler thread's CPU, as it last read it
};

// The calling thread's CPU time so far; -1 where the clock cannot be read.
int64_t ThreadCpuNs() {
  timespec t{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return -1;
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

std::atomic<void (*)()> g_snapshot_hook{nullptr};
std::mutex g_session_mu;
Session* g_session = nullptr;  // guarded by g_session_mu
// PIPETUNE_TRACE names one session per process: once it has run, a later
// StartFromEnvironment() must not truncate its file. Guarded by g_session_mu.
bool g_environment_session_used = false;

// The PIPETUNE_TRACE path the auto-start took out of the environment (so
// that child processes do not overwrite the trace); StartFromEnvironment
// still honours it.
std::string& ConsumedEnvironmentPath() {
  static auto* path = new std::string;
  return *path;
}

// `path` made absolute, or empty when it is empty or cannot be.
std::string AbsoluteConfigPath(const std::string& path) {
  if (path.empty()) return {};
  std::error_code error;
  std::string absolute = std::filesystem::absolute(path, error).lexically_normal().string();
  return error ? std::string() : absolute;
}

Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(path + ": cannot write trace: " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

void EncodeTick(const Tick& tick, std::string& out) {
  for (const PipelineInfo& info : tick.pipeline_infos) internal::AppendPipelineInfoChunk(out, info);
  if (!tick.new_stages.empty()) internal::AppendStagesChunk(out, tick.new_stages);
  if (!tick.new_workers.empty()) internal::AppendWorkersChunk(out, tick.new_workers);
  internal::AppendSnapshotChunk(out, tick.time_ns, tick.snapshots);
  internal::AppendConsumerTotalsChunk(out, tick.consumer);
  internal::AppendProcessSampleChunk(out, tick.process);
  internal::AppendDropsChunk(out, tick.drops);
  if (!tick.spans.empty()) internal::AppendSpansChunk(out, tick.spans);
  if (!tick.steps.empty()) internal::AppendConsumerStepsChunk(out, tick.steps);
  if (!tick.gpu.empty()) internal::AppendGpuActivityChunk(out, tick.gpu);
  if (tick.has_gpu_status) internal::AppendGpuStatusChunk(out, tick.gpu_status);
}

ProcessSample SinceSessionStart(const ProcessSample& now, const ProcessSample& base) {
  ProcessSample p = now;
  p.cpu_ns = now.cpu_ns > base.cpu_ns ? now.cpu_ns - base.cpu_ns : 0;
  if (now.read_bytes >= 0 && base.read_bytes >= 0) p.read_bytes = now.read_bytes - base.read_bytes;
  if (now.read_syscall_bytes >= 0 && base.read_syscall_bytes >= 0) {
    p.read_syscall_bytes = now.read_syscall_bytes - base.read_syscall_bytes;
  }
  p.main_thread_run_delay_ns =
      now.main_thread_run_delay_ns >= 0 && base.main_thread_run_delay_ns >= 0
          ? std::max<int64_t>(0, now.main_thread_run_delay_ns - base.main_thread_run_delay_ns)
          : -1;
  return p;
}

// Collects and appends one snapshot (and the end record when `last`), in one
// write(2), so that a killed process leaves whole chunks or a torn last one.
// After a write error the session keeps running but writes nothing more;
// Stop() reports the error.
void WriteTick(Session& s, bool last, std::string prefix = {}) {
  // A GPU activity source flushes what it holds, so that this snapshot
  // carries the GPU's activity up to now.
  if (void (*hook)() = g_snapshot_hook.load(std::memory_order_acquire)) hook();
  s.tick.Clear();
  internal::CollectTick(&s.tick);
  s.tick.process = SinceSessionStart(internal::ReadProcessSample(), s.process_baseline);
  s.tick.process.time_ns = s.tick.time_ns;
  s.tick.process.recorder_cpu_ns = s.recorder_cpu_ns;
  s.buffer = std::move(prefix);
  EncodeTick(s.tick, s.buffer);
  if (last) internal::AppendEndChunk(s.buffer, TraceEnd{s.tick.time_ns});
  if (s.write_error.ok()) s.write_error = WriteAll(s.fd, s.buffer, s.options.path);
}

void SamplerLoop(Session* s) {
  // Signals meant for the program must not land on this thread.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "pipetune-trace");

  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::milliseconds(s->options.snapshot_interval_ms);
  auto next = Clock::now() + interval;
  std::unique_lock<std::mutex> lock(s->mu);
  while (!s->cv.wait_until(lock, next, [s] { return s->stop; })) {
    lock.unlock();
    // Each snapshot carries this thread's CPU up to it (the ticks before
    // it); the last one, which Stop() writes, all of it.
    s->recorder_cpu_ns = ThreadCpuNs();
    WriteTick(*s, /*last=*/false);
    lock.lock();
    // A late tick (a stalled machine) is not made up for with a burst.
    next = std::max(next + interval, Clock::now());
  }
  s->recorder_cpu_ns = ThreadCpuNs();
}

// Ends `s`, writing its final snapshot and end record. g_session_mu held.
Status StopLocked(Session* s) {
  // The GPU source's last records, while recording is still on.
  if (s->pid == getpid()) {
    if (void (*hook)() = g_snapshot_hook.load(std::memory_order_acquire)) hook();
  }
  g_session = nullptr;
  internal::g_enabled.store(false, std::memory_order_release);
  if (s->pid != getpid()) {
    // A forked child: the sampler thread and the file belong to the parent.
    // The session object is leaked on purpose: its std::thread is joinable
    // and must not be destroyed here.
    internal::EndSession();
    return Status::Ok();
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stop = true;
  }
  s->cv.notify_all();
  s->sampler.join();
  WriteTick(*s, /*last=*/true);
  internal::EndSession();
  Status status = s->write_error;
  if (::close(s->fd) != 0 && status.ok()) {
    status = IoError(s->options.path + ": cannot close trace: " + std::strerror(errno));
  }
  delete s;
  return status;
}

TraceHeader MakeHeader(const SessionOptions& options) {
  TraceHeader h;
  h.format_version = kTraceFormatVersion;
  h.tracer_version = kTracerVersion;
  h.pid = static_cast<uint32_t>(getpid());
  h.clock = internal::DescribeClock();
  h.host = CollectHostFacts();
  h.pipeline = PipelineInfo{options.pipeline_name, options.config_json, options.config_path};
  h.snapshot_interval_ms = options.snapshot_interval_ms;
  h.spans_per_stage_per_second = options.spans_per_stage_per_second;
  h.consumer_steps_per_second = options.consumer_steps_per_second;
  return h;
}

// A forked child inherits the session's globals but not its sampler thread,
// and the file is the parent's: the child starts with no session.
void InstallForkHandlers() {
  pthread_atfork([] { g_session_mu.lock(); }, [] { g_session_mu.unlock(); },
                 [] {
                   internal::g_enabled.store(false, std::memory_order_relaxed);
                   g_session = nullptr;  // leaked: its thread object must not be destroyed
                   g_session_mu.unlock();
                 });
}

void StopAtExit() {
  Status status = Stop();
  if (!status.ok()) std::fprintf(stderr, "pipetune tracer: %s\n", status.message().c_str());
}

Status StartLocked(const SessionOptions& options, bool from_environment) {
  if (g_session != nullptr) {
    if (!g_session->from_environment) {
      return Failed("tracing already started, writing to " + g_session->options.path);
    }
    // Explicit beats implicit: close the PIPETUNE_TRACE session.
    Status closed = StopLocked(g_session);
    if (!closed.ok()) std::fprintf(stderr, "pipetune tracer: %s\n", closed.message().c_str());
  }
  if (options.path.empty()) return InvalidInput("trace path is empty");
  if (options.snapshot_interval_ms == 0) return InvalidInput("snapshot_interval_ms must be at least 1");

  int fd = ::open(options.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(options.path + ": cannot create trace: " + std::strerror(errno));

  auto* s = new Session;
  s->options = options;
  s->options.config_path = AbsoluteConfigPath(options.config_path);
  s->from_environment = from_environment;
  s->pid = getpid();
  s->fd = fd;
  internal::BeginSession(options);
  s->process_baseline = internal::ReadProcessSample();
  // The header and a first snapshot (every counter zero, the stages and
  // workers registered so far) go out together.
  WriteTick(*s, /*last=*/false, internal::EncodeFilePreamble(MakeHeader(s->options)));
  if (!s->write_error.ok()) {
    Status error = s->write_error;
    internal::EndSession();
    ::close(fd);
    delete s;
    return error;
  }
  internal::g_enabled.store(true, std::memory_order_release);
  try {
    s->sampler = std::thread(SamplerLoop, s);
  } catch (const std::system_error& e) {
    internal::g_enabled.store(false, std::memory_order_release);
    internal::EndSession();
    ::close(fd);
    delete s;
    return Failed(std::string("cannot start the trace sampler thread: ") + e.what());
  }
  g_session = s;
  g_environment_session_used = g_environment_session_used || from_environment;
  // Registered after the registry's fork handlers (BeginSession created the
  // registry), so that fork() takes g_session_mu before the registry's mutex,
  // in the same order as Start() does.
  static std::once_flag once;
  std::call_once(once, [] {
    InstallForkHandlers();
    std::atexit(StopAtExit);
  });
  return Status::Ok();
}

std::string ProgramName() {
  std::string comm = internal::ReadSmallFile("/proc/self/comm");
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == ' ')) comm.pop_back();
  return comm;
}

}  // namespace

namespace internal {

// Runs before main() in every program linking the tracer (see registry.cc).
void AutoStartFromEnvironment() {
  const char* env = std::getenv("PIPETUNE_TRACE");
  if (env == nullptr || *env == '\0') return;
  ConsumedEnvironmentPath() = env;
  // Before main() the process has one thread, so changing the environment
  // is safe; children of this program will not trace into our file.
  unsetenv("PIPETUNE_TRACE");
  Status status = StartFromEnvironment();
  if (!status.ok()) std::fprintf(stderr, "pipetune tracer: PIPETUNE_TRACE: %s\n", status.message().c_str());
}

}  // namespace internal

Status Start(const SessionOptions& options) {
  std::lock_guard<std::mutex> lock(g_session_mu);
  return StartLocked(options, /*from_environment=*/false);
}

Status Stop() {
  std::lock_guard<std::mutex> lock(g_session_mu);
  if (g_session == nullptr) return Status::Ok();
  return StopLocked(g_session);
}

Status StartFromEnvironment(const SessionOptions& defaults) {
  const char* env = std::getenv("PIPETUNE_TRACE");
  std::lock_guard<std::mutex> lock(g_session_mu);
  std::string path = env != nullptr && *env != '\0' ? env : ConsumedEnvironmentPath();
  if (path.empty()) return Status::Ok();
  if (g_session != nullptr) {
    if (!defaults.pipeline_name.empty() || !defaults.config_json.empty()) {
      internal::QueuePipelineInfo(PipelineInfo{defaults.pipeline_name, defaults.config_json,
                                               AbsoluteConfigPath(defaults.config_path)});
    }
    return Status::Ok();
  }
  if (g_environment_session_used) return Status::Ok();
  SessionOptions options = defaults;
  options.path = path;
  if (options.pipeline_name.empty()) options.pipeline_name = ProgramName();
  if (const char* interval = std::getenv("PIPETUNE_TRACE_INTERVAL_MS")) {
    long ms = std::strtol(interval, nullptr, 10);
    if (ms <= 0 || ms > 3600000) {
      return InvalidInput(std::string("PIPETUNE_TRACE_INTERVAL_MS=") + interval +
                          ": expected milliseconds between 1 and 3600000");
    }
    options.snapshot_interval_ms = static_cast<uint32_t>(ms);
  }
  return StartLocked(options, /*from_environment=*/true).WithContext("PIPETUNE_TRACE=" + path);
}

void SetSnapshotHook(void (*hook)()) { g_snapshot_hook.store(hook, std::memory_order_release); }

void SetPipelineInfo(const std::string& pipeline_name, const std::string& config_json,
                     const std::string& config_path) {
  internal::QueuePipelineInfo(PipelineInfo{pipeline_name, config_json, AbsoluteConfigPath(config_path)});
}

}  // namespace pipetune::tracer
