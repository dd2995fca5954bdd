// The "nccl" data-parallel backend on a GPU (skipped, with the reason, without one): a world of one sums in place
// bucket by bucket through the GPU, the host buffers coming back exact; byte collectives go through the
// bootstrap. Two ranks need two GPUs (two NCCL ranks cannot share one): app_train_dp_test's NCCL case.
#include <gtest/gtest.h>

#include <vector>

#include "core/philox.h"
#include "trainer/communicator.h"

namespace rlcpp {
namespace {

TEST(NcclBackend, AWorldOfOneSumsBucketsInPlace) {
  std::string why;
  if (nccl_devices(&why) == 0) GTEST_SKIP() << why;
  const std::unique_ptr<Communicator> comm = make_communicator(LaunchRanks{}, "nccl", /*timeout_s=*/60);
  EXPECT_EQ(comm->backend(), "nccl");
  EXPECT_EQ(comm->size(), 1);
  // Buckets of odd sizes, the last one larger than everything before (the staging buffer grows mid-step).
  std::vector<std::vector<float>> buckets;
  PhiloxStream rng(7, 0);
  for (int64_t n : {17, 12, 97, 1 << 20, 54}) {
    std::vector<float> b(static_cast<size_t>(n));
    for (float& x : b) x = static_cast<float>(rng.uniform()) - 0.5f;
    buckets.push_back(b);
  }
  std::vector<std::vector<float>> reduced = buckets;
  for (auto& b : reduced) comm->start_all_reduce(b.data(), static_cast<int64_t>(b.size()));
  comm->wait_all();
  for (size_t i = 0; i < buckets.size(); ++i) EXPECT_EQ(reduced[i], buckets[i]) << "bucket " << i;
  std::string bytes = "id";
  comm->broadcast(bytes, 0);
  EXPECT_EQ(bytes, "id");
  EXPECT_EQ(comm->all_gather("x"), std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace rlcpp
