// Checking the rlcpp::Error a call throws: that it throws, and that its message names what it must.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace rlcpp {

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
