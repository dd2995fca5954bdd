// `rlcpp tokenize`: a tokenizer.json (or a checkpoint directory holding one) applied to JSONL lines, for users
// and for checks against other tools: {"text": ...} -> {"ids": [...], "tokens": [...]}, or with --decode
// {"ids": [...]} -> {"text": ...}. A token reads as the text it stands for ("用", " the"; the bytes of part of a
// character as "<0xE7><0x94>"), or with --raw as tokenizer.json spells it (byte-level: "çĶ¨", "Ġthe").
#include <filesystem>

#include "apps/output_path.h"
#include "apps/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "core/json_input.h"
#include "core/utf8.h"
#include "tokenizer/bpe_tokenizer.h"

namespace rlcpp::cli {

namespace {

std::string tokenizer_json_path(const std::string& given) {
  if (!std::filesystem::is_directory(given)) return given;
  const std::string path = (std::filesystem::path(given) / "tokenizer.json").string();
  RLCPP_CHECK(std::filesystem::exists(path), "tokenize: the directory '" << given << "' has no tokenizer.json");
  return path;
}

Json line_object(const std::string& line, const std::string& where, const char* key) {
  Json j;
  try {
    j = parse_json_limited(line);
  } catch (const Json::exception& e) {
    RLCPP_FAIL(where << ": not JSON: " << e.what());
  }
  RLCPP_CHECK(j.is_object() && j.contains(key) && j.size() == 1,
              where << ": expected an object with the one key \"" << key << "\", got " << json_excerpt(j));
  return j;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "a tokenizer.json applied to JSONL lines: text -> ids, or --decode");
  struct Args {
    std::string tokenizer, input, output;
    bool decode = false, skip_special = false, raw = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("tokenizer", a->tokenizer, "a tokenizer.json, or a checkpoint directory holding one")->required();
  cmd->add_option("--input", a->input, "JSONL: {\"text\": ...} per line ({\"ids\": [...]} with --decode)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", a->output, "output JSONL (default: stdout)");
  auto* decode =
      cmd->add_flag("--decode", a->decode, "ids -> text: {\"ids\": [...]} lines in, {\"text\": ...} lines out");
  cmd->add_flag("--skip-special", a->skip_special, "with --decode: leave special tokens out of the text");
  cmd->add_flag("--raw", a->raw,
                "\"tokens\" as tokenizer.json spells them (byte-level symbols, e.g. \"Ġthe\", \"çĶ¨\") instead of "
                "the text each stands for (\" the\", \"用\"; bytes of part of a character as <0xNN>)")
      ->excludes(decode);
  return {cmd, [=]() {
    std::vector<std::string> inputs = tokenizer_inputs(a->tokenizer);
    inputs.push_back(a->input);
    check_output_is_not_an_input(a->output, inputs, "tokenize");
    const BpeTokenizer tok = BpeTokenizer::load(tokenizer_json_path(a->tokenizer));
    const InputFile in(a->input, kDatasetInput.named("a JSONL file of texts or ids"));
    // Everything is computed before anything is written, so a bad line leaves no partial output file.
    std::vector<std::string> out_lines;
    in.for_each_line([&](std::string_view text, int64_t n) {
      if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
      const std::string line(text);
      const std::string where = a->input + ":" + std::to_string(n);
      try {
        if (a->decode) {
          const Json j = line_object(line, where, "ids");
          RLCPP_CHECK(j["ids"].is_array(), where << ": \"ids\" must be a list of integer ids");
          std::vector<int32_t> ids;
          for (const Json& id : j["ids"]) {
            RLCPP_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < tok.vocab_size(),
                        where << ": " << json_excerpt(id) << " is not an id in [0, " << tok.vocab_size() << ")");
            ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
          }
          out_lines.push_back(Json{{"text", tok.decode(ids, a->skip_special)}}.dump());
        } else {
          const Json j = line_object(line, where, "text");
          RLCPP_CHECK(j["text"].is_string(), where << ": \"text\" must be a string");
          const std::vector<int32_t> ids = tok.encode(j["text"].get<std::string>());
          Json tokens = Json::array();
          for (int32_t id : ids)
            tokens.push_back(a->raw ? tok.token_text(id) : utf8_with_byte_escapes(tok.token_bytes(id)));
          out_lines.push_back(Json{{"ids", ids}, {"tokens", tokens}}.dump());
        }
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.rfind(where, 0) == 0) throw;
        RLCPP_FAIL(where << ": " << what);
      }
    });
    RLCPP_CHECK(!out_lines.empty(), a->input << ": no input lines (one JSON object per line)");
    OutputFile out = a->output.empty() ? OutputFile() : OutputFile(a->output, OutputFile::Mode::kReplace);
    for (const std::string& l : out_lines) out.write(l + "\n");
    out.close();
    return 0;
  }};
}

}  // namespace rlcpp::cli
