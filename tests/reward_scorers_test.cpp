// Scorers and the countdown expression evaluator on adversarial responses.
#include <gtest/gtest.h>

#include <string>

#include "reward/countdown_task.h"
#include "reward/expression_parser.h"
#include "reward/reward_result.h"
#include "reward/scorers.h"

namespace rlcpp {
namespace {

double component(const RewardResult& r, const std::string& name) {
  for (const auto& [n, v] : r.components)
    if (n == name) return v;
  ADD_FAILURE() << "no component " << name;
  return -1.0;
}

double format_total(const std::string& answer, const std::string& response, bool terminated = true,
                    bool allow_negative = false) {
  return score_format(answer, response, terminated, allow_negative, 0.1).total;
}

TEST(FormatScorer, ExactAnswerThenEosIsOne) {
  RewardResult r = score_format("579", "579", true, false, 0.1);
  EXPECT_EQ(r.total, 1.0);
  EXPECT_TRUE(r.correct);
  EXPECT_EQ(component(r, "correct"), 1.0);
  EXPECT_EQ(component(r, "well_formed"), 1.0);
  EXPECT_EQ(component(r, "terminated"), 1.0);
}

TEST(FormatScorer, WellFormedWrongIntegerGetsFormatScore) {
  RewardResult r = score_format("579", "578", true, false, 0.1);
  EXPECT_DOUBLE_EQ(r.total, 0.1);
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(component(r, "well_formed"), 1.0);
  EXPECT_DOUBLE_EQ(format_total("0", "1"), 0.1);
  EXPECT_DOUBLE_EQ(format_total("1", "0"), 0.1);
  EXPECT_EQ(format_total("0", "0"), 1.0);
  EXPECT_DOUBLE_EQ(score_format("579", "578", true, false, 0.25).total, 0.25);
}

TEST(FormatScorer, EmptyOrOnlyEosIsZero) {
  EXPECT_EQ(format_total("579", "", true), 0.0);   // only EOS
  EXPECT_EQ(format_total("579", "", false), 0.0);  // nothing at all
}

TEST(FormatScorer, UnterminatedIsZeroEvenWhenTheTextIsRight) {
  RewardResult r = score_format("579", "579", false, false, 0.1);
  EXPECT_EQ(r.total, 0.0);
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(component(r, "terminated"), 0.0);
  EXPECT_EQ(format_total("579", "578", false), 0.0);
}

TEST(FormatScorer, LeadingZerosAreNotWellFormed) {
  EXPECT_EQ(format_total("579", "0579"), 0.0);
  EXPECT_EQ(format_total("0", "00"), 0.0);
  EXPECT_EQ(format_total("7", "007"), 0.0);
}

TEST(FormatScorer, SignsAreWellFormedOnlyWhereAnswersCanBeNegative) {
  EXPECT_EQ(format_total("579", "+579"), 0.0);
  EXPECT_EQ(format_total("579", "-579"), 0.0);              // add: never negative
  EXPECT_DOUBLE_EQ(format_total("-42", "-41", true, true), 0.1);  // sub
  EXPECT_EQ(format_total("-42", "-42", true, true), 1.0);
  EXPECT_DOUBLE_EQ(format_total("-42", "42", true, true), 0.1);
  EXPECT_EQ(format_total("-42", "-042", true, true), 0.0);
  EXPECT_EQ(format_total("-42", "--42", true, true), 0.0);
  EXPECT_EQ(format_total("-42", "-", true, true), 0.0);
  EXPECT_EQ(format_total("0", "-0", true, true), 0.0);
  EXPECT_EQ(format_total("-42", "+42", true, true), 0.0);
}

TEST(FormatScorer, WhitespaceIsNotWellFormed) {
  for (const char* response : {" 579", "579 ", "5 79", "579\n", "\t579", " "})
    EXPECT_EQ(format_total("579", response), 0.0) << "'" << response << "'";
}

TEST(FormatScorer, BytesOutsideTheVocabularyAreZero) {
  EXPECT_EQ(format_total("579", "57?"), 0.0);  // an unknown token id decodes as '?'
  EXPECT_EQ(format_total("579", "\xff\xfe"), 0.0);
  EXPECT_EQ(format_total("579", std::string("579\0", 4)), 0.0);
  EXPECT_EQ(format_total("579", "5a9"), 0.0);
  EXPECT_EQ(format_total("579", "\xc3\xa9"), 0.0);  // é
}

TEST(FormatScorer, HugeNumbersAreWellFormedButWrong) {
  std::string huge(500, '9');
  EXPECT_DOUBLE_EQ(format_total("579", huge), 0.1);
  std::string huge_answer = "1" + std::string(40, '0');
  EXPECT_EQ(format_total(huge_answer, huge_answer), 1.0);
  EXPECT_DOUBLE_EQ(format_total(huge_answer, "1" + std::string(39, '0')), 0.1);
}

TEST(CanonicalInteger, MatchesPythonStrOfInt) {
  for (const char* s : {"0", "7", "10", "999", "12345678901234567890123"}) EXPECT_TRUE(is_canonical_integer(s, false));
  for (const char* s : {"", "-", "-0", "00", "01", "+1", " 1", "1 ", "1.0", "1e3", "-7"})
    EXPECT_FALSE(is_canonical_integer(s, false)) << "'" << s << "'";
  EXPECT_TRUE(is_canonical_integer("-7", true));
  EXPECT_TRUE(is_canonical_integer("-10", true));
  EXPECT_FALSE(is_canonical_integer("-0", true));
  EXPECT_FALSE(is_canonical_integer("-01", true));
}

TEST(ExactScorer, GivesNoFormatCredit) {
  EXPECT_EQ(score_exact("579", "579", true).total, 1.0);
  EXPECT_EQ(score_exact("579", "578", true).total, 0.0);
  EXPECT_EQ(score_exact("579", "579", false).total, 0.0);
  EXPECT_EQ(score_exact("579", "", true).total, 0.0);
  EXPECT_EQ(score_exact("abc", "abc", true).total, 1.0);
  EXPECT_EQ(score_exact("abc", "abc ", true).total, 0.0);
}

TEST(NumericScorer, ZeroToleranceComparesDecimalValuesExactly) {
  EXPECT_EQ(score_numeric("0.5", "0.50", true, 0.0).total, 1.0);
  EXPECT_EQ(score_numeric("7", "007", true, 0.0).total, 1.0);
  EXPECT_EQ(score_numeric("0", "-0", true, 0.0).total, 1.0);
  EXPECT_EQ(score_numeric("-3", "-3.000", true, 0.0).total, 1.0);
  EXPECT_EQ(score_numeric("0.5", "0.51", true, 0.0).total, 0.0);
  // Beyond double precision: 30 significant digits that differ only in the last one.
  std::string a = "123456789012345678901234567890";
  std::string b = "123456789012345678901234567891";
  EXPECT_EQ(score_numeric(a, "000" + a, true, 0.0).total, 1.0);
  EXPECT_EQ(score_numeric(a, b, true, 0.0).total, 0.0);
}

TEST(NumericScorer, ToleranceIsAbsolute) {
  EXPECT_EQ(score_numeric("0.5", "0.505", true, 0.01).total, 1.0);
  EXPECT_EQ(score_numeric("0.5", "0.52", true, 0.01).total, 0.0);
  EXPECT_EQ(score_numeric("100", "99.5", true, 0.5).total, 1.0);
  EXPECT_EQ(score_numeric("-2", "-2.4", true, 0.5).total, 1.0);
}

TEST(NumericScorer, RejectsMalformedUnterminatedAndHugeResponses) {
  for (const char* response : {"", ".5", "5.", "1/2", "1e3", "+1", " 1", "1 ", "0x10", "nan", "inf", "?", "--1"})
    EXPECT_EQ(score_numeric("1", response, true, 0.5).total, 0.0) << "'" << response << "'";
  EXPECT_EQ(score_numeric("1", "1", false, 0.5).total, 0.0);
  // 400 digits overflow a double to inf, which must not count as close (nor produce NaN).
  RewardResult r = score_numeric("1", "1" + std::string(400, '0'), true, 1e300);
  EXPECT_EQ(r.total, 0.0);
  EXPECT_EQ(component(r, "well_formed"), 1.0);
}

TEST(DecimalEqual, RejectsNonNumbers) { EXPECT_THROW(decimal_equal("1", "x"), Error); }

TEST(ScorerKind, UnknownNameIsAnErrorNamingTheKey) {
  EXPECT_EQ(parse_scorer_kind("numeric", "task.scorer"), ScorerKind::kNumeric);
  try {
    parse_scorer_kind("fuzzy", "task.scorer");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task.scorer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fuzzy"), std::string::npos) << e.what();
  }
}

TEST(ScoreAnswer, DispatchesOnTheKind) {
  ScorerSpec spec;
  EXPECT_DOUBLE_EQ(score_answer(spec, "5", "6", true).total, 0.1);
  spec.kind = ScorerKind::kExact;
  EXPECT_EQ(score_answer(spec, "5", "6", true).total, 0.0);
  spec.kind = ScorerKind::kNumeric;
  spec.tolerance = 1.0;
  EXPECT_EQ(score_answer(spec, "5", "6", true).total, 1.0);
}

TEST(RewardComponents, MeansAreOverResultsThatHaveThem) {
  std::vector<RewardResult> results = {score_format("5", "5", true, false, 0.1),
                                       score_format("5", "6", true, false, 0.1),
                                       score_format("5", "x", true, false, 0.1)};
  results.push_back(RewardResult{0.5, {{"remote", 2.0}}, false});
  auto means = mean_reward_components(results);
  ASSERT_EQ(means.size(), 6u);
  EXPECT_EQ(means[0].first, "total");
  EXPECT_DOUBLE_EQ(means[0].second, (1.0 + 0.1 + 0.0 + 0.5) / 4);
  EXPECT_EQ(means[1].first, "correct");
  EXPECT_DOUBLE_EQ(means[1].second, 0.25);
  EXPECT_EQ(means[2].first, "correct");  // the scorer's component, over the 3 results that have it
  EXPECT_DOUBLE_EQ(means[2].second, 1.0 / 3);
  EXPECT_EQ(means[3].first, "well_formed");
  EXPECT_DOUBLE_EQ(means[3].second, 2.0 / 3);
  EXPECT_EQ(means[5].first, "remote");
  EXPECT_DOUBLE_EQ(means[5].second, 2.0);
  Json j = reward_to_json(results[1]);
  EXPECT_DOUBLE_EQ(j["total"].get<double>(), 0.1);
  EXPECT_EQ(j["components"]["well_formed"].get<double>(), 1.0);
}

// ---- the countdown expression evaluator ----

Rational value_of(const std::string& text) {
  ExpressionResult r = evaluate_expression(text);
  EXPECT_EQ(r.status, ExpressionStatus::kOk) << text << ": " << r.error;
  return r.value;
}

ExpressionStatus status_of(const std::string& text) { return evaluate_expression(text).status; }

TEST(ExpressionParser, EvaluatesWithPrecedenceAndLeftAssociativity) {
  EXPECT_EQ(value_of("1+2*3"), (Rational{7, 1}));
  EXPECT_EQ(value_of("(1+2)*3"), (Rational{9, 1}));
  EXPECT_EQ(value_of("10-2-3"), (Rational{5, 1}));
  EXPECT_EQ(value_of("8/4/2"), (Rational{1, 1}));
  EXPECT_EQ(value_of("2-7"), (Rational{-5, 1}));
  EXPECT_EQ(value_of(" ( 1 + 2 ) * 3 "), (Rational{9, 1}));
  EXPECT_EQ(value_of("0"), (Rational{0, 1}));
}

TEST(ExpressionParser, NonIntegerIntermediatesAreExact) {
  EXPECT_EQ(value_of("7/3*3"), (Rational{7, 1}));
  EXPECT_EQ(value_of("1/3+1/6"), (Rational{1, 2}));
  EXPECT_EQ(value_of("1/3-1/2"), (Rational{-1, 6}));
  EXPECT_EQ(value_of("(1/3)/(2/9)"), (Rational{3, 2}));
  // Floating point would give 0.30000000000000004 here.
  EXPECT_EQ(value_of("1/10+2/10"), (Rational{3, 10}));
}

TEST(ExpressionParser, DivisionByZeroIsWellFormedButHasNoValue) {
  for (const char* text : {"1/0", "5/(2-2)", "0/0", "3*(1/(4-4))+1"}) {
    ExpressionResult r = evaluate_expression(text);
    EXPECT_EQ(r.status, ExpressionStatus::kDivisionByZero) << text;
    EXPECT_TRUE(r.well_formed()) << text;
    EXPECT_NE(r.error.find("division by zero"), std::string::npos) << r.error;
  }
  // A later syntax error outranks an earlier division by zero.
  EXPECT_EQ(status_of("1/0)"), ExpressionStatus::kSyntaxError);
}

TEST(ExpressionParser, RejectsWhatTheGrammarDoesNotAllow) {
  for (const char* text : {"", " ", "-3+4", "+3", "07+1", "1+", "()", "1 2", "1++2", "(1+2", "1+2)", "1+2=",
                           "1+2?", "2^3", "1.5*2", "1e3", "\xff", "3x"}) {
    ExpressionResult r = evaluate_expression(text);
    EXPECT_EQ(r.status, ExpressionStatus::kSyntaxError) << "'" << text << "'";
    EXPECT_FALSE(r.well_formed());
    EXPECT_FALSE(r.error.empty());
    EXPECT_TRUE(r.literals.empty());
  }
  EXPECT_NE(evaluate_expression("1+2?").error.find("'?'"), std::string::npos);
  EXPECT_NE(evaluate_expression("1+\xff").error.find("0xff"), std::string::npos);
}

TEST(ExpressionParser, DeepNestingStopsAtTheLimitWithoutRecursingFurther) {
  auto nested = [](int depth) { return std::string(depth, '(') + "1" + std::string(depth, ')'); };
  EXPECT_EQ(value_of(nested(16)), (Rational{1, 1}));
  EXPECT_EQ(status_of(nested(17)), ExpressionStatus::kTooDeep);
  ExpressionLimits long_input;
  long_input.max_length = 1 << 22;
  // A million open parentheses: fails at depth 17 instead of overflowing the stack.
  EXPECT_EQ(evaluate_expression(nested(1000000), long_input).status, ExpressionStatus::kTooDeep);
  EXPECT_EQ(evaluate_expression(std::string(1000000, '('), long_input).status, ExpressionStatus::kTooDeep);
  EXPECT_EQ(status_of(std::string(300, '1')), ExpressionStatus::kSyntaxError);  // longer than max_length 256
}

TEST(ExpressionParser, HugeValuesOverflowInsteadOfWrapping) {
  ExpressionResult r = evaluate_expression("99999999999999999999+1");
  EXPECT_EQ(r.status, ExpressionStatus::kOverflow);
  EXPECT_TRUE(r.well_formed());
  EXPECT_EQ(r.literals, (std::vector<std::string>{"99999999999999999999", "1"}));
  EXPECT_EQ(status_of("999999999*999999999*999999999"), ExpressionStatus::kOverflow);
  EXPECT_EQ(value_of("999999999*999999999"), (Rational{999999998000000001, 1}));
  EXPECT_EQ(value_of("1/999999999/999999999"), (Rational{1, 999999998000000001}));
  EXPECT_EQ(status_of("1/999999999/999999999/999999999"), ExpressionStatus::kOverflow);
}

TEST(ExpressionParser, RecordsLiteralsAsWritten) {
  ExpressionResult r = evaluate_expression("(19+36)*7-55");
  EXPECT_EQ(r.literals, (std::vector<std::string>{"19", "36", "7", "55"}));
}

// ---- countdown scoring ----

class CountdownScore : public ::testing::Test {
 protected:
  CountdownTask task_{1, ScorerSpec{}};
  Problem problem_ = task_.make_problem({3, 5, 7}, 22, "3*5+7");
  double total(const std::string& response, bool terminated = true) {
    return task_.score(problem_, response, terminated).total;
  }
};

TEST_F(CountdownScore, CorrectExpressionsScoreOne) {
  for (const char* response : {"3*5+7", "7+5*3", "(3*5)+7", " 3 * 5 + 7 ", "7+3*5", "((7))+(5*3)"}) {
    RewardResult r = task_.score(problem_, response, true);
    EXPECT_EQ(r.total, 1.0) << response;
    EXPECT_TRUE(r.correct);
  }
}

TEST_F(CountdownScore, UnterminatedEmptyAndMalformedScoreZero) {
  EXPECT_EQ(total("3*5+7", false), 0.0);
  EXPECT_EQ(total(""), 0.0);
  EXPECT_EQ(total("", false), 0.0);
  for (const char* response : {"3*5+7=", "3*5+7=22", "-3*5+7", "3*5+", "3*5+7?", "\xff", "03*5+7", "3 5 7"})
    EXPECT_EQ(total(response), 0.0) << response;
  std::string deep = std::string(20, '(') + "3*5+7" + std::string(20, ')');
  EXPECT_EQ(total(deep), 0.0);
}

TEST_F(CountdownScore, WrongUsageOfTheNumbersGetsOnlyTheFormatScore) {
  RewardResult unused = task_.score(problem_, "3*5", true);
  EXPECT_DOUBLE_EQ(unused.total, 0.1);
  EXPECT_EQ(component(unused, "uses_numbers"), 0.0);
  EXPECT_DOUBLE_EQ(total("3*5+7+3-3"), 0.1);   // 3 used three times, right value
  EXPECT_DOUBLE_EQ(total("3*5+7+0"), 0.1);     // an extra number
  EXPECT_DOUBLE_EQ(total("15+7"), 0.1);        // the right value from other numbers
  EXPECT_DOUBLE_EQ(total("3+5+7"), 0.1);       // each number once, wrong value
  EXPECT_DOUBLE_EQ(total("3*5+7+99999999999999999999999-99999999999999999999999"), 0.1);
}

TEST_F(CountdownScore, DivisionByZeroGetsOnlyTheFormatScore) {
  Problem p = task_.make_problem({2, 2, 5}, 5, "5*(2/2)");
  EXPECT_EQ(task_.score(p, "5*(2/2)", true).total, 1.0);
  RewardResult r = task_.score(p, "5/(2-2)", true);
  EXPECT_DOUBLE_EQ(r.total, 0.1);
  EXPECT_EQ(component(r, "uses_numbers"), 1.0);
  EXPECT_FALSE(r.correct);
}

TEST_F(CountdownScore, NonIntegerIntermediateResultsAreAllowed) {
  Problem p = task_.make_problem({3, 7, 3}, 7, "7/3*3");
  EXPECT_EQ(task_.score(p, "7/3*3", true).total, 1.0);
  EXPECT_EQ(task_.score(p, "3*(7/3)", true).total, 1.0);
  Problem q = task_.make_problem({1, 3, 2}, 1, "1/3*3");
  EXPECT_DOUBLE_EQ(task_.score(q, "1/3*2", true).total, 0.1);  // 2/3 is not 1
}

TEST_F(CountdownScore, ExactScorerGivesNoFormatCredit) {
  ScorerSpec exact;
  exact.kind = ScorerKind::kExact;
  CountdownTask task(1, exact);
  EXPECT_EQ(task.score(problem_, "3+5+7", true).total, 0.0);
  EXPECT_EQ(task.score(problem_, "3*5+7", true).total, 1.0);
}

TEST(CountdownScorer, NumericScorerIsRejected) {
  ScorerSpec numeric;
  numeric.kind = ScorerKind::kNumeric;
  EXPECT_THROW(CountdownTask(1, numeric), Error);
}

}  // namespace
}  // namespace rlcpp
