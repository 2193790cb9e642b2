#include "app/output_over_input.hpp"

#include <system_error>

#include "tandem/error.hpp"

namespace tandem::app {

void refuse_output_over_input(const std::filesystem::path& output,
                              std::initializer_list<std::filesystem::path> inputs,
                              const std::string& option) {
  for (const std::filesystem::path& input : inputs) {
    std::error_code ec;
    if (input.empty() || !std::filesystem::equivalent(output, input, ec) || ec) continue;
    throw ConfigError(option, output.string() + " is the input file " + input.string() +
                                  " this command reads; writing it would replace it: give "
                                  "another output path");
  }
}

}  // namespace tandem::app
