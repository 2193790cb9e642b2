#include "theme.hpp"

#include <QApplication>
#include <QStyle>
#include <QStyleFactory>
#include <memory>
#include <optional>

namespace tandem::gui {

namespace {

std::optional<QPalette>& platform_palette() {
  static std::optional<QPalette> palette;
  return palette;
}

Theme& applied() {
  static Theme theme = Theme::system;
  return theme;
}

QPalette light_palette() {
  const std::unique_ptr<QStyle> fusion(QStyleFactory::create("Fusion"));
  QPalette p = fusion->standardPalette();
  p.setColor(QPalette::Highlight, QColor("#2f6fd0"));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor("#1d5fa8"));
  return p;
}

QPalette dark_palette() {
  QPalette p;
  const QColor window("#2b2d31"), base("#1e1f22"), text("#e6e6e6"), disabled("#7a7d83");
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor("#26282c"));
  p.setColor(QPalette::ToolTipBase, QColor("#3a3d42"));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, disabled);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, QColor("#35373c"));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor("#ff6b6b"));
  p.setColor(QPalette::Light, QColor("#45484e"));
  p.setColor(QPalette::Midlight, QColor("#3a3d42"));
  p.setColor(QPalette::Mid, QColor("#25272a"));
  p.setColor(QPalette::Dark, QColor("#18191b"));
  p.setColor(QPalette::Shadow, Qt::black);
  p.setColor(QPalette::Highlight, QColor("#3d7fe0"));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor("#7fb2ff"));
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  return p;
}

}  // namespace

QString theme_name(Theme theme) {
  switch (theme) {
    case Theme::light:
      return "light";
    case Theme::dark:
      return "dark";
    case Theme::system:
      break;
  }
  return "system";
}

Theme theme_from_name(const QString& name) {
  if (name == "light") return Theme::light;
  if (name == "dark") return Theme::dark;
  return Theme::system;
}

bool apply_theme(Theme theme) {
  if (!platform_palette()) platform_palette() = QApplication::palette();
  QApplication::setStyle(QStyleFactory::create("Fusion"));
  switch (theme) {
    case Theme::light:
      QApplication::setPalette(light_palette());
      break;
    case Theme::dark:
      QApplication::setPalette(dark_palette());
      break;
    case Theme::system:
      QApplication::setPalette(*platform_palette());
      break;
  }
  applied() = theme;
  return palette_is_dark();
}

Theme current_theme() {
  return applied();
}

bool palette_is_dark(const QPalette& palette) {
  return palette.color(QPalette::Window).lightness() < 128;
}

bool palette_is_dark() {
  return palette_is_dark(QApplication::palette());
}

SemanticColors semantic_colors() {
  if (palette_is_dark())
    return {QColor("#ff7b72"), QColor("#4a2523"), QColor("#ffd2cc"), QColor("#5c2b29"),
            QColor("#1f3a28"), QColor("#b9e6c3"), QColor("#7fb2ff"), QColor("#a0a4ab")};
  return {QColor("#b3261e"), QColor("#fdecea"), QColor("#8a1c12"), QColor("#f9d3ce"),
          QColor("#e6f4ea"), QColor("#1e5e2b"), QColor("#1d5fa8"), QColor("#555555")};
}

QString banner_style(bool error) {
  const SemanticColors c = semantic_colors();
  return QString("QLabel { color: %1; background: %2; padding: 4px; border-radius: 3px; }")
      .arg((error ? c.error_text : c.ok_text).name(),
           (error ? c.error_background : c.ok_background).name());
}

}  // namespace tandem::gui
