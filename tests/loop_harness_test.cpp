// Harness mode (agent.env "http", loop/harness_rollout.h) with scripts/agent_harness_example.py, the official
// `openai` client in the test venv: each episode is the server's record of its session, which is what the harness
// was shown (its prompt and sampled token ids, turn by turn), whatever the harness's concurrency; the environment's
// tokens are masked out of the loss; a short GRPO run through the harness raises its reward with the trainer and
// the engine agreeing exactly; chat sessions write tool replies as the chat protocol does; a failing harness stops
// the run naming it, and task items it never played are left out.
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <fstream>

#include "agent/turn_protocol.h"
#include "core/error.h"
#include "loop/agent_rollout.h"
#include "loop/controller.h"
#include "loop/engine_turns.h"
#include "loop/harness_rollout.h"
#include "model/init.h"
#include "reward/task_registry.h"
#include "tests/python_env.h"
#include "tests/test_fixtures.h"
#include "tests/train_test_support.h"
#include "tokenizer/hf_tokenizer.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

std::string example_harness(const std::string& args) {
  return "'" + venv_python() + "' '" + test_source_dir() + "/scripts/agent_harness_example.py' " + args;
}

// A W1 model (random weights) and its engine, and a draw's fresh add3 episodes: `items` x `group`.
struct HarnessFixture {
  HarnessFixture() {
    ec.max_num_seqs = 64;
    engine = std::make_unique<Engine>(model, params, ec);
    config.rollout.group_size = 4;
    config.agent.env = "http";
    config.agent.max_turn_tokens = 5;
    config.agent.harness_timeout_s = 120;
    sampling.temperature = 1.0f;
    sampling.seed = 77;
  }
  std::vector<Episode> fresh_episodes(int64_t items) const {
    TaskConfig tc;
    tc.name = "add3";
    const std::unique_ptr<Task> task = make_task(tc);
    PhiloxStream rng(3, 0);
    std::vector<Episode> out;
    for (int64_t g = 0; g < items; ++g) {
      const Problem p = task->sample_train(rng);
      for (int64_t i = 0; i < config.rollout.group_size; ++i) {
        Episode e;
        e.problem = p;
        e.group = g;
        e.sample_index = i;
        e.first_step = 1;
        out.push_back(e);
      }
    }
    return out;
  }
  HarnessDraw play(std::vector<Episode>& episodes, const std::string& harness) {
    config.agent.harness = harness;
    EngineTurns turns(*engine, sampling);
    return play_with_harness(episodes, turns, tok, *protocol, config, sampling, mc.vocab_size);
  }

  ModelConfig mc = model_preset("tiny");
  ParameterStore params = init_random(mc, 4);
  Transformer model{mc};
  EngineConfig ec;
  std::unique_ptr<Engine> engine;
  CharTokenizer tok;
  std::unique_ptr<TurnProtocol> protocol = make_turn_protocol(tok);
  TrainConfig config;
  SamplingParams sampling;
};

std::map<std::string, Json> harness_log(const fs::path& path) {
  std::map<std::string, Json> out;
  for (const Json& j : read_jsonl(path)) out[j["session"].get<std::string>()] = j["turns"];
  return out;
}

// The ids the harness was shown at an episode's last turn: that request's prompt, then what it sampled.
std::vector<int32_t> last_turn_shown(const std::map<std::string, Json>& shown, const Episode& e) {
  const Json& last = shown.at("s1-i" + std::to_string(e.group) + "-e" + std::to_string(e.sample_index)).back();
  std::vector<int32_t> ids = last["prompt_token_ids"].get<std::vector<int32_t>>();
  for (int32_t t : last["token_ids"].get<std::vector<int32_t>>()) ids.push_back(t);
  return ids;
}

std::vector<int32_t> episode_ids(const Episode& e) {
  std::vector<int32_t> ids = e.prompt;
  ids.insert(ids.end(), e.tokens.begin(), e.tokens.end());
  return ids;
}

