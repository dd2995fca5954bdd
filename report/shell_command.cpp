#include "report/shell_command.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>

#include "core/error.h"

namespace rlcpp {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::pair<int, std::string> run_command(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((command + " 2>&1").c_str(), "r"), pclose);
  RLCPP_CHECK(pipe != nullptr, "cannot start `" << command << "`");
  std::string output;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get())) output.append(buf.data(), n);
  const int status = pclose(pipe.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

}  // namespace rlcpp
