// The dashboard's look: Qt's Fusion style everywhere (the same widgets on every desktop) with a
// light or a dark palette, chosen in View > Theme or following the desktop ("System": the
// platform's own palette, dark when its window colour is dark). Colours that carry a meaning
// (errors, the accent, chart markers) come from here, in a shade that reads on the palette in use.
// GUI thread only.
#pragma once

#include <QColor>
#include <QPalette>
#include <QString>

namespace tandem::gui {

enum class Theme { system, light, dark };

/// "system", "light", "dark"; theme_from_name() gives system for anything else.
QString theme_name(Theme theme);
Theme theme_from_name(const QString& name);

/// Sets the application's style and palette. The first call remembers the platform's palette
/// (what "system" returns to). Returns whether the palette in use is dark.
bool apply_theme(Theme theme);
/// The theme last applied (system before any).
Theme current_theme();

/// Whether `palette` (the application's by default) is a dark one: light text on dark windows.
bool palette_is_dark(const QPalette& palette);
bool palette_is_dark();

/// The most runs the Run tab compares at once: each gets a colour of its own of the ten it has
/// (Tableau 10), and each stream is read whole (2,000 runs took 55 s and 2.4 GB).
inline constexpr int kMaxComparedRuns = 10;

/// Colours with a meaning, in shades that read on the application's palette now.
struct SemanticColors {
  QColor error;             // failed runs, bad values, error text on the window
  QColor error_background;  // an error banner
  QColor error_text;        // text on error_background
  QColor error_mark;        // the editor line an error is about
  QColor ok_background;     // a "valid" banner
  QColor ok_text;           // text on ok_background
  QColor accent;            // information, the dashboard's own words
  QColor muted;             // secondary text, chart markers
};
SemanticColors semantic_colors();

/// A style sheet for a QLabel banner: an error (red) or a success (green) in the palette's shade.
QString banner_style(bool error);

}  // namespace tandem::gui
