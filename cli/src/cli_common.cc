#include "cli_common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace pipetune::cli {

int ReportError(const Status& status) {
  fmt::print(stderr, "pipetune: error: {}\n", status.message());
  return workflow::ExitCodeFor(status);
}

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

namespace {

std::string Bound(double v) { return fmt::format("{:g}", v); }

// "a positive number of cores", "a whole number of runs, 0 or more",
// "a number of percent from 0 to 99".
std::string Expected(const NumberRule& rule) {
  const std::string kind = rule.whole ? "a whole number" : "a number";
  if (rule.max) {
    return fmt::format("{} of {} from {} to {}", kind, rule.what, Bound(rule.min), Bound(*rule.max));
  }
  if (rule.min == 0 && !rule.min_allowed) {
    return rule.whole ? fmt::format("a whole number of {}, 1 or more", rule.what)
                      : fmt::format("a positive number of {}", rule.what);
  }
  return fmt::format("{} of {}, {} or {}", kind, rule.what, Bound(rule.min),
                     rule.min_allowed ? "more" : "above");
}

}  // namespace

std::string CheckNumber(const std::string& text, const NumberRule& rule) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  bool number = !text.empty() && end == begin + text.size() && errno != ERANGE && std::isfinite(v);
  bool ok = number && (rule.min_allowed ? v >= rule.min : v > rule.min) && (!rule.max || v <= *rule.max);
  if (ok && rule.whole) ok = v == std::floor(v) && v <= INT_MAX;
  if (ok) return "";
  return fmt::format("expected {}, got {}", Expected(rule), text.empty() ? "nothing" : text);
}

CLI::Validator Number(NumberRule rule) {
  return CLI::Validator([rule = std::move(rule)](std::string& text) { return CheckNumber(text, rule); }, "");
}

CLI::Validator Positive(const std::string& what, bool whole) {
  return Number({.what = what, .min = 0, .min_allowed = false, .whole = whole});
}

CLI::Validator NonNegative(const std::string& what, bool whole) {
  return Number({.what = what, .min = 0, .min_allowed = true, .whole = whole});
}

Status MissingInput(const std::string& command, const std::string& what, const std::string& example) {
  return InvalidInput(fmt::format("{}: expected an input: {}; e.g. {}", command, what, example));
}

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};

extern "C" void OnInterrupt(int signal_number) {
  g_signal.store(signal_number);
  g_interrupted.store(true);
}

}  // namespace

InterruptHandlers::InterruptHandlers() {
  g_interrupted.store(false);
  g_signal.store(0);
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

InterruptHandlers::~InterruptHandlers() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

const std::atomic<bool>& InterruptHandlers::interrupted() const { return g_interrupted; }
int InterruptHandlers::signal() const { return g_signal.load(); }

}  // namespace pipetune::cli
