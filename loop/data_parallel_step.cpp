#include "loop/data_parallel_step.h"

#include <xxhash.h>

#include <cstring>

#include "core/error.h"
#include "trainer/gradient_buckets.h"

namespace rlcpp {

void share_draws(Communicator& comm, StepDraws& drawn) {
  if (comm.size() == 1) return;
  std::string bytes = comm.rank() == 0 ? step_draws_to_json(drawn).dump() : std::string();
  comm.broadcast(bytes, 0);
  if (comm.rank() != 0)
    drawn = step_draws_from_json(Json::parse(bytes), "rank " + std::to_string(comm.rank()) + ": the lead's draws");
}

void check_ranks_agree(Communicator& comm, const ParameterStore& params, int64_t step) {
  if (comm.size() == 1) return;
  const uint64_t mine = XXH3_64bits(params.flat().data<float>(), params.flat().nbytes());
  const std::vector<std::string> all = comm.all_gather(std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
  std::string differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (step == 0)
    RLCPP_CHECK(differ.empty(), "data parallelism: the initial weights of rank(s) "
                                    << differ << " differ from rank 0's (every rank must start from the same "
                                    << "checkpoint: is init_checkpoint the same files on every host?)");
  RLCPP_CHECK(differ.empty(), "data parallelism: after step " << step << " the weights of rank(s) " << differ
                                                              << " differ from rank 0's (the ranks must take the "
                                                              << "same update; is every rank running the same "
                                                              << "binary and config?)");
}

void check_ranks_share_config(Communicator& comm, const Json& resolved_config) {
  if (comm.size() == 1) return;
  const std::vector<std::string> configs = comm.all_gather(resolved_config.dump());
  const Json lead = Json::parse(configs[0]);
  for (size_t r = 1; r < configs.size(); ++r) {
    if (configs[r] == configs[0]) continue;
    const std::vector<std::string> differences = config_differences(lead, Json::parse(configs[r]));
    if (differences.empty()) continue;  // the same values, written otherwise
    RLCPP_FAIL("data parallelism: rank " << r << "'s config differs from rank 0's: " << differences.front()
                                         << " (rank 0 -> rank " << r << "); every rank must run the same config "
                                         << "(the same file and --set overrides)");
  }
}

std::vector<std::vector<float>> response_logp_over_ranks(const ExecContext& exec, Communicator& comm,
                                                         const Transformer& model, const ParameterStore& params,
                                                         const std::vector<RolloutSample>& samples,
                                                         int64_t micro_batch_size, float temperature,
                                                         const Truncation& truncation) {
  if (comm.size() == 1)
    return compute_response_logp(exec, model, params, samples, micro_batch_size, temperature, truncation);
  const auto [first, last] = rank_shard(samples.size(), comm.rank(), comm.size());
  const std::vector<RolloutSample> mine(samples.begin() + static_cast<std::ptrdiff_t>(first),
                                        samples.begin() + static_cast<std::ptrdiff_t>(last));
  std::string bytes;
  if (!mine.empty())
    for (const std::vector<float>& row :
         compute_response_logp(exec, model, params, mine, micro_batch_size, temperature, truncation))
      bytes.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
  std::vector<std::vector<float>> out;
  out.reserve(samples.size());
  const std::vector<std::string> pieces = comm.all_gather(bytes);
  for (int r = 0; r < comm.size(); ++r) {
    const auto [begin, end] = rank_shard(samples.size(), r, comm.size());
    const std::string& piece = pieces[static_cast<size_t>(r)];
    size_t at = 0;
    for (size_t i = begin; i < end; ++i) {
      const size_t n = samples[i].response.size();
      RLCPP_CHECK(at + n * sizeof(float) <= piece.size(),
                  "data parallelism: rank " << r << " sent " << piece.size() << " bytes of log-probs, too few");
      std::vector<float> row(n);
      std::memcpy(row.data(), piece.data() + at, n * sizeof(float));
      at += n * sizeof(float);
      out.push_back(std::move(row));
    }
    RLCPP_CHECK(at == piece.size(), "data parallelism: rank " << r << " sent " << piece.size()
                                                              << " bytes of log-probs, expected " << at);
  }
  return out;
}

namespace {

class AbsentRollout : public RolloutBackend {
 public:
  explicit AbsentRollout(int rank) : rank_(rank) {}
  RolloutResult generate(const Request&) override {
    RLCPP_FAIL("rank " << rank_ << " asked to generate: only rank 0 runs the rollout");
  }
  void sync(const ParameterStore&, int64_t) override {
    RLCPP_FAIL("rank " << rank_ << " asked to sync weights: only rank 0 publishes them");
  }

 private:
  int rank_;
};

}  // namespace

std::unique_ptr<RolloutBackend> make_absent_rollout(int rank) { return std::make_unique<AbsentRollout>(rank); }

}  // namespace rlcpp
