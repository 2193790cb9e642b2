// The engine's OpenMP wait settings (util/process_setup.hpp), read back from libgomp itself:
// OMP_DISPLAY_ENV=verbose makes libgomp print what it took from the environment when it loads,
// once in the first process and once more after the re-execution.
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

// `tandem --version` with the settings the test runner itself was given removed, plus `env`.
test::CommandResult version_with(const std::string& env) {
  return test::run_command("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u TANDEM_REEXECUTED "
                           "OMP_DISPLAY_ENV=verbose " + env + " " + test::tandem_cli() +
                           " --version");
}

// How many times libgomp displayed its settings, and the value of `name` in the last display.
struct Display {
  int count = 0;
  std::string last;
};
Display displayed(const std::string& err, const std::string& name) {
  Display d;
  for (std::size_t at = err.find("OPENMP DISPLAY ENVIRONMENT BEGIN"); at != std::string::npos;
       at = err.find("OPENMP DISPLAY ENVIRONMENT BEGIN", at + 1))
    ++d.count;
  const std::string key = "  " + name + " = '";
  const std::size_t at = err.rfind(key);
  if (at != std::string::npos) {
    const std::size_t from = at + key.size();
    d.last = err.substr(from, err.find('\'', from) - from);
  }
  return d;
}

TEST(ProcessSetup, WorkersSpinBrieflyThenSleepWhenNothingIsSet) {
  const auto r = version_with("");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tandem "), std::string::npos) << r.out;
  EXPECT_EQ(displayed(r.err, "OMP_WAIT_POLICY").count, 2) << r.err;  // re-executed once
  EXPECT_EQ(displayed(r.err, "OMP_WAIT_POLICY").last, "PASSIVE") << r.err;
  EXPECT_EQ(displayed(r.err, "GOMP_SPINCOUNT").last, "1000") << r.err;
}

TEST(ProcessSetup, AUsersSpinCountOrWaitPolicyWins) {
  const auto count = version_with("GOMP_SPINCOUNT=77");
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(displayed(count.err, "OMP_WAIT_POLICY").last, "PASSIVE") << count.err;
  EXPECT_EQ(displayed(count.err, "GOMP_SPINCOUNT").last, "77") << count.err;

  const auto policy = version_with("OMP_WAIT_POLICY=ACTIVE");
  ASSERT_EQ(policy.exit_code, 0) << policy.err;
  EXPECT_EQ(displayed(policy.err, "OMP_WAIT_POLICY").count, 1) << policy.err;  // not re-executed
  EXPECT_EQ(displayed(policy.err, "OMP_WAIT_POLICY").last, "ACTIVE") << policy.err;
}

}  // namespace TANDEM_TEST_FILE
}  // namespace tandem