TEST(LoopHarness, EpisodesAreTheServersRecordsOfWhatTheHarnessWasShownWhateverItsConcurrency) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_loop_harness_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  HarnessFixture f;
  std::vector<Episode> serial = f.fresh_episodes(4), parallel = f.fresh_episodes(4);
  const HarnessDraw a = f.play(serial, example_harness("--reward digits --attempts 2 --concurrency 1 --log '" +
                                                       (dir / "serial.jsonl").string() + "'"));
  const HarnessDraw b = f.play(parallel, example_harness("--reward digits --attempts 2 --concurrency 16 --log '" +
                                                         (dir / "parallel.jsonl").string() + "'"));
  EXPECT_EQ(a.dropped_groups, 0);
  EXPECT_EQ(a.requests, 32);  // 16 episodes x 2 turns
  EXPECT_EQ(b.requests, 32);
  ASSERT_EQ(serial.size(), 16u);
  ASSERT_EQ(parallel.size(), 16u);
  const std::map<std::string, Json> shown = harness_log(dir / "parallel.jsonl");
  ASSERT_EQ(shown.size(), 16u);
  for (size_t i = 0; i < serial.size(); ++i) {
    const Episode& e = parallel[i];
    EXPECT_EQ(serial[i].tokens, e.tokens) << "episode " << i;
    EXPECT_EQ(serial[i].logprobs, e.logprobs) << "episode " << i;
    EXPECT_EQ(serial[i].reward, e.reward) << "episode " << i;
    ASSERT_TRUE(e.done) << e.failure;
    ASSERT_EQ(e.turns(), 2);
    // The last turn's prompt and sampled ids, as the server returned them to the harness, are the episode.
    EXPECT_EQ(last_turn_shown(shown, e), episode_ids(e)) << "episode " << i;
    // The trainer's sample: those tokens, the harness's additions (" " + the question again) masked out.
    const RolloutSample s = episode_sample(e, LogprobScoring{});
    EXPECT_EQ(s.prompt, e.prompt);
    EXPECT_EQ(s.response, e.tokens);
    const std::vector<int32_t> added = f.tok.encode(" " + e.problem.prompt);
    EXPECT_EQ(e.env_tokens, static_cast<int64_t>(added.size()));
    const auto [begin, end] = e.turn_spans[1];
    EXPECT_TRUE(std::equal(added.begin(), added.end(), e.tokens.begin() + begin - static_cast<int64_t>(added.size())));
    for (size_t t = 0; t < s.mask.size(); ++t) {
      EXPECT_EQ(s.mask[t], e.sources[t] == TokenSource::kModel ? 1.0f : 0.0f);
      EXPECT_EQ(e.versions[t], e.sources[t] == TokenSource::kModel ? 0 : -1);
    }
    EXPECT_EQ(end, static_cast<int64_t>(e.tokens.size()));
  }
  EXPECT_EQ(f.engine->num_sessions(), 0);
  EXPECT_EQ(f.engine->num_free_blocks(), f.engine->num_blocks());
}

