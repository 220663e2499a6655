// The memory model: what a configuration's buffers and caches hold.
#include "pipetune/models/memory_model.h"

#include <gtest/gtest.h>

namespace pipetune::models {
namespace {

TEST(DefaultQueueBytes, SmallElementsFillByCountLargeOnesByBytes) {
  EXPECT_DOUBLE_EQ(DefaultQueueBytes(100), 128 * 100);
  double big = 1 << 20;  // 1 MiB: 4 MiB plus the one that crossed the limit
  EXPECT_DOUBLE_EQ(DefaultQueueBytes(big), kQueueMaxBytes + big);
  EXPECT_DOUBLE_EQ(DefaultQueueBytes(0), 0);
}

TEST(EstimateMemory, EachKindOfHoldingIsCountedOnce) {
  StageMemoryInput source;
  source.output_bytes_per_element = 1000;
  StageMemoryInput map;
  map.input_bytes_per_element = 1000;
  map.output_bytes_per_element = 2000;
  map.workers = 4;
  StageMemoryInput cache;
  cache.input_bytes_per_element = 2000;
  cache.output_bytes_per_element = 2000;
  cache.memory_cache_bytes = 1e6;
  StageMemoryInput prefetch;
  prefetch.input_bytes_per_element = 2000;
  prefetch.output_bytes_per_element = 2000;
  prefetch.prefetch_buffer = 10;
  MemoryEstimate m = EstimateMemory({source, map, cache, prefetch});
  EXPECT_DOUBLE_EQ(m.queues, 128 * 1000 + 128 * 2000 + 128 * 2000);
  EXPECT_DOUBLE_EQ(m.prefetch, 10 * 2000);
  EXPECT_DOUBLE_EQ(m.in_flight, 1000 + 4 * 3000 + 4000 + 4000);
  EXPECT_DOUBLE_EQ(m.cache, 1e6);
  EXPECT_DOUBLE_EQ(m.Total(), m.queues + m.prefetch + m.in_flight + m.cache);
}

TEST(EstimateMemory, DiskCachesAreNotMemory) {
  StageMemoryInput cache;
  cache.disk_cache_bytes = 5e9;
  MemoryEstimate m = EstimateMemory({cache});
  EXPECT_DOUBLE_EQ(m.disk, 5e9);
  EXPECT_DOUBLE_EQ(m.Total(), 0);
}

TEST(EstimateMemory, MoreWorkersOrADeeperBufferNeverHoldLess) {
  StageMemoryInput map;
  map.input_bytes_per_element = 500;
  map.output_bytes_per_element = 500;
  double before = EstimateMemory({map}).Total();
  map.workers = 2;
  EXPECT_GT(EstimateMemory({map}).Total(), before);
}

}  // namespace
}  // namespace pipetune::models
