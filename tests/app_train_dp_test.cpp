// `mpirun -np 2 rlcpp train CONFIG`: two data-parallel ranks (OpenMPI, oversubscribed on this machine) take the
// update of one rank with the same global batch, up to the order of the gradient sum; the lead alone writes the
// run; a rank that dies ends the run naming it, and the run resumes from its last checkpoint.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/config.h"
#include "model/checkpoint.h"
#include "tests/app_test_support.h"
#include "tests/train_test_support.h"
#include "trainer/communicator.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

// mpirun as CI runs it: as root, two ranks on however many cores, one OpenMP thread each, not pinned. Under
// ASan (scripts/sanitize.sh) the ranks check memory but not leaks: OpenMPI's plugins leave allocations that
// LeakSanitizer cannot name once they are unloaded (tests/sanitizer/lsan.supp); release builds ignore it.
constexpr const char* kMpirun = "mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "
                                "-x OMP_WAIT_POLICY=PASSIVE -x LSAN_OPTIONS=detect_leaks=0 ";
std::string mpirun(int ranks, const std::string& args) {
  return kMpirun + ("-np " + std::to_string(ranks)) + " " RLCPP_BINARY_DIR "/rlcpp " + args;
}

std::string write_config(const fs::path& dir, int64_t steps, int64_t checkpoint_every) {
  Json c = {{"init_checkpoint", small_train_checkpoint(dir / "init")},
            {"rollout", {{"placement", "colocated"}, {"prompts_per_step", 8}, {"group_size", 8}}},
            {"ppo", {{"mini_batch_size", 32}, {"micro_batch_size", 16}}},
            {"optim", {{"lr", 3e-3}}},
            {"steps", steps},
            {"eval_every", 0},
            {"eval_size", 10},
            {"checkpoint_every", checkpoint_every}};
  const fs::path path = dir / "config.json";
  std::ofstream(path) << c.dump(2);
  return path.string();
}

double max_abs_difference(const std::string& a, const std::string& b) {
  const ParameterStore wa = load_model_checkpoint(a), wb = load_model_checkpoint(b);
  EXPECT_EQ(wa.numel(), wb.numel());
  double worst = 0;
  for (int64_t i = 0; i < wa.numel(); ++i)
    worst = std::max(worst, std::fabs(double{wa.flat().data<float>()[i]} - wb.flat().data<float>()[i]));
  return worst;
}

// Runs `config` + `options` as one process (ROOT/one) and as two ranks (ROOT/two) for 3 steps, and checks that both
// wrote the same metrics and step-3 weights bit for bit (ordered gradient sums). Returns the two ranks' output.
std::string expect_two_ranks_equal_one_process(const fs::path& root, const std::string& config,
                                               const std::string& options) {
  const CliResult one = run_shell("OMP_NUM_THREADS=1 " RLCPP_BINARY_DIR "/rlcpp train " + config + options +
                                  " --set run_dir=" + (root / "one").string());
  EXPECT_EQ(one.status, 0) << one.output;
  const CliResult two = run_shell(mpirun(2, "train " + config + options + " --set run_dir=" + (root / "two").string()));
  EXPECT_EQ(two.status, 0) << two.output;
  const std::vector<Json> a = read_jsonl(root / "one/metrics.jsonl"), b = read_jsonl(root / "two/metrics.jsonl");
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(b.size(), 3u);
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    for (const char* key : {"actor/grad_norm", "reward/mean", "rollout/generated_tokens"})
      EXPECT_EQ(a[i][key], b[i][key]) << "step " << i + 1 << " " << key;
  if (one.status == 0 && two.status == 0)
    EXPECT_EQ(max_abs_difference((root / "one/checkpoints/step_3").string(),
                                 (root / "two/checkpoints/step_3").string()),
              0.0);
  return two.output;
}

