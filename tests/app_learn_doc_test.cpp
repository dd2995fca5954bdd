// docs/learn.md stays true: every command the page shows runs here, from the repository root, and must exit 0 and
// print what the page says it prints. The page's convention: each command is a one-line ```bash block (a `\` at
// a line's end continues it), followed by a line "Prints `...` and `...`" whose backquoted spans must all appear
// in the command's output; /tmp/rlcpp-learn/ (where a command writes) becomes a directory of the test's own. A
// command the page shows under several concepts runs once, held to every span the page promises for it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "tests/app_test_support.h"
#include "tests/test_fixtures.h"

namespace rlcpp {
namespace {

namespace fs = std::filesystem;

const char* const kScratch = "/tmp/rlcpp-learn";

struct PageCommand {
  std::string section;                // the first "## " heading it appears under
  std::string command;                // as the page writes it
  std::vector<std::string> expected;  // the spans of its "Prints" lines
};

// How gtest names a case's parameter (ctest lists it): the command itself.
void PrintTo(const PageCommand& c, std::ostream* os) { *os << c.command; }

std::vector<std::string> backquoted(const std::string& text) {
  std::vector<std::string> spans;
  for (size_t at = text.find('`'); at != std::string::npos; at = text.find('`', at)) {
    const size_t end = text.find('`', at + 1);
    if (end == std::string::npos) break;
    spans.push_back(text.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return spans;
}

// The page's commands in order, each once.
std::vector<PageCommand> page_commands(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<PageCommand> out;
  std::string section;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("## ", 0) == 0) section = lines[i].substr(3);
    if (lines[i] != "```bash") continue;
    std::string command;
    for (++i; i < lines.size() && lines[i] != "```"; ++i) {
      std::string l = lines[i];
      if (l.empty() || l[0] == '#') continue;
      const bool continued = !l.empty() && l.back() == '\\';
      if (continued) l.pop_back();
      command += l;
      if (!continued) command += "\n";
    }
    while (!command.empty() && command.back() == '\n') command.pop_back();
    size_t j = i + 1;
    while (j < lines.size() && lines[j].empty()) ++j;
    std::string prints;
    for (; j < lines.size() && !lines[j].empty() && (prints.empty() ? lines[j].rfind("Prints", 0) == 0 : true); ++j)
      prints += lines[j] + " ";
    auto same = std::find_if(out.begin(), out.end(), [&](const PageCommand& c) { return c.command == command; });
    PageCommand& entry = same != out.end() ? *same : out.emplace_back(PageCommand{section, command, {}});
    for (const std::string& span : backquoted(prints)) entry.expected.push_back(span);
  }
  return out;
}

std::string learn_page() { return test_source_dir() + "/docs/learn.md"; }

std::string test_name(const ::testing::TestParamInfo<PageCommand>& info) {
  std::string name = std::to_string(info.index) + "_";
  for (char c : info.param.section) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

class LearnPageCommand : public ::testing::TestWithParam<PageCommand> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LearnPageCommand);
INSTANTIATE_TEST_SUITE_P(Page, LearnPageCommand, ::testing::ValuesIn(page_commands(learn_page())), test_name);

TEST_P(LearnPageCommand, RunsAndPrintsWhatThePageSays) {
  const PageCommand& c = GetParam();
  const fs::path scratch =
      fs::temp_directory_path() / ("rlcpp_learn_" + std::to_string(getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  std::string command = c.command;
  for (size_t at; (at = command.find(kScratch)) != std::string::npos;)
    command.replace(at, std::string(kScratch).size(), (scratch / "run").string());
  ASSERT_EQ(command.rfind("build/", 0), 0u) << "the page's commands start with build/: " << c.command;
  command = std::string(RLCPP_BINARY_DIR) + "/" + command.substr(6);
  const CliResult r = run_shell("cd '" + test_source_dir() + "' && " + command);
  EXPECT_EQ(r.status, 0) << c.command << "\n" << r.output;
  ASSERT_FALSE(c.expected.empty()) << "the page says nothing about what this prints: " << c.command;
  for (const std::string& span : c.expected)
    EXPECT_NE(r.output.find(span), std::string::npos)
        << c.command << "\ndoes not print `" << span << "`:\n" << r.output;
  fs::remove_all(scratch);
}

TEST(LearnPage, EveryConceptHasACommand) {
  std::ifstream in(learn_page());
  ASSERT_TRUE(in.good()) << learn_page() << " is missing";
  std::vector<std::string> sections, with_command;
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) sections.push_back(section = line.substr(3));
    if (line == "```bash" && (with_command.empty() || with_command.back() != section)) with_command.push_back(section);
  }
  // The sections that teach a concept are the ones after the page's first ("How to use this page").
  ASSERT_GE(sections.size(), 17u) << "the page lost concepts";
  for (size_t i = 1; i < sections.size(); ++i)
    EXPECT_NE(std::find(with_command.begin(), with_command.end(), sections[i]), with_command.end())
        << "section '" << sections[i] << "' shows no command";
  EXPECT_GE(page_commands(learn_page()).size(), 8u);
}

}  // namespace
}  // namespace rlcpp
