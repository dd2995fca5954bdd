#include "core/error.h"

#include <cstring>

namespace rlcpp::detail {

void throw_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  std::ostringstream os;
  os << message << " [" << (base ? base + 1 : file) << ":" << line << "]";
  throw Error(os.str());
}

}  // namespace rlcpp::detail