TEST(LoopHarness, AFailingHarnessStopsTheRunNamingItAndUnplayedItemsAreLeftOut) {
  HarnessFixture f;
  f.config.agent.harness_timeout_s = 2;
  const auto fails = [&](const std::string& harness, const std::string& expected) {
    std::vector<Episode> episodes = f.fresh_episodes(2);
    try {
      f.play(episodes, harness);
      ADD_FAILURE() << harness << " did not fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(f.engine->num_sessions(), 0);
  };
  fails("cat > /dev/null; exit 3", "exited with status 3");
  fails("cat > /dev/null; echo hello", "stdout line 1 (\"hello\") is not JSON");
  fails("cat > /dev/null; echo '{\"session\": \"s1-i0-e0\"}'", "needs \"reward\" as a number");
  fails("sleep 30", "timed out after 2 s");
  // Played: item 1's episodes only (item 0's never asked for); every episode gets a reward line.
  std::vector<Episode> episodes = f.fresh_episodes(2);
  const HarnessDraw d = f.play(episodes, "grep '\"item\":1,' | " + example_harness("--reward digits --attempts 1"));
  EXPECT_EQ(d.dropped_groups, 1);
  ASSERT_EQ(episodes.size(), 4u);
  for (const Episode& e : episodes) EXPECT_EQ(e.group, 1);
}

// Chat sessions: tool replies after an assistant turn become the chat protocol's observation (one user turn of
// <tool_response> blocks), a user message its user turn; anything else, or a rewritten history, is a 400.
TEST(LoopHarness, AChatSessionsToolRepliesAreWrittenAsTheChatProtocolWritesThem) {
  const HfTokenizer tok(qwen3_fixture_dir() + "/tokenizer.json", model_preset("qwen-tiny"));
  const std::unique_ptr<TurnProtocol> protocol = make_turn_protocol(tok, /*enable_thinking=*/false);
  SamplingParams sampling;
  sampling.max_new_tokens = 8;
  ServeSessions book(tok, sampling, harness_chat_tail(*protocol));
  book.add("c", 1, 0, sampling.seed);
  const Json system = {{"role", "system"}, {"content", "Use the tools."}};
  const Json user = {{"role", "user"}, {"content", "Weather in Paris?"}};
  CompletionRequest first;
  first.chat = true;
  first.messages = Json::array({system, user});
  first.prompt = tok.encode_prompt("", first.messages);
  first.sampling.max_new_tokens = 8;
  const SessionTurnPlan p1 = book.plan("c", first, 4096);
  book.opened("c", 0);
  TurnResult t;
  t.tokens = tok.encode("<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  t.tokens.push_back(tok.encode("<|im_end|>")[0]);
  t.logprobs.assign(t.tokens.size(), -1.0f);
  t.finish_reason = FinishReason::kStop;
  book.turn_done(p1, t);

  const Json reply = {{"role", "assistant"}, {"content", "(the text the client read)"}};
  const Json tool_a = {{"role", "tool"}, {"content", "18C"}}, tool_b = {{"role", "tool"}, {"content", "sunny"}};
  CompletionRequest next;
  next.chat = true;
  next.messages = Json::array({system, user, reply, tool_a, tool_b});
  next.sampling.max_new_tokens = 8;
  const SessionTurnPlan p2 = book.plan("c", next, 4096);
  EnvStep step;
  step.tool_output = true;
  step.observation = "18C\n</tool_response>\n<tool_response>\nsunny";
  EXPECT_EQ(p2.append, protocol->observation_tokens(t.tokens, step));
  book.turn_failed("c", "test: the turn is not run");  // frees it for the refusals below

  book.add("d", 2, 0, sampling.seed);
  CompletionRequest d1 = first;
  const SessionTurnPlan q1 = book.plan("d", d1, 4096);
  book.turn_done(q1, t);
  const auto refused = [&](Json messages, const std::string& expected) {
    CompletionRequest r;
    r.chat = true;
    r.messages = std::move(messages);
    try {
      book.plan("d", r, 4096);
      ADD_FAILURE() << "planned: " << r.messages.dump();
    } catch (const ServeError& e) {
      EXPECT_EQ(e.param(), "messages");
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  const Json other_user = {{"role", "user"}, {"content", "Weather in Rome?"}};
  refused(Json::array({system, other_user, reply, tool_a}), "message 1 differs");
  refused(Json::array({system, user, tool_a, tool_b}), "must be the assistant's reply");
  refused(Json::array({system, user, reply, tool_a, other_user}), "tool replies (role \"tool\") or one user message");
  CompletionRequest ask;
  ask.chat = true;
  ask.messages = Json::array({system, user, reply, other_user});
  const SessionTurnPlan q2 = book.plan("d", ask, 4096);
  EnvStep asked;
  asked.observation = "Weather in Rome?";
  EXPECT_EQ(q2.append, protocol->observation_tokens(t.tokens, asked));
}

// The example harness in --chat mode, end to end on a small random model with Qwen3's tokenizer: each turn's prompt
// and sampled ids as the server showed them are the episode (the cut first turn closed, the user's retry written
// by the chat protocol), whatever text the harness sent back in its messages.
TEST(LoopHarness, AChatHarnessesEpisodesAreTheIdsTheServerShowedIt) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_loop_harness_chat";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ModelConfig mc = model_preset("tiny");
  mc.vocab_size = model_preset("qwen-tiny").vocab_size;
  mc.max_position_embeddings = 512;
  const ParameterStore params = init_random(mc, 6);
  const Transformer model(mc);
  EngineConfig ec;
  Engine engine(model, params, ec);
  const HfTokenizer tok(qwen3_fixture_dir() + "/tokenizer.json", mc);
  const std::unique_ptr<TurnProtocol> protocol = make_turn_protocol(tok);
  HarnessFixture f;
  f.config.agent.harness = example_harness("--chat --attempts 2 --log '" + (dir / "log.jsonl").string() + "'");
  std::vector<Episode> episodes = f.fresh_episodes(2);
  EngineTurns turns(engine, f.sampling);
  const HarnessDraw d = play_with_harness(episodes, turns, tok, *protocol, f.config, f.sampling, mc.vocab_size);
  EXPECT_EQ(d.requests, 16);
  const std::map<std::string, Json> shown = harness_log(dir / "log.jsonl");
  ASSERT_EQ(episodes.size(), 8u);
  for (const Episode& e : episodes) {
    ASSERT_TRUE(e.done) << e.failure;
    ASSERT_EQ(e.turns(), 2);
    EXPECT_EQ(last_turn_shown(shown, e), episode_ids(e));
    const auto [begin, end] = e.turn_spans[0];
    const std::vector<int32_t> first_turn(e.tokens.begin() + begin, e.tokens.begin() + end);
    EnvStep retry;
    retry.observation = "No. " + e.problem.prompt;
    const std::vector<int32_t> added = protocol->observation_tokens(first_turn, retry);
    EXPECT_EQ(std::vector<int32_t>(e.tokens.begin() + end, e.tokens.begin() + e.turn_spans[1].first), added);
    EXPECT_EQ(e.env_tokens, static_cast<int64_t>(added.size()));
  }
  EXPECT_EQ(engine.num_sessions(), 0);
}

// Episodes that span weight syncs (agent.turns_per_draw 1, one harness for the run): each draw plays one turn of
// every episode, the next request waiting in the server while the weights change (version 0, 1, 2); the last draw
// lets them end. Every episode equals the same turns run on the engine directly, with the same syncs between
// them, bit for bit: each turn sampled by the version then held (the server opens a carried session again on each
// draw's turn engine with its history; the direct run keeps it and computes its stale K/V again), the harness's
// additions appended as it sent them.
TEST(LoopHarness, EpisodesSpanWeightSyncsEachTurnSampledByTheVersionOfItsDraw) {
  const fs::path dir = fs::temp_directory_path() / "rlcpp_loop_harness_syncs";
  fs::remove_all(dir);
  fs::create_directories(dir);
  HarnessFixture f;
  f.config.agent.turns_per_draw = 1;
  f.config.agent.harness = example_harness("--reward digits --attempts 3 --concurrency 0 --log '" +
                                           (dir / "log.jsonl").string() + "'");
  std::vector<Episode> episodes = f.fresh_episodes(2);
  for (Episode& e : episodes) e.seed = f.sampling.seed;
  const std::vector<ParameterStore> versions = {f.params, init_random(f.mc, 5), init_random(f.mc, 6)};
  {
    HarnessRun run(f.tok, *f.protocol, f.config, f.sampling, f.mc.max_position_embeddings, f.mc.vocab_size);
    for (int64_t v = 0; v < 3; ++v) {
      if (v > 0) f.engine->set_weights(versions[v], v);  // the sync, between draws
      EngineTurns turns(*f.engine, f.sampling);             // each draw's turn engine
      const HarnessDraw d = run.play(episodes, turns, /*to_the_end=*/v == 2);
      EXPECT_EQ(d.requests, 8) << "draw " << v;  // one turn of each episode
      for (const Episode& e : episodes) EXPECT_EQ(e.finished(), v == 2) << "draw " << v;
    }
  }
  EXPECT_EQ(f.engine->num_sessions(), 0);

  // The same turns on a fresh engine, the harness's additions appended between them, the weights synced alike.
  Engine direct(f.model, f.params, f.ec);
  SamplingParams turn = f.sampling;
  turn.max_new_tokens = f.config.agent.max_turn_tokens;
  std::vector<int64_t> ids;
  for (const Episode& e : episodes) ids.push_back(direct.open_session({e.prompt, e.problem.id, e.sample_index}));
  for (int64_t v = 0; v < 3; ++v) {
    if (v > 0) direct.set_weights(versions[v], v);
    std::vector<TurnRequest> turns;
    for (size_t i = 0; i < episodes.size(); ++i) {
      const Episode& e = episodes[i];
      ASSERT_EQ(e.turn_spans.size(), 3u);
      const int64_t from = v == 0 ? 0 : e.turn_spans[v - 1].second, to = e.turn_spans[v].first;
      if (to > from) direct.append(ids[i], std::span(e.tokens).subspan(from, to - from));
      turns.push_back({ids[i], turn});
    }
    direct.run_turns(turns);
  }
  const std::map<std::string, Json> shown = harness_log(dir / "log.jsonl");
  for (size_t i = 0; i < episodes.size(); ++i) {
    const Episode& e = episodes[i];
    const Sequence& seq = direct.session(ids[i]).sequence;
    EXPECT_EQ(seq.prompt(), e.prompt);
    ASSERT_EQ(seq.output(), e.tokens) << "episode " << i;
    ASSERT_EQ(seq.logprobs().size(), e.logprobs.size());
    for (size_t t = 0; t < e.logprobs.size(); ++t)
      EXPECT_EQ(std::bit_cast<uint32_t>(seq.logprobs()[t]), std::bit_cast<uint32_t>(e.logprobs[t]))
          << "episode " << i << " token " << t;
    for (int64_t v = 0; v < 3; ++v)
      for (int64_t t = e.turn_spans[v].first; t < e.turn_spans[v].second; ++t)
        EXPECT_EQ(e.versions[t], v) << "episode " << i << " turn " << v;
    EXPECT_EQ(last_turn_shown(shown, e), episode_ids(e)) << "episode " << i;
    EXPECT_TRUE(e.done);
  }
  fs::remove_all(dir);
}

// agent.tokens_per_draw ("keep"): a turn longer than a draw's tokens goes on in the next draw under the next
// version, its request open meanwhile. With the weights unchanged between draws, cutting the turns changes no token
// or log-prob (the episodes of a harness a draw, bit for bit); with new weights each part records its version and
// equals the same turn run on the engine directly in parts, with the same syncs between them.
TEST(LoopHarness, ATurnKeptAcrossSyncsGoesOnUnderTheNewVersion) {
  HarnessFixture f;  // turns of up to 5 tokens
  const std::string harness = example_harness("--reward digits --attempts 1");
  // Plays `episodes` with 2 tokens a draw, the engine's weights set to versions[v] before draw v.
  const auto play_cut = [&](std::vector<Episode>& episodes, const std::vector<ParameterStore>& versions) {
    TrainConfig config = f.config;
    config.agent.tokens_per_draw = 2;
    config.agent.harness = harness;
    HarnessRun run(f.tok, *f.protocol, config, f.sampling, f.mc.max_position_embeddings, f.mc.vocab_size);
    for (int64_t v = 0; v < 3; ++v) {
      if (v > 0) f.engine->set_weights(versions[v], v);
      EngineTurns turns(*f.engine, f.sampling);
      run.play(episodes, turns, /*to_the_end=*/v == 2);
    }
    f.engine->set_weights(f.params, 0);
  };
  const auto seeded = [&](std::vector<Episode> episodes) {
    for (Episode& e : episodes) e.seed = f.sampling.seed;
    return episodes;
  };

  std::vector<Episode> whole = seeded(f.fresh_episodes(2));
  f.play(whole, harness);
  std::vector<Episode> cut = seeded(f.fresh_episodes(2));
  play_cut(cut, {f.params, f.params, f.params});
  ASSERT_EQ(cut.size(), whole.size());
  int64_t spanning = 0;
  for (size_t i = 0; i < cut.size(); ++i) {
    ASSERT_TRUE(cut[i].done) << cut[i].failure;
    EXPECT_EQ(cut[i].turns(), 1);
    EXPECT_EQ(cut[i].tokens, whole[i].tokens) << "episode " << i;
    ASSERT_EQ(cut[i].logprobs.size(), whole[i].logprobs.size());
    for (size_t t = 0; t < cut[i].logprobs.size(); ++t)
      EXPECT_EQ(std::bit_cast<uint32_t>(cut[i].logprobs[t]), std::bit_cast<uint32_t>(whole[i].logprobs[t]));
    spanning += cut[i].versions.back() > 0 ? 1 : 0;
  }
  EXPECT_GT(spanning, 0) << "no turn was cut";

  const std::vector<ParameterStore> versions = {f.params, init_random(f.mc, 5), init_random(f.mc, 6)};
  std::vector<Episode> synced = seeded(f.fresh_episodes(2));
  play_cut(synced, versions);
  // The same turns on a fresh engine, in parts of 2 tokens, synced alike.
  Engine direct(f.model, f.params, f.ec);
  std::vector<int64_t> ids;
  std::vector<bool> over(synced.size(), false);
  for (const Episode& e : synced) ids.push_back(direct.open_session({e.prompt, e.problem.id, e.sample_index}));
  for (int64_t v = 0; v < 3; ++v) {
    if (v > 0) direct.set_weights(versions[v], v);
    std::vector<TurnRequest> parts;
    std::vector<size_t> which;
    for (size_t i = 0; i < synced.size(); ++i) {
      const int64_t sampled = direct.session(ids[i]).sequence.num_output();
      if (over[i] || sampled >= f.config.agent.max_turn_tokens) continue;
      SamplingParams part = f.sampling;
      part.max_new_tokens = std::min<int64_t>(2, f.config.agent.max_turn_tokens - sampled);
      parts.push_back({ids[i], part});
      which.push_back(i);
    }
    const std::vector<TurnResult> results = direct.run_turns(parts);
    for (size_t k = 0; k < results.size(); ++k) over[which[k]] = results[k].finish_reason != FinishReason::kLength;
  }
  for (size_t i = 0; i < synced.size(); ++i) {
    const Episode& e = synced[i];
    const Sequence& seq = direct.session(ids[i]).sequence;
    ASSERT_EQ(seq.output(), e.tokens) << "episode " << i;
    for (size_t t = 0; t < e.tokens.size(); ++t) {
      EXPECT_EQ(std::bit_cast<uint32_t>(seq.logprobs()[t]), std::bit_cast<uint32_t>(e.logprobs[t]))
          << "episode " << i << " token " << t;
      EXPECT_EQ(e.versions[t], static_cast<int64_t>(t / 2)) << "episode " << i << " token " << t;
    }
  }
}

// A harness that dies while its episodes wait stops the run naming it; one that leaves a draw unended past
// agent.harness_timeout_s too.
TEST(LoopHarness, AHarnessForTheRunThatDiesOrStallsStopsTheRunNamingIt) {
  HarnessFixture f;
  f.config.agent.turns_per_draw = 1;
  f.config.agent.harness_timeout_s = 3;
  const auto fails = [&](const std::string& harness, const std::string& expected) {
    f.config.agent.harness = harness;
    std::vector<Episode> episodes = f.fresh_episodes(1);
    HarnessRun run(f.tok, *f.protocol, f.config, f.sampling, f.mc.max_position_embeddings, f.mc.vocab_size);
    EngineTurns turns(*f.engine, f.sampling);
    try {
      run.play(episodes, turns, false);
      ADD_FAILURE() << harness << " did not fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("agent.harness"), std::string::npos) << e.what();
    }
  };
  fails("head -c 1 > /dev/null; exit 3", "exited with status 3");
  fails("sleep 30", "agent.harness_timeout_s = 3 s");
  fails("echo '{\"session\": \"s9-i0-e0\", \"reward\": 1}'; sleep 30", "is not one the harness was given");
}

// A harness for the run that writes an episode's reward without a request of it: the episode ends unplayed (its
// task item is then left out of the step, as a harness a draw's unplayed items are).
TEST(LoopHarness, AnEpisodeRewardedWithoutATurnEndsUnplayed) {
  HarnessFixture f;
  f.config.agent.turns_per_draw = 1;
  f.config.agent.harness =
      "while read -r line; do s=$(echo \"$line\" | sed 's/.*\"session\":\"\\([^\"]*\\)\".*/\\1/'); "
      "echo \"{\\\"session\\\": \\\"$s\\\", \\\"reward\\\": 1}\"; done";
  std::vector<Episode> episodes = f.fresh_episodes(1);
  HarnessRun run(f.tok, *f.protocol, f.config, f.sampling, f.mc.max_position_embeddings, f.mc.vocab_size);
  EngineTurns turns(*f.engine, f.sampling);
  const HarnessDraw d = run.play(episodes, turns, false);
  EXPECT_EQ(d.requests, 0);
  for (const Episode& e : episodes) {
    EXPECT_TRUE(e.finished());
    EXPECT_EQ(e.end_reason, kUnplayed);
    EXPECT_TRUE(e.tokens.empty());
  }
}

TEST(LoopHarness, AShortGrpoRunThroughTheHarnessRaisesItsReward) {
  const fs::path root = fs::temp_directory_path() / "rlcpp_loop_harness_grpo";
  fs::remove_all(root);
  constexpr int64_t kSteps = 8;
  TrainConfig c = small_grpo_run(small_train_checkpoint(root / "init"), kSteps);
  c.run_dir = (root / "run").string();
  c.task.name = "add3";
  use_example_harness(c, "--reward digits --attempts 2");
  const TrainSummary s = run_train(c, config_to_json(c));
  ASSERT_EQ(static_cast<int64_t>(s.mean_rewards.size()), kSteps);
  const std::vector<Json> metrics = read_jsonl(fs::path(s.run_dir) / "metrics.jsonl");
  for (const Json& m : metrics) {
    EXPECT_EQ(m["mismatch/max_abs_dlogp"].get<double>(), 0.0);  // the trainer scores the engine's tokens alike
    EXPECT_EQ(m["agent/turns_mean"].get<double>(), 2.0);
    EXPECT_EQ(m["agent/harness_requests"].get<double>(), 2.0 * 64);
    EXPECT_GT(m["timing_s/env"].get<double>(), 0.0);
  }
  const double r0 = s.mean_rewards.front(), r1 = s.mean_rewards.back();
  EXPECT_GT(r1, r0 + 0.1) << "the share of digits in the answers " << r0 << " -> " << r1;
}

}  // namespace
}  // namespace rlcpp
