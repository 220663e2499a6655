// libFuzzer target for the pipeline config parser: any bytes must be parsed
// or refused with a Status, never a crash, a hang or undefined behaviour. A
// config that parses must also survive what `pipetune tune` does to it:
// serialise, parse again, and come back the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipetune/base/check.h"
#include "pipetune/models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = pipetune::models::ParseConfig(text, "fuzz.json");
  if (!config.ok()) {
    PIPETUNE_CHECK(!config.status().message().empty());
    return 0;
  }
  PIPETUNE_CHECK(pipetune::models::Validate(*config).ok());
  std::string saved = pipetune::models::Serialize(*config);
  auto again = pipetune::models::ParseConfig(saved, "fuzz.saved.json");
  PIPETUNE_CHECK(again.ok());
  PIPETUNE_CHECK(pipetune::models::Serialize(*again) == saved);
  // Rebasing (tune -o elsewhere) keeps a valid config.
  pipetune::models::RebaseRelativePaths(*again, "/a/b", "/a/c/d");
  PIPETUNE_CHECK(pipetune::models::Validate(*again).ok());
  return 0;
}
