// Checking the rlcpp::Error a call throws: that it throws, and that its message names what it must.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace rlcpp {

// The message of the Error `f` throws, or "<no error>" when it returns.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// Runs `f`, which must throw an Error whose message holds every one of `needles`.
template <class F> void expect_error(F f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << needles.front() << "'";
  } catch (const Error& e) {
    for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

}  // namespace rlcpp
