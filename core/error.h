// Errors: one exception type and the check macros every boundary uses.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace rlcpp {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace rlcpp

// RLCPP_CHECK(cond, "what" << value << "expected") throws rlcpp::Error with file:line.
#define RLCPP_CHECK(cond, msg)                                         \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::ostringstream rlcpp_check_os_;                              \
      rlcpp_check_os_ << msg;                                          \
      ::rlcpp::detail::throw_error(__FILE__, __LINE__, rlcpp_check_os_.str()); \
    }                                                                  \
  } while (0)

#define RLCPP_FAIL(msg) RLCPP_CHECK(false, msg)
