// libFuzzer target for the tf.data plan that `pipetune profile --apply`
// reads (docs/tfdata.md): a file a user passes in, perhaps edited by hand
// or written by another version, so untrusted input. Any bytes must be read
// or refused with a Status naming the file, never a crash, a hang or
// undefined behaviour. A plan that is read must read again, unchanged, once
// written back out (what `tune --verify` does with the best round's plan).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipetune/base/check.h"
#include "pipetune/base/json.h"
#include "pipetune/workflow/tfdata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = pipetune::workflow::ParseTfDataPlan(text, "fuzz.tfdata.json");
  if (!plan.ok()) {
    PIPETUNE_CHECK(plan.status().message().find("fuzz.tfdata.json") != std::string::npos);
    return 0;
  }
  std::string saved = pipetune::DumpJson(*plan);
  auto again = pipetune::workflow::ParseTfDataPlan(saved, "fuzz.saved.json");
  PIPETUNE_CHECK(again.ok());
  PIPETUNE_CHECK(pipetune::DumpJson(*again) == saved);
  return 0;
}
