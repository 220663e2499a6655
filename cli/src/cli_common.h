// Small things every command needs: how errors are printed and mapped to exit
// codes, and whether a terminal is watching.
#pragma once

#include <string>

#include "pipetune/base/status.h"

namespace pipetune::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;

// Prints "pipetune: error: <message>" on stderr and returns the exit code for
// it (2: every Status error is bad usage or bad input).
int ReportError(const Status& status);

// True when stderr is a terminal and live progress should be drawn there.
bool StderrIsTerminal();

// Directory part of a path ("." when it has none): relative paths in a config
// resolve against its file's directory.
std::string DirectoryOf(const std::string& path);

}  // namespace pipetune::cli
