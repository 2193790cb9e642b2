// elf_problem(): the checks a plugin file passes before dlopen, on a real plugin cut at every
// kind of place (inside the ELF header, the program headers, a loaded segment, the section
// header table at the end) and on files that are not shared libraries.
#include "plugin/elf_check.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.hpp"

namespace tandem {
namespace TANDEM_TEST_FILE {

namespace fs = std::filesystem;

TEST(ElfCheck, AWholePluginPassesAndEveryCutIsFound) {
  const fs::path whole = fs::path(TANDEM_BINARY_DIR) / "plugins" / "tandem-csv_logger.so";
  ASSERT_TRUE(fs::exists(whole));
  EXPECT_EQ(elf_problem(whole), "");
  const fs::path dir = test::scratch_dir("elf-check");
  const auto size = fs::file_size(whole);
  for (const std::uintmax_t keep : {std::uintmax_t{10}, std::uintmax_t{64}, std::uintmax_t{100},
                                    size / 4, size / 2, size - 1}) {
    const fs::path cut = dir / ("cut-" + std::to_string(keep) + ".so");
    fs::copy_file(whole, cut, fs::copy_options::overwrite_existing);
    fs::resize_file(cut, keep);
    const std::string problem = elf_problem(cut);
    EXPECT_NE(problem, "") << "cut to " << keep << " bytes";
    EXPECT_TRUE(problem.find("truncated") != std::string::npos ||
                problem.find("shorter than an ELF header") != std::string::npos)
        << keep << ": " << problem;
  }
  test::write_text(dir / "text.so", std::string(200, 'x'));  // long enough for a header
  EXPECT_NE(elf_problem(dir / "text.so").find("no ELF header"), std::string::npos);
  EXPECT_EQ(elf_problem(dir / "missing.so").rfind("cannot read its size", 0), 0u);
}

}  // namespace
}  // namespace tandem