TEST(TrainDataParallel, TwoRanksTakeTheOneRankUpdateOfTheSameGlobalBatch) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 3, 0);
  const CliResult one = run_shell("OMP_NUM_THREADS=1 " RLCPP_BINARY_DIR "/rlcpp train " + config +
                                  " --set run_dir=" + (root / "one").string());
  ASSERT_EQ(one.status, 0) << one.output;
  const CliResult two = run_shell(mpirun(2, "train " + config + " --set run_dir=" + (root / "two").string()));
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("2 data-parallel ranks (mpi)"), std::string::npos) << two.output;
  EXPECT_FALSE(fs::exists(root / "two-2")) << "a second rank made a run directory of its own";

  const std::vector<Json> a = read_jsonl(root / "one/metrics.jsonl");
  const std::vector<Json> b = read_jsonl(root / "two/metrics.jsonl");
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  // Step 1 samples with the same initial weights: the same rollout, rewards and advantages.
  for (const char* key : {"reward/mean", "rollout/generated_tokens", "mismatch/max_abs_dlogp"})
    EXPECT_EQ(a[0][key], b[0][key]) << key;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]["dp/ranks"], 2);
    EXPECT_EQ(a[i]["dp/ranks"], 1);
    EXPECT_EQ(b[i]["layout/threads"], 1);
    EXPECT_GT(b[i]["actor/allreduce_wait_s"].get<double>(), 0);
    // The loss and gradient of the global batch: summed over the ranks in another order than one rank's.
    for (const char* key : {"actor/pg_loss", "actor/grad_norm", "actor/entropy"}) {
      const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
      EXPECT_NEAR(x, y, 1e-6 * std::max(1.0, std::fabs(x))) << "step " << i + 1 << " " << key;
    }
  }
  const std::string init = (root / "init").string();
  const std::string wa = (root / "one/checkpoints/step_3").string(), wb = (root / "two/checkpoints/step_3").string();
  EXPECT_GT(max_abs_difference(init, wa), 1e-3);  // the runs trained
  EXPECT_LT(max_abs_difference(wa, wb), 1e-5);
}

// With ordered gradient sums (trainer.grad_shards = 2) one process adds two shards' gradients in order and two
// ranks gather theirs and add them in rank order: the same float operations, so the same weights bit for bit.
TEST(TrainDataParallel, OrderedGradientSumsGiveOneProcesssUpdateBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_ordered_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 3, 0);
  expect_two_ranks_equal_one_process(root, config, " --set trainer.grad_shards=2");
  // Shards that do not match the ranks are refused.
  const CliResult three = run_shell(mpirun(2, "train " + config + " --set trainer.grad_shards=3 --set run_dir=" +
                                               (root / "three").string()));
  EXPECT_NE(three.status, 0);
  EXPECT_NE(three.output.find("'trainer.grad_shards': 3 shards on 2 data-parallel ranks"), std::string::npos)
      << three.output;
}

// LoRA (trainer.lora) over two ranks: the ranks sum their adapters' gradients (gathered and added in rank order with
// grad_shards = 2), so two ranks give one process's adapters, merged model and metrics bit for bit.
TEST(TrainDataParallel, LoraRanksGiveOneProcesssAdaptersBitForBit) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_lora_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 3, 0);
  const std::string two_output = expect_two_ranks_equal_one_process(
      root, config, " --set trainer.grad_shards=2 --set trainer.lora.rank=4 --set trainer.lora.alpha=8"
                    " --set optim.lr=1e-2");
  EXPECT_NE(two_output.find("LoRA rank 4"), std::string::npos) << two_output;
  const std::string wa = (root / "one/checkpoints/step_3").string(), wb = (root / "two/checkpoints/step_3").string();
  EXPECT_GT(max_abs_difference((root / "init").string(), wa), 0.0);  // the adapters trained
  EXPECT_EQ(read_text(fs::path(wa) / "adapter/adapter_model.safetensors"),
            read_text(fs::path(wb) / "adapter/adapter_model.safetensors"));
}

// The same two ranks with the gradients summed by NCCL on two GPUs (skipped with fewer: two NCCL ranks cannot
// share one): with two ranks a sum is a + b in any order, so the run is the MPI run's, bit for bit.
TEST(TrainDataParallel, TwoRanksOverNcclTakeTheMpiRanksUpdate) {
  std::string why;
  const int gpus = nccl_devices(&why);
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, has " << gpus << (why.empty() ? "" : ": " + why);
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_nccl_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 3, 0);
  const CliResult mpi = run_shell(mpirun(2, "train " + config + " --set run_dir=" + (root / "mpi").string()));
  ASSERT_EQ(mpi.status, 0) << mpi.output;
  const CliResult nccl =
      run_shell(mpirun(2, "train " + config + " --dp-backend nccl --set run_dir=" + (root / "nccl").string()));
  ASSERT_EQ(nccl.status, 0) << nccl.output;
  EXPECT_NE(nccl.output.find("2 data-parallel ranks (nccl)"), std::string::npos) << nccl.output;
  const std::vector<Json> a = read_jsonl(root / "mpi/metrics.jsonl"), b = read_jsonl(root / "nccl/metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"actor/pg_loss", "actor/grad_norm", "reward/mean"})
      EXPECT_EQ(a[i][key], b[i][key]) << "step " << i + 1 << " " << key;
  EXPECT_EQ(max_abs_difference((root / "mpi/checkpoints/step_3").string(), (root / "nccl/checkpoints/step_3").string()),
            0.0);
}

// The pid of the process whose environment says it is `rank` of an mpirun and whose command line names `tag`.
int find_rank_pid(int rank, const std::string& tag) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline"), environ(entry.path() / "environ");
    const std::string cmd{std::istreambuf_iterator<char>(cmdline), {}};
    const std::string env{std::istreambuf_iterator<char>(environ), {}};
    if (cmd.find(tag) == std::string::npos || cmd.find("mpirun") != std::string::npos) continue;
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

