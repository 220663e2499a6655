#include "host.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <vector>

#include "pipetune/tracer/tracer.h"

namespace pipetune::tracer {
namespace internal {
namespace {

// A cgroup v1 limit of (nearly) 2^63 means "no limit".
constexpr int64_t kV1Unlimited = int64_t{1} << 62;

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool ParseInt(const std::string& text, int64_t* out) {
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (end == s || errno != 0) return false;
  *out = v;
  return true;
}

uint32_t CoresAllowed() {
  // Sized for hosts beyond CPU_SETSIZE (1024) CPUs.
  for (int cpus = 1024; cpus <= 1 << 16; cpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) return 0;
    size_t size = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(size, set);
    int rc = sched_getaffinity(0, size, set);
    int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return static_cast<uint32_t>(count);
    if (errno != EINVAL) return 0;
  }
  return 0;
}

// Where a cgroup hierarchy is mounted, and which of its paths the mount shows.
struct CgroupMount {
  std::string mount_point;
  std::string root;  // the hierarchy path mounted there ("/" outside containers)
};

// Finds the v1 mount carrying `controller`, or the v2 mount when controller is
// empty, from /proc/self/mountinfo.
bool FindCgroupMount(const std::string& controller, CgroupMount* out) {
  for (const std::string& line : SplitLines(ReadSmallFile("/proc/self/mountinfo"))) {
    // id parent major:minor root mount_point options [optional...] - fstype source super_options
    std::istringstream in(line);
    std::string id, parent, dev, root, mount_point;
    in >> id >> parent >> dev >> root >> mount_point;
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source, super_options;
    tail >> fstype >> source >> super_options;
    bool match = false;
    if (controller.empty()) {
      match = fstype == "cgroup2";
    } else if (fstype == "cgroup") {
      std::istringstream opts(super_options);
      for (std::string opt; std::getline(opts, opt, ',');) match = match || opt == controller;
    }
    if (match) {
      *out = CgroupMount{mount_point, root};
      return true;
    }
  }
  return false;
}

// The process's path in the hierarchy with `controller` (v1), or in the v2
// hierarchy when controller is empty, from /proc/self/cgroup.
std::string CgroupPath(const std::string& controller) {
  for (const std::string& line : SplitLines(ReadSmallFile("/proc/self/cgroup"))) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controller.empty()) {
      if (line.compare(0, a, "0") == 0 && controllers.empty()) return path;
      continue;
    }
    std::istringstream in(controllers);
    for (std::string c; std::getline(in, c, ',');) {
      if (c == controller) return path;
    }
  }
  return {};
}

// The directories from the process's own cgroup up to the mount point: the
// effective limit is the smallest along the way.
std::vector<std::string> CgroupDirs(const CgroupMount& mount, std::string path) {
  if (mount.root != "/" && path.compare(0, mount.root.size(), mount.root) == 0) {
    path = path.substr(mount.root.size());
  }
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    dirs.push_back(mount.mount_point + path);
    size_t slash = path.rfind('/');
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  dirs.push_back(mount.mount_point);
  return dirs;
}

// Keeps the smaller positive limit in *limit (-1 = none so far).
void TakeMin(int64_t candidate, int64_t* limit) {
  if (candidate > 0 && (*limit < 0 || candidate < *limit)) *limit = candidate;
}

void ReadCgroupV1(HostFacts* facts) {
  CgroupMount cpu, memory;
  bool has_cpu = FindCgroupMount("cpu", &cpu);
  bool has_memory = FindCgroupMount("memory", &memory);
  if (!has_cpu && !has_memory) return;
  facts->cgroup_version = 1;
  if (has_cpu) {
    double best_cores = 0;
    for (const std::string& dir : CgroupDirs(cpu, CgroupPath("cpu"))) {
      int64_t quota = -1, period = -1;
      if (!ParseInt(ReadSmallFile(dir + "/cpu.cfs_quota_us"), &quota) || quota <= 0) continue;
      if (!ParseInt(ReadSmallFile(dir + "/cpu.cfs_period_us"), &period) || period <= 0) continue;
      double cores = static_cast<double>(quota) / static_cast<double>(period);
      if (best_cores == 0 || cores < best_cores) {
        best_cores = cores;
        facts->cpu_quota_us = quota;
        facts->cpu_period_us = period;
      }
    }
  }
  if (has_memory) {
    for (const std::string& dir : CgroupDirs(memory, CgroupPath("memory"))) {
      int64_t limit = -1;
      if (ParseInt(ReadSmallFile(dir + "/memory.limit_in_bytes"), &limit) && limit < kV1Unlimited) {
        TakeMin(limit, &facts->memory_limit_bytes);
      }
    }
  }
}

