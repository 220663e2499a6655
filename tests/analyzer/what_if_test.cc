#include "pipetune/analyzer/what_if.h"

#include <gtest/gtest.h>

namespace pipetune::analyzer {
namespace {

TEST(ParseWhatIf, ReadsEveryKnobAndCombinations) {
  StatusOr<WhatIf> w = ParseWhatIf("cores=4, decode.parallelism=3 ,cache=decode");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(*w->cores, 4);
  ASSERT_EQ(w->parallelism.size(), 1u);
  EXPECT_EQ(w->parallelism[0].first, "decode");
  EXPECT_EQ(w->parallelism[0].second, 3);
  EXPECT_EQ(*w->cache_after, "decode");

  StatusOr<WhatIf> more = ParseWhatIf("cores=+2.5");
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(more->cores);
  EXPECT_EQ(more->more_cores, 2.5);

  StatusOr<WhatIf> threads = ParseWhatIf("num_workers=0,fetch_threads=16");
  ASSERT_TRUE(threads.ok()) << threads.status().message();
  ASSERT_EQ(threads->named.size(), 2u);
  EXPECT_EQ(threads->named[1].first, "fetch_threads");
  EXPECT_EQ(threads->named[1].second, 16);

  StatusOr<WhatIf> none = ParseWhatIf("cache=none");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->remove_cache);
}

TEST(ParseWhatIf, RejectsMalformedTextQuotingIt) {
  for (const char* bad :
       {"", "cores", "cores=0", "cores=-1", "cores=abc", "decode.parallelism=0", "decode.parallelism=1.5",
        "speed=3", "cores=2,,cache=x", "cache=", "fetch_threads=0", "fetch_threads=2.5"}) {
    StatusOr<WhatIf> w = ParseWhatIf(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidInput);
    EXPECT_NE(w.status().message().find("what-if"), std::string::npos) << w.status().message();
  }
}

}  // namespace
}  // namespace pipetune::analyzer
