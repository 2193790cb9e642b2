// Finding where a JSON path ("model.config.layers[2].config.units", as the engine names config
// errors) sits in a JSON text, so an editor can point at the line.
#pragma once

#include <QString>
#include <optional>

namespace tandem::gui {

struct TextPosition {
  int offset = 0;  // characters from the start
  int line = 1;    // 1-based
  int column = 1;  // 1-based
};

/// Where the value at `path` starts in `json_text`. When `path` is not in the text, the deepest
/// part of it that is (the object that should hold the missing key, at worst the root); nullopt
/// when the text does not even start a JSON value.
std::optional<TextPosition> locate_json_path(const QString& json_text, const QString& path);

/// Line and column of a character offset.
TextPosition position_of_offset(const QString& text, int offset);

}  // namespace tandem::gui