void ReadCgroupV2(HostFacts* facts) {
  CgroupMount mount;
  if (!FindCgroupMount("", &mount)) return;
  facts->cgroup_version = 2;
  double best_cores = 0;
  for (const std::string& dir : CgroupDirs(mount, CgroupPath(""))) {
    // cpu.max: "max 100000" or "<quota> <period>".
    std::istringstream cpu_max(ReadSmallFile(dir + "/cpu.max"));
    std::string quota_text;
    int64_t quota = -1, period = -1;
    if (cpu_max >> quota_text >> period && ParseInt(quota_text, &quota) && quota > 0 && period > 0) {
      double cores = static_cast<double>(quota) / static_cast<double>(period);
      if (best_cores == 0 || cores < best_cores) {
        best_cores = cores;
        facts->cpu_quota_us = quota;
        facts->cpu_period_us = period;
      }
    }
    int64_t limit = -1;
    if (ParseInt(ReadSmallFile(dir + "/memory.max"), &limit)) TakeMin(limit, &facts->memory_limit_bytes);
  }
}

void ReadMeminfo(HostFacts* facts) {
  for (const std::string& line : SplitLines(ReadSmallFile("/proc/meminfo"))) {
    std::istringstream in(line);
    std::string key;
    int64_t kib = 0;
    if (!(in >> key >> kib)) continue;
    if (key == "MemAvailable:") facts->memory_available_bytes = kib * 1024;
    if (key == "MemTotal:") facts->memory_total_bytes = kib * 1024;
  }
}

}  // namespace

std::string ReadSmallFile(const std::string& path) {
  // Plain read(2): /proc files report size 0, and iostreams are slow for the
  // sampler, which reads two files every interval.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[4096];
  while (text.size() < (1u << 20)) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

ClockInfo DescribeClock() {
  ClockInfo clock;
  clock.name = "CLOCK_MONOTONIC";
  clock.clock_id = CLOCK_MONOTONIC;
  timespec res{};
  if (clock_getres(CLOCK_MONOTONIC, &res) == 0) {
    clock.resolution_ns =
        static_cast<uint64_t>(res.tv_sec) * 1000000000u + static_cast<uint64_t>(res.tv_nsec);
  }
  timespec wall{};
  clock.start_ns = NowNs();
  clock_gettime(CLOCK_REALTIME, &wall);
  clock.start_unix_ns = static_cast<int64_t>(wall.tv_sec) * 1000000000 + wall.tv_nsec;
  return clock;
}

ProcessSample ReadProcessSample() {
  ProcessSample sample;
  std::string stat = ReadSmallFile("/proc/self/stat");
  // The command name (field 2) may hold spaces and parentheses: fields are
  // counted from the last ')'. After it: state(3) ... utime(14) stime(15) ...
  // num_threads(20) ... rss(24, pages).
  size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream in(stat.substr(paren + 1));
    std::vector<std::string> fields;
    for (std::string f; in >> f && fields.size() < 24;) fields.push_back(f);
    auto field = [&](int number) -> int64_t {
      int64_t v = 0;
      size_t index = static_cast<size_t>(number - 3);
      return index < fields.size() && ParseInt(fields[index], &v) ? v : 0;
    };
    static const int64_t ticks = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
    static const int64_t page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    int64_t cpu_ticks = field(14) + field(15);
    sample.cpu_ns = static_cast<uint64_t>(cpu_ticks) * (1000000000u / static_cast<uint64_t>(ticks));
    sample.threads = static_cast<uint32_t>(field(20));
    sample.rss_bytes = static_cast<uint64_t>(field(24) * page);
  }
  for (const std::string& line : SplitLines(ReadSmallFile("/proc/self/io"))) {
    int64_t v = 0;
    if (line.compare(0, 11, "read_bytes:") == 0 && ParseInt(line.substr(11), &v)) sample.read_bytes = v;
    if (line.compare(0, 6, "rchar:") == 0 && ParseInt(line.substr(6), &v)) sample.read_syscall_bytes = v;
  }
  // "<on-CPU ns> <run-queue delay ns> <timeslices>" of the main thread (the
  // /proc/<pid> entry is the thread group leader's, not the process's sum).
  std::istringstream schedstat(ReadSmallFile("/proc/self/schedstat"));
  std::string on_cpu, run_delay;
  int64_t v = 0;
  if (schedstat >> on_cpu >> run_delay && ParseInt(run_delay, &v) && v >= 0)
    sample.main_thread_run_delay_ns = v;
  return sample;
}

}  // namespace internal

HostFacts CollectHostFacts() {
  HostFacts facts;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) facts.hostname = name;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  facts.cores_online = online > 0 ? static_cast<uint32_t>(online) : 0;
  facts.cores_allowed = internal::CoresAllowed();
  // v1 controllers take precedence: on a hybrid host the v2 hierarchy is
  // mounted but holds no controllers.
  internal::ReadCgroupV1(&facts);
  if (facts.cgroup_version == 0) internal::ReadCgroupV2(&facts);
  internal::ReadMeminfo(&facts);
  return facts;
}

}  // namespace pipetune::tracer
