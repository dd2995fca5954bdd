// The agent library without an engine: turn protocols (w1's markers, Qwen3's <tool_call> JSON), tools whose
// failures become observations, the toy environments, an episode's loss mask and its JSON, demonstrations, and the
// retokenize contrast of the mismatch lab (agent/retokenize.h).
#include <gtest/gtest.h>

#include "agent/demonstration.h"
#include "agent/episode.h"
#include "agent/retokenize.h"
#include "agent/tools.h"
#include "agent/toy_envs.h"
#include "agent/turn_protocol.h"
#include "tokenizer/hf_tokenizer.h"
#include "model/model_config.h"
#include "reward/task_registry.h"
#include "reward/guess_task.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The calc task's arithmetic: 3-digit products.
std::unique_ptr<Task> mul3() {
  TaskConfig c;
  c.name = "mul";
  c.digits = 3;
  return make_task(c);
}

TEST(AgentW1Protocol, ACallIsReadAndItsReplyWrittenBetweenObservationMarkers) {
  const CharTokenizer tok;
  const std::unique_ptr<TurnProtocol> w1 = make_turn_protocol(tok);
  EXPECT_EQ(w1->name(), "w1");
  const std::vector<ToolSpec> tools = {calculator_spec()};
  const std::vector<int32_t> turn = concat(concat({kW1CallOpen}, tok.encode("12*34")), {kW1CallClose});
  const AssistantTurn t = w1->parse(turn, true, tools);
  ASSERT_EQ(t.tool_calls.size(), 1u);
  EXPECT_EQ(t.tool_calls[0].name, "calculator");
  EXPECT_EQ(t.tool_calls[0].arguments["expression"], "12*34");
  EXPECT_TRUE(t.parse_error.empty());
  EXPECT_EQ(w1->render_turn(t, tools), turn);  // demonstrations are written as the model samples

  EnvStep reply;
  reply.observation = "408";
  EXPECT_EQ(w1->observation_tokens(turn, reply), concat(concat({kW1ObsOpen}, tok.encode("408")), {kW1ObsClose}));
  reply.error = true;
  EXPECT_EQ(w1->observation_tokens(turn, reply), (std::vector<int32_t>{kW1ObsOpen, kW1ObsError, kW1ObsClose}));
  EXPECT_EQ(w1->display(concat(turn, {tok.eos_id()})), "<call>12*34</call><eos>");
}

// Issue 34 item 3: a call cut before its </call>, an unknown tool, bad arguments and a failing tool are
// observations the model reads (and counted tool errors), never an exception.
TEST(AgentTools, ParseErrorsUnknownToolsBadArgumentsAndFailuresBecomeErrorObservations) {
  const CharTokenizer tok;
  const std::unique_ptr<TurnProtocol> w1 = make_turn_protocol(tok);
  const std::unique_ptr<Task> task = mul3();
  const std::unique_ptr<ExpertEnvironment> env = make_calc_env(*task, 1.0);
  PhiloxStream rng(1, 0);
  env->reset(task->sample_train(rng));
  const AssistantTurn cut = w1->parse(concat({kW1CallOpen}, tok.encode("12*")), false, env->tools());
  EXPECT_FALSE(cut.parse_error.empty());
  EnvStep s = env->step(cut);
  EXPECT_TRUE(s.error);
  EXPECT_FALSE(s.done);
  EXPECT_EQ(s.tool_calls, 1);
  EXPECT_EQ(s.tool_errors, 1);

  ToolBox box;
  box.add(calculator_spec(), calculator);
  ToolCall unknown{"search", OrderedJson::object()};
  EXPECT_TRUE(box.call(unknown).error);
  EXPECT_NE(box.call(unknown).text.find("unknown tool 'search'"), std::string::npos);
  ToolCall mistyped{"calculator", OrderedJson::parse(R"({"expression": 5})")};
  EXPECT_NE(box.call(mistyped).text.find("must be string"), std::string::npos);
  ToolCall missing{"calculator", OrderedJson::object()};
  EXPECT_NE(box.call(missing).text.find("missing argument 'expression'"), std::string::npos);
  ToolCall throws{"calculator", OrderedJson::parse(R"({"expression": "1/0"})")};
  EXPECT_TRUE(box.call(throws).error);
  ToolCall fine{"calculator", OrderedJson::parse(R"({"expression": "123*456"})")};
  EXPECT_EQ(box.call(fine).text, "56088");
  EXPECT_FALSE(box.call(fine).error);
}

