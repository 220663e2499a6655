#include "pipetune/workflow/autotune_job.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <thread>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"
#include "pipetune/workflow/autotune_epochs.h"
#include "pipetune/workflow/dataloader_kwargs.h"
#include "pipetune/workflow/python_bootstrap.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {
namespace fs = std::filesystem;

std::string AutotuneSegmentPattern(const std::string& trace) {
  fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + "-retune-{k}" + p.extension().string())).string();
}

std::string AutotuneSegmentTrace(const std::string& trace, int k) {
  std::string path = AutotuneSegmentPattern(trace);
  return path.replace(path.rfind("{k}"), 3, std::to_string(k));
}

namespace {

// A segment of an earlier run left beside the trace would be read with this
// run's (its STEM-retune-K.trace.main.<pid> beside a new one): deleted, with
// every file of its job, before the program starts.
void DeleteStaleSegments(const std::string& trace) {
  for (int k = 1;; ++k) {
    std::string segment = AutotuneSegmentTrace(trace, k);
    std::error_code error;
    if (!fs::exists(segment, error)) break;
    for (const std::string& main : analyzer::JobTracePaths(segment)) {
      for (const std::string& file : analyzer::DataLoaderTracePaths(main)) ::unlink(file.c_str());
    }
    ::unlink(segment.c_str());
  }
}

// A request that takes longer than this to arrive, or an answer to be read,
// is given up (the job's side then keeps its settings and says why): a
// stuck client must not stop the decisions of the rest of the job.
constexpr int kClientTimeoutSeconds = 30;
// The longest request read: a few hundred bytes are expected.
constexpr size_t kMaxRequestBytes = 1 << 20;

// The decider, served to the job on a Unix socket in a folder of its own
// while the job runs: one connection per decision, one JSON line each way.
// One thread answers, so the decider is never entered twice at once. Why a
// socket in this process rather than the decision inside the job: a
// decision that crashes or hangs here cannot take the training job with it
// (its side times out and keeps its settings), and the job's Python needs
// no part of the analysis.
class DecisionServer {
 public:
  static StatusOr<std::unique_ptr<DecisionServer>> Start(EpochDecider* decider) {
    std::unique_ptr<DecisionServer> server(new DecisionServer(decider));
    std::string folder = (fs::temp_directory_path() / "pipetune-autotune-XXXXXX").string();
    if (::mkdtemp(folder.data()) == nullptr)
      return IoError(fmt::format("autotune: cannot make a folder in {}: {}", folder, std::strerror(errno)));
    server->folder_ = folder;
    server->path_ = folder + "/decide.sock";
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (server->path_.size() >= sizeof(address.sun_path))
      return IoError("autotune: the temporary folder's path is too long for a socket: " + server->path_);
    std::memcpy(address.sun_path, server->path_.c_str(), server->path_.size() + 1);
    // CLOEXEC: the job's processes reach it by its path, never by an inherited descriptor.
    server->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server->listen_fd_ < 0 || ::pipe2(server->stop_, O_CLOEXEC) != 0 ||
        ::bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(server->listen_fd_, 8) != 0) {
      return IoError(fmt::format("autotune: cannot listen on {}: {}", server->path_, std::strerror(errno)));
    }
    DecisionServer* self = server.get();
    server->thread_ = std::thread([self] { self->Serve(); });
    return server;
  }

  ~DecisionServer() {
    if (thread_.joinable()) {
      char stop = 1;
      (void)!::write(stop_[1], &stop, 1);
      thread_.join();
    }
    for (int fd : {listen_fd_, stop_[0], stop_[1]}) {
      if (fd >= 0) ::close(fd);
    }
    std::error_code ignored;
    if (!folder_.empty()) fs::remove_all(folder_, ignored);
  }

  const std::string& path() const { return path_; }

 private:
  explicit DecisionServer(EpochDecider* decider) : decider_(decider) {}

  void Serve() {
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      if ((fds[0].revents & POLLIN) == 0) continue;
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      Answer(client);
      ::close(client);
    }
  }

  void Answer(int client) {
    timeval timeout{kClientTimeoutSeconds, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    std::string request;
    char buffer[4096];
    while (request.find('\n') == std::string::npos && request.size() < kMaxRequestBytes) {
      ssize_t got = ::read(client, buffer, sizeof(buffer));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      request.append(buffer, static_cast<size_t>(got));
    }
    Json answer;
    std::string problem = "the request was not a JSON object";
    Json parsed = Json::parse(request.substr(0, request.find('\n')), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      // A request whose fields have the wrong types throws in nlohmann's
      // accessors: it is answered, not let out of this thread (which would
      // end the process that runs the job).
      try {
        answer = decider_->Decide(parsed);
      } catch (const std::exception& error) {
        problem = std::string("a malformed request: ") + error.what();
      }
    }
    if (answer.is_null()) {
      answer = {{"apply", nullptr},
                {"state", "stopped"},
                {"lines", Json::array({"no decision (" + problem + ")"})}};
    }
    std::string line = DumpJson(answer) + "\n";
    for (size_t sent = 0; sent < line.size();) {
      ssize_t put = ::write(client, line.data() + sent, line.size() - sent);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return;
      sent += static_cast<size_t>(put);
    }
  }

  EpochDecider* decider_;
  std::string folder_, path_;
  int listen_fd_ = -1;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace

StatusOr<AutotuneJobResult> AutotuneJob(const AutotuneJobOptions& options) {
  // Checked here, so that a bad budget is said before the job runs rather
  // than at its first epoch boundary.
  PIPETUNE_ASSIGN_OR_RETURN(tuner::BudgetFlags budgets,
                            ParseBudgets(options.cores, options.memory, std::nullopt, ""));
  // Without the bootstrap nothing would retune: an error, not profile's warning.
  PIPETUNE_RETURN_IF_ERROR(FindPythonBootstrap().status());
  std::error_code error;

  AutotuneJobResult result;
  result.output = fs::absolute(DataLoaderKwargsPath(options.output, options.trace_path), error).string();
  EpochDecider decider({budgets, RetuneRules{}, result.output});
  PIPETUNE_ASSIGN_OR_RETURN(std::unique_ptr<DecisionServer> server, DecisionServer::Start(&decider));
  Json settings;
  settings["decider"] = server->path();
  settings["segments"] = AutotuneSegmentPattern(fs::absolute(options.trace_path, error).string());
  DeleteStaleSegments(options.trace_path);

  ProfileOptions profile;
  profile.trace_path = options.trace_path;
  profile.interval_ms = options.interval_ms;
  profile.command = options.command;
  profile.environment.emplace_back("PIPETUNE_AUTOTUNE", DumpJson(settings));
  StatusOr<ProfiledProgram> program = ProfileUnderBootstrap(profile, std::nullopt);
  server.reset();  // no decision is asked once the job has ended
  if (!program.ok()) return program.status();
  result.program = std::move(*program);
  for (const Json& line : decider.Finish()) result.notes.push_back(line.get<std::string>());
  return result;
}

}  // namespace pipetune::workflow
