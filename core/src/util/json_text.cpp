#include "util/json_text.hpp"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace tandem {

nlohmann::json parse_json_text(const std::string& text) {
  using json = nlohmann::json;
  using Event = json::parse_event_t;
  // The keys of each object being read, innermost last (a key given twice is refused: the parser
  // would keep the last value silently, and a config's "epochs": 1, "epochs": 3 trains 3).
  std::vector<std::set<std::string>> keys;
  // The callback sees every value as it starts; `depth` counts the objects and lists around it.
  const json::parser_callback_t bound = [&](int depth, Event event, json& parsed) {
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
      throw JsonTooDeep("nested deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels of objects and lists");
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end) keys.pop_back();
    if (event == Event::key && !keys.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      throw JsonTextRefused("the key " + parsed.dump() +
                            " appears twice in one object (JSON readers keep one of the two "
                            "values): give it once");
    return true;
  };
  try {
    return json::parse(text, bound);
  } catch (const json::out_of_range& e) {  // 406: a number that overflows a double
    // The library's text ends "number overflow parsing '1e400'": quote the number alone.
    const std::string what = e.what();
    const std::size_t open = what.find('\''), close = what.rfind('\'');
    const std::string number = open != std::string::npos && close > open
                                   ? " " + what.substr(open + 1, close - open - 1)
                                   : "";
    throw JsonTextRefused("a number out of range:" + number +
                          " is beyond what a double holds (about 1.8e308)");
  }
}

std::size_t invalid_utf8_at(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    // The sequence length and the smallest code point of that length (no overlong forms).
    const std::size_t length = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > text.size()) return i;
    std::uint32_t code = length == 1 ? c : c & (0x7f >> length);
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next >> 6) != 2) return i;
      code = (code << 6) | (next & 0x3f);
    }
    static constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
      return i;
    i += length;
  }
  return std::string::npos;
}

}  // namespace tandem
