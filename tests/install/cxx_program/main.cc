// A C++ program that builds a pipeline in code with the installed runtime:
// 3000 elements through "cxx_source" -> "cxx_work". Run under `pipetune
// profile` it is traced (PIPETUNE_TRACE), since it links the tracer.
#include <pipetune/models/config.h>
#include <pipetune/runtime/pipeline.h>

#include <cstdio>

int main() {
  auto config = pipetune::models::ParseConfig(R"({"name": "cxx_pipeline", "stages": [
      {"name": "cxx_source", "op": "range", "args": {"count": 3000}},
      {"name": "cxx_work", "op": "map", "fn": "cpu_work", "args": {"us": 20}}]})",
                                              "cxx_pipeline.json");
  if (!config.ok()) {
    std::fprintf(stderr, "cxx_program: %s\n", config.status().message().c_str());
    return 1;
  }
  auto summary = pipetune::runtime::RunPipeline(*config, {});
  if (!summary.ok()) {
    std::fprintf(stderr, "cxx_program: %s\n", summary.status().message().c_str());
    return 1;
  }
  std::printf("cxx_program: %llu outputs\n", static_cast<unsigned long long>(summary->outputs));
  return 0;
}
