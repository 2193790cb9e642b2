// GoogleTest entry point for Tandem's test executables (same process set-up as `tandem`).
#include <gtest/gtest.h>

#include "util/process_setup.hpp"

int main(int argc, char** argv) {
  tandem::configure_process(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
