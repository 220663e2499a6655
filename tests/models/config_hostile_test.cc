// Hostile configs: whatever the bytes, ParseConfig parses them or refuses
// them with a Status that says what is wrong; it never crashes. Files in
// tests/models/regressions/ (the config fuzzer's findings and hand-made
// lies, README there) are replayed; inputs too large to keep in the tree are
// generated here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "pipetune/models/config.h"

namespace pipetune::models {
namespace {

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// What config_parse_fuzz checks, as a test: parse or a message; a parsed
// config validates, and saving it and parsing again gives the same text.
void ParsesOrRefusesCleanly(const std::string& text, const std::string& name) {
  SCOPED_TRACE(name);
  StatusOr<PipelineConfig> config = ParseConfig(text, name);
  if (!config.ok()) {
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidInput);
    EXPECT_THAT(config.status().message(), ::testing::HasSubstr(name));
    return;
  }
  EXPECT_TRUE(Validate(*config).ok());
  std::string saved = Serialize(*config);
  StatusOr<PipelineConfig> again = ParseConfig(saved, name);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(Serialize(*again), saved);
}

TEST(ConfigRegressions, EveryKeptInputParsesOrIsRefused) {
  std::filesystem::path dir = std::filesystem::path(PIPETUNE_SOURCE_DIR) / "tests/models/regressions";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".md") continue;
    ParsesOrRefusesCleanly(ReadBytes(entry.path()), entry.path().filename().string());
    ++files;
  }
  EXPECT_GT(files, 0);
}

// What a user reads for the kept lies: the file, the place, the reason.
TEST(ConfigRegressions, MessagesNameThePlaceAndTheReason) {
  std::filesystem::path dir = std::filesystem::path(PIPETUNE_SOURCE_DIR) / "tests/models/regressions";
  auto message = [&](const std::string& name) {
    StatusOr<PipelineConfig> config = ParseConfig(ReadBytes(dir / name), name);
    return config.ok() ? std::string("(parsed)") : config.status().message();
  };
  EXPECT_EQ(
      message("huge_numbers.json"),
      "huge_numbers.json: not valid JSON at line 1, column 73 (byte 72): number overflow parsing '1e400'");
  EXPECT_THAT(
      message("bad_utf8.json"),
      ::testing::StartsWith("bad_utf8.json: not valid JSON at line 1, column 11 (byte 10): invalid string: "
                            "ill-formed UTF-8 byte; last read: '\"\\xff'"));
  EXPECT_THAT(message("sizes.json"), ::testing::HasSubstr("key \"memory\": malformed size"));
  StatusOr<PipelineConfig> deep = ParseConfig("{\"stages\": " + std::string(1000, '['), "deep.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(),
            "deep.json: not valid JSON at line 1, column 75 (byte 74): nested deeper than 64 levels");
}

TEST(ConfigRegressions, DeepNestingIsRefusedOrParsedWithoutOverflow) {
  const int depth = 100000;
  ParsesOrRefusesCleanly(
      "{\"name\": \"deep\", \"stages\": " + std::string(depth, '[') + std::string(depth, ']') + "}",
      "deep_stages.json");
  std::string args;
  for (int i = 0; i < depth; ++i) args += "{\"a\": ";
  args += "1" + std::string(depth, '}');
  ParsesOrRefusesCleanly(
      R"({"name": "deep", "stages": [{"name": "s", "op": "range", "args": {"x": )" + args + "}}]}",
      "deep_args.json");
}

TEST(ConfigRegressions, TruncationsOfARealConfigAreRefusedWithAPlace) {
  std::string text =
      ReadBytes(std::filesystem::path(PIPETUNE_SOURCE_DIR) / "examples/image/image_train.json");
  ASSERT_FALSE(text.empty());
  for (size_t cut = 0; cut + 1 < text.size(); cut += 7) {
    StatusOr<PipelineConfig> config = ParseConfig(text.substr(0, cut), "cut.json");
    ASSERT_FALSE(config.ok()) << "cut at " << cut;
    EXPECT_THAT(config.status().message(), ::testing::HasSubstr("cut.json"));
  }
}

}  // namespace
}  // namespace pipetune::models