TEST(AgentGuessEnvironment, FewerTurnsPayMoreAndFeedbackNarrowsTheInterval) {
  const std::unique_ptr<ExpertEnvironment> env = make_guess_env(10, 1.0);
  env->reset(GuessTask::make_problem(700));
  AssistantTurn t;
  t.text = "500";
  EnvStep s = env->step(t);
  EXPECT_EQ(s.observation, "+");
  EXPECT_FALSE(s.done);
  t.text = "abc";
  s = env->step(t);
  EXPECT_TRUE(s.error);
  t.text = "700";
  s = env->step(t);
  EXPECT_TRUE(s.done);
  EXPECT_TRUE(s.success.value_or(false));
  EXPECT_DOUBLE_EQ(s.reward, (10.0 + 1 - 3) / 10);  // found on turn 3 of 10
}

// agent.guess_feedback "interval": each wrong guess's observation is the range left, as the prompt writes it.
TEST(AgentGuessEnvironment, IntervalFeedbackGivesTheRangeLeft) {
  const std::unique_ptr<ExpertEnvironment> env = make_guess_env(10, 1.0, /*interval_feedback=*/true);
  env->reset(GuessTask::make_problem(700));
  AssistantTurn t;
  t.text = "500";
  EXPECT_EQ(env->step(t).observation, "(501 999)");
  t.text = "800";
  EXPECT_EQ(env->step(t).observation, "(501 799)");
  t.text = "650";
  EXPECT_EQ(env->step(t).observation, "(651 799)");
  // The expert's middle guess is the middle of that range.
  PhiloxStream rng(1, 0);
  EXPECT_EQ(env->expert_turn(rng).text, "725");
}

// An expert's demonstration: calls the calculator, reads the reply, copies it; the loss mask is 1 on exactly the
// assistant's tokens (multi-turn SFT).
TEST(AgentDemonstration, CalcExpertCallsTheToolAndTheMaskCoversOnlyItsTurns) {
  const CharTokenizer tok;
  const std::unique_ptr<TurnProtocol> w1 = make_turn_protocol(tok);
  const std::unique_ptr<Task> task = mul3();
  const std::unique_ptr<ExpertEnvironment> env = make_calc_env(*task, 1.0);
  AgentConfig cfg;
  cfg.env = "calc";
  PhiloxStream rng(3, 0);
  const Problem p = task->sample_train(rng);
  const Episode e = demonstrate(p, *env, *w1, cfg, 64, rng);
  EXPECT_TRUE(e.done);
  EXPECT_TRUE(e.success.value_or(false));
  EXPECT_EQ(e.turns(), 2);
  EXPECT_EQ(e.tool_calls, 1);
  EXPECT_EQ(w1->display(e.tokens).find("<call>"), 0u);
  EXPECT_NE(w1->display(e.tokens).find("</call><obs>" + p.answer + "</obs>" + p.answer + "<eos>"), std::string::npos)
      << w1->display(e.tokens);
  const std::vector<float> mask = e.loss_mask();
  ASSERT_EQ(mask.size(), e.tokens.size());
  int64_t env_tokens = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    const bool observation = e.tokens[i] == kW1ObsOpen || e.tokens[i] == kW1ObsClose ||
                             (i > 0 && e.sources[i] == TokenSource::kEnvironment);
    EXPECT_EQ(mask[i], e.sources[i] == TokenSource::kModel ? 1.0f : 0.0f);
    if (observation) EXPECT_EQ(mask[i], 0.0f) << "token " << i;
    env_tokens += mask[i] == 0.0f ? 1 : 0;
  }
  EXPECT_EQ(env_tokens, e.env_tokens);
  EXPECT_EQ(env_tokens, static_cast<int64_t>(p.answer.size()) + 2);
}

