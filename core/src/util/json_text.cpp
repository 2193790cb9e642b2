#include "util/json_text.hpp"

namespace tandem {

nlohmann::json parse_json_text(const std::string& text) {
  using json = nlohmann::json;
  // The callback sees every value as it starts; `depth` counts the objects and lists around it.
  const json::parser_callback_t bound = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw JsonTooDeep("nested deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels of objects and lists");
    return true;
  };
  return json::parse(text, bound);
}

}  // namespace tandem