// `mpirun -np 2 rlcpp ARGS` started in the background: its output goes to ROOT/mpirun.log, its exit status to
// ROOT/mpirun.rc when it ends.
class BackgroundLaunch {
 public:
  BackgroundLaunch(const fs::path& root, const std::string& args)
      : log_((root / "mpirun.log").string()), rc_((root / "mpirun.rc").string()) {
    EXPECT_EQ(std::system(("(" + mpirun(2, args) + " > " + log_ + " 2>&1; echo $? > " + rc_ + ") &").c_str()), 0);
  }
  // Whether it ended within `limit`.
  bool ended_within(std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!fs::exists(rc_) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return fs::exists(rc_);
  }
  int status() const {
    int status = 0;
    std::ifstream(rc_) >> status;
    return status;
  }
  std::string output() const { return {std::istreambuf_iterator<char>(std::ifstream(log_).rdbuf()), {}}; }

 private:
  std::string log_, rc_;
};

// The pid of rank 1 of the run writing `run` once its metrics.jsonl holds `steps` records (-1: not within 3 minutes).
int rank1_once_logged(const std::string& run, size_t steps) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (std::chrono::steady_clock::now() < deadline) {
    if (complete_lines(run + "/metrics.jsonl") >= steps)
      return find_rank_pid(1, run);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

TEST(TrainDataParallel, ARankThatDiesEndsTheRunNamingItAndTheRunResumes) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_kill_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 40, 2);
  const std::string run = (root / "run").string();
  const BackgroundLaunch launch(root, "train " + config + " --set run_dir=" + run);
  // Once step 3 is logged (a checkpoint exists at step 2), rank 1 is killed.
  const int victim = rank1_once_logged(run, 3);
  ASSERT_GT(victim, 0) << "rank 1 was not found running; the launch printed:\n" << launch.output();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_TRUE(launch.ended_within(std::chrono::minutes(3)));
  const std::string out = launch.output();
  EXPECT_NE(launch.status(), 0) << out;
  EXPECT_NE(out.find("rank 1"), std::string::npos) << out;  // the launcher names the rank that died
  ASSERT_FALSE(fs::exists(run + "/checkpoints/step_40"));

  // Resumed by both ranks from the newest complete checkpoint, it finishes.
  const CliResult resumed = run_shell(mpirun(2, "train --resume " + run));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("train: resuming"), std::string::npos) << resumed.output;
  EXPECT_EQ(read_jsonl(run + "/metrics.jsonl").size(), 40u);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_40/model.safetensors"));
}

// A stop signal that reaches one rank alone (here rank 1's SIGTERM; a launcher's reaches them at different
// moments) stops both after the same step: they agree after each step, and the lead writes that step's checkpoint.
TEST(TrainDataParallel, AStopSignalToOneRankEndsBothAfterTheSameStepWithItsCheckpoint) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_signal_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 40, 0);
  const std::string run = (root / "run").string();
  const BackgroundLaunch launch(root, "train " + config + " --set run_dir=" + run);
  const int rank1 = rank1_once_logged(run, 2);
  ASSERT_GT(rank1, 0) << "rank 1 was not found running; the launch printed:\n" << launch.output();
  ASSERT_EQ(::kill(rank1, SIGTERM), 0);
  ASSERT_TRUE(launch.ended_within(std::chrono::minutes(2)));
  const std::string out = launch.output();
  EXPECT_NE(launch.status(), 0) << out;  // each rank exits 128 + SIGTERM: the run did not finish
  const std::vector<Json> records = read_jsonl(run + "/metrics.jsonl");
  ASSERT_GE(records.size(), 2u);
  ASSERT_LT(records.size(), 40u);
  const std::string step = std::to_string(records.size());
  EXPECT_NE(out.find("train: stopped on request after step " + step + " of 40"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_" + step + "/model.safetensors")) << out;
  EXPECT_EQ(out.find("did not answer"), std::string::npos) << out;  // no rank left waiting in a collective
  fs::remove_all(root);
}

// One rank stopped (kill -STOP) left the other spinning in its next collective for ever: past
// trainer.collective_timeout_s the waiting rank asks who is there and the run stops naming the rank that is not.
TEST(TrainDataParallel, ARankThatStopsAnsweringEndsTheRunNamingItPastTheDeadline) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_stop_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 40, 0);
  const std::string run = (root / "run").string();
  const BackgroundLaunch launch(root, "train " + config + " --set trainer.collective_timeout_s=2 --set run_dir=" + run);
  const int victim = rank1_once_logged(run, 2);
  ASSERT_GT(victim, 0) << "rank 1 was not found running; the launch printed:\n" << launch.output();
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  const bool ended = launch.ended_within(std::chrono::seconds(60));
  if (!ended) {  // the old behaviour: rank 0 spins for ever; end the launch so that nothing is left running
    ::kill(victim, SIGKILL);
    const int rank0 = find_rank_pid(0, run);
    if (rank0 > 0) ::kill(rank0, SIGKILL);
  }
  ASSERT_TRUE(ended) << "the run did not stop within 60 s of rank 1 being stopped";
  const std::string out = launch.output();
  EXPECT_NE(launch.status(), 0) << out;
  EXPECT_NE(out.find("rank(s) 1 did not answer"), std::string::npos) << out;
  EXPECT_NE(out.find("trainer.collective_timeout_s = 2"), std::string::npos) << out;
  ::kill(victim, SIGKILL);  // in case the launcher left it stopped
}

