// tandem-gui: the desktop dashboard. `tandem-gui [CONFIG] [--workspace DIR] [--start]`.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>
#include <QSettings>
#include <cstdio>

#include "launch_panel.hpp"
#include "main_window.hpp"
#include "theme.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("tandem-gui");
  QApplication::setOrganizationName("Tandem");
  QApplication::setApplicationVersion(TANDEM_VERSION);
  QApplication::setWindowIcon(QIcon(":/tandem/icons/tandem.svg"));
  QApplication::setDesktopFileName("tandem-gui");

  QCommandLineParser parser;
  parser.setApplicationDescription(
      "Tandem's dashboard: launch `tandem train` runs and watch them live, browse checkpoints "
      "and past runs. It drives the engine found next to it (or $TANDEM_ENGINE).");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("config", "A run config to open in the Launch panel.");
  QCommandLineOption workspace({"w", "workspace"}, "The folder of run folders.", "DIR");
  QCommandLineOption start("start", "Start the config at once.");
  parser.addOption(workspace);
  parser.addOption(start);
  parser.process(app);

  const QStringList args = parser.positionalArguments();
  if (!args.isEmpty() && !QFileInfo::exists(args.front())) {
    std::fprintf(stderr, "tandem-gui: %s: no such file\n", qPrintable(args.front()));
    return 2;
  }
  // The look: $TANDEM_GUI_THEME (system, light, dark), else the one chosen in View > Theme.
  const QString theme = qEnvironmentVariable(
      "TANDEM_GUI_THEME", QSettings().value("view/theme", "system").toString());
  tandem::gui::apply_theme(tandem::gui::theme_from_name(theme));
  tandem::gui::MainWindow window;
  if (parser.isSet(workspace)) window.set_workspace(parser.value(workspace));
  if (!args.isEmpty()) {
    window.launch_panel()->open_config(args.front());
    window.show_tab(tandem::gui::MainWindow::launch_tab);
    if (parser.isSet(start)) window.launch_panel()->start();
  }
  window.show();
  return QApplication::exec();
}
