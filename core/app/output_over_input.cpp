#include "app/output_over_input.hpp"

#include <span>
#include <system_error>
#include <vector>

#include "tandem/error.hpp"
#include "util/regular_file.hpp"

namespace tandem::app {

namespace {

void refuse_over_any(const std::filesystem::path& output,
                     std::span<const std::filesystem::path> inputs, const std::string& option) {
  for (const std::filesystem::path& input : inputs) {
    std::error_code ec;
    if (input.empty() || !std::filesystem::equivalent(output, input, ec) || ec) continue;
    throw ConfigError(option, output.string() + " is the input file " + input.string() +
                                  " this command reads; writing it would replace it: give "
                                  "another output path");
  }
}

// Every string in `spec`, as a path relative to `base_dir`.
void collect_paths(const nlohmann::json& spec, const std::filesystem::path& base_dir,
                   std::vector<std::filesystem::path>& paths) {
  if (spec.is_string()) {
    const std::filesystem::path p(spec.get<std::string>());
    paths.push_back(p.is_absolute() ? p : base_dir / p);
  } else if (spec.is_structured()) {
    for (const auto& item : spec) collect_paths(item, base_dir, paths);
  }
}

}  // namespace

void refuse_bad_output(const std::filesystem::path& output,
                       std::initializer_list<std::filesystem::path> inputs,
                       const std::string& option) {
  if (const std::string problem = not_a_replaceable_file(output); !problem.empty())
    throw ConfigError(option, output.string() + " " + problem +
                                  ": Tandem writes a new file and renames it over the old one, "
                                  "which would replace it; give a file path");
  refuse_over_any(output, std::span(inputs.begin(), inputs.size()), option);
}

void refuse_output_over_data(const std::filesystem::path& output, const nlohmann::json& data,
                             const std::filesystem::path& base_dir, const std::string& option) {
  std::vector<std::filesystem::path> paths;
  collect_paths(data, base_dir, paths);
  refuse_over_any(output, paths, option);
}

}  // namespace tandem::app