// Ranks that would run different configs (another step count hung, another algorithm or dtype trained on mixed
// gradients) are refused before any work, naming the rank and the first key that differs; and ranks whose
// init_checkpoint holds other weights (a relative path, resolved in each rank's directory).
TEST(TrainDataParallel, RanksWithAnotherConfigOrOtherInitialWeightsAreRefusedByName) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_config_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 2, 0);
  const std::string launch = kMpirun;  // one rank per app context (mpirun's A : B), each its own command line
  const std::string train = " " RLCPP_BINARY_DIR "/rlcpp train " + config + " --set run_dir=" + (root / "run").string();
  const CliResult steps = run_shell(launch + "-np 1" + train + " : -np 1" + train + " --set steps=3");
  EXPECT_NE(steps.status, 0);
  EXPECT_NE(steps.output.find("rank 1's config differs from rank 0's: steps: 2 -> 3 (rank 0 -> rank 1)"),
            std::string::npos)
      << steps.output;
  EXPECT_FALSE(fs::exists(root / "run")) << "work started before the refusal";
  const CliResult dtype = run_shell(launch + "-np 1" + train + " : -np 1" + train + " --set trainer.dtype=bf16");
  EXPECT_NE(dtype.output.find("rank 1's config differs from rank 0's: trainer.dtype: \"fp32\" -> \"bf16\""),
            std::string::npos)
      << dtype.output;
  // The same config text, two directories whose init/ holds other weights.
  for (const char* host : {"a", "b"}) {
    fs::create_directories(root / host);
    const ParameterStore init = load_model_checkpoint((root / "init").string());
    ParameterStore moved = init.clone();
    if (std::string(host) == "b") moved.flat().data<float>()[0] += 1.0f;
    save_model_checkpoint((root / host / "init").string(), moved);
  }
  Json relative = Json::parse(std::ifstream(config));
  relative["init_checkpoint"] = "init";
  std::ofstream(root / "relative.json") << relative.dump();
  const std::string train_relative =
      " " RLCPP_BINARY_DIR "/rlcpp train " + (root / "relative.json").string() + " --set run_dir=" +
      (root / "run").string();
  const CliResult weights = run_shell(launch + "-np 1 -wdir " + (root / "a").string() + train_relative +
                                      " : -np 1 -wdir " + (root / "b").string() + train_relative);
  EXPECT_NE(weights.status, 0);
  EXPECT_NE(weights.output.find("the initial weights of rank(s) 1 differ from rank 0's"), std::string::npos)
      << weights.output;
}

TEST(TrainDataParallel, OtherCommandsAndMpiLessLaunchesAreRefused) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_dp_refuse_test";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string config = write_config(root, 2, 0);
  const CliResult sft = run_shell("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 " RLCPP_BINARY_DIR
                                  "/rlcpp sft " RLCPP_SOURCE_DIR "/configs/sft_add3.json");
  EXPECT_NE(sft.status, 0);
  EXPECT_NE(sft.output.find("sft: launched as rank 0 of 2 (mpirun); only `rlcpp train` runs data-parallel"),
            std::string::npos)
      << sft.output;
  const CliResult env = run_shell("RANK=1 WORLD_SIZE=2 " RLCPP_BINARY_DIR "/rlcpp train " + config);
  EXPECT_NE(env.status, 0);
  EXPECT_NE(env.output.find("without mpirun or srun"), std::string::npos) << env.output;
  // A mini-batch of 32 in micro-batches of 32 cannot be shared by two ranks.
  const CliResult micro =
      run_shell(mpirun(2, "train " + config + " --set ppo.micro_batch_size=32 --set run_dir=" + (root / "m").string()));
  EXPECT_NE(micro.status, 0);
  EXPECT_NE(micro.output.find("config key 'ppo.micro_batch_size': 2 data-parallel ranks"), std::string::npos)
      << micro.output;
  EXPECT_NE(micro.output.find("rank 0 of 2 stopped"), std::string::npos) << micro.output;
}

}  // namespace
}  // namespace rlcpp
