// `pipetune-rewrite extract|apply`: argument parsing and output (the
// executable's main() only calls RunCommand). docs/rewrite.md.
#pragma once

#include <string>
#include <vector>

namespace pipetune::rewrite {

// Exit codes as pipetune's: 0 done, 2 bad usage or bad input (the message on
// stderr names the file, stage and knob).
int RunCommand(const std::vector<std::string>& args);

}  // namespace pipetune::rewrite
