#include "data/npz_archive.hpp"

#include "tandem/error.hpp"

namespace tandem::data {

namespace {

constexpr const char* kKind = "a .npz file";

std::string array_name(const std::string& member) {
  constexpr std::string_view kSuffix = ".npy";
  if (member.size() > kSuffix.size() &&
      member.compare(member.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return member.substr(0, member.size() - kSuffix.size());
  return member;
}

}  // namespace

std::vector<std::string> npz_array_names(const std::string& file) {
  std::vector<std::string> names = zip_member_names(file, kKind);
  for (std::string& name : names) name = array_name(name);
  return names;
}

ZipMember read_npz_member(const std::string& file, const std::string& name) {
  std::optional<ZipMember> member =
      find_zip_member(file, kKind, name + ".npy", "array '" + name + "'");
  if (!member) {
    std::string have;
    for (const std::string& n : npz_array_names(file))
      have += (have.empty() ? "'" : ", '") + n + "'";
    throw DataError("cannot read '" + file + "': has no array '" + name + "' (it has " +
                    (have.empty() ? "none" : have) + ")");
  }
  return std::move(*member);
}

}  // namespace tandem::data
