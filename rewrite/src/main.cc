// pipetune-rewrite: puts a tuning plan's knobs into the C++ source that
// builds the pipeline (docs/rewrite.md).
#include <string>
#include <vector>

#include "pipetune/rewrite/command.h"

int main(int argc, char** argv) {
  return pipetune::rewrite::RunCommand(std::vector<std::string>(argv + 1, argv + argc));
}