TEST(AgentEpisode, JsonRoundTripsTokensLogprobsAndVersionsExactly) {
  Episode e;
  e.problem = GuessTask::make_problem(12);
  e.prompt = {1, 5, 6};
  e.add_model_tokens({7, 8}, {-0.1f, -1e-7f}, 3, true);
  e.add_environment_tokens({kW1ObsOpen, 9, kW1ObsClose}, "+", false);
  e.add_model_tokens({10}, {-2.5f}, 4, false);
  e.reward = 0.25;
  e.truncated = true;
  e.end_reason = "max_turns";
  const Episode back = episode_from_json(episode_to_json(e), "test");
  EXPECT_EQ(back.tokens, e.tokens);
  EXPECT_EQ(back.logprobs, e.logprobs);
  EXPECT_EQ(back.versions, e.versions);
  EXPECT_EQ(back.sources, e.sources);
  EXPECT_EQ(back.turn_spans, e.turn_spans);
  EXPECT_EQ(back.loss_mask(), (std::vector<float>{1, 1, 0, 0, 0, 1}));
  EXPECT_EQ(back.end_reason, "max_turns");
}

// Qwen3's format: a <tool_call> JSON block in the assistant's turn; malformed JSON is a parse error the model
// reads back in a <tool_response>.
TEST(AgentChatProtocol, Qwen3ToolCallsParseAndMalformedJsonIsAnObservation) {
  const HfTokenizer tok(qwen3_fixture_dir() + "/tokenizer.json", model_preset("qwen-tiny"));
  const std::unique_ptr<TurnProtocol> chat = make_turn_protocol(tok, false);
  EXPECT_EQ(chat->name(), "chat");
  const std::vector<ToolSpec> tools = {calculator_spec()};
  const std::string good = "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2*3\"}}\n"
                           "</tool_call><|im_end|>";
  const AssistantTurn t = chat->parse(tok.encode(good), true, tools);
  ASSERT_EQ(t.tool_calls.size(), 1u) << t.parse_error;
  EXPECT_EQ(t.tool_calls[0].arguments["expression"], "2*3");
  const AssistantTurn bad = chat->parse(tok.encode("<tool_call>\n{\"name\": calc\n</tool_call><|im_end|>"), true, tools);
  EXPECT_FALSE(bad.parse_error.empty());
  ToolBox box;
  box.add(calculator_spec(), calculator);
  const EnvStep s = box.run(bad);
  EXPECT_TRUE(s.error);
  EXPECT_EQ(s.tool_errors, 1);
  const std::string obs = tok.decode(chat->observation_tokens(tok.encode(good), s));
  EXPECT_NE(obs.find("<tool_response>"), std::string::npos) << obs;
  EXPECT_NE(obs.find("error"), std::string::npos) << obs;
}

// Issue 34 item 8: token-in/token-out trains on the ids sampled; re-rendering the conversation with Qwen3's
// template and tokenizing again gives other ids for a crafted turn (a JSON call written with other spacing than
// the template's tojson re-serialises it with), which the lab counts.
TEST(AgentRetokenize, ACraftedQwen3ConversationRetokenizesToOtherIds) {
  const HfTokenizer tok(qwen3_fixture_dir() + "/tokenizer.json", model_preset("qwen-tiny"));
  const std::unique_ptr<TurnProtocol> chat = make_turn_protocol(tok, false);
  ToolBox box;
  box.add(calculator_spec(), calculator);
  Episode e;
  e.problem.prompt = "What is 12*34?";
  e.prompt_text = e.problem.prompt;
  e.tools = box.specs();
  e.prompt = chat->prompt_tokens(e.prompt_text, e.tools);
  const std::vector<int32_t> turn =
      tok.encode("<tool_call>\n{\"name\":\"calculator\",\"arguments\":{\"expression\":\"12*34\"}}\n</tool_call><|im_end|>");
  e.add_model_tokens(turn, std::vector<float>(turn.size(), -0.5f), 0, true);
  const EnvStep s = box.run(chat->parse(turn, true, e.tools));
  e.add_environment_tokens(chat->observation_tokens(turn, s), s.observation, true);
  const std::vector<int32_t> answer = tok.encode("408<|im_end|>");
  e.add_model_tokens(answer, std::vector<float>(answer.size(), -0.25f), 0, true);

  const Retokenized r = retokenize(e, tok, *chat, "", false);
  EXPECT_TRUE(r.differs);
  EXPECT_NE(concat(r.prompt, r.response), concat(e.prompt, e.tokens));
  ASSERT_EQ(r.mask.size(), r.response.size());
}

}  // namespace
}  // namespace rlcpp
