// tandem-gui: the desktop dashboard. `tandem-gui [CONFIG] [--workspace DIR] [--start]`.
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>
#include <QSettings>
#include <cstdio>
#include <string_view>

#include "launch_panel.hpp"
#include "main_window.hpp"
#include "theme.hpp"

namespace {

const QCommandLineOption kWorkspace({"w", "workspace"}, "The folder of run folders.", "DIR");
const QCommandLineOption kStart("start", "Start the config at once.");

void name_application() {
  QCoreApplication::setApplicationName("tandem-gui");
  QCoreApplication::setOrganizationName("Tandem");
  QCoreApplication::setApplicationVersion(TANDEM_VERSION);
}

// Parses the command line (exits on --help, --version or an unknown option, as Qt's parser does).
void parse(QCommandLineParser& parser, const QCoreApplication& app) {
  parser.setApplicationDescription(
      "Tandem's dashboard: launch `tandem train` runs and watch them live, browse checkpoints "
      "and past runs. It drives the engine found next to it (or $TANDEM_ENGINE).");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("config", "A run config to open in the Launch panel.");
  parser.addOption(kWorkspace);
  parser.addOption(kStart);
  parser.process(app);
}

// --help and --version print their text: no display needed (QApplication aborts without one).
bool asks_for_text_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--help-all" || arg == "-v" || arg == "--version")
      return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (asks_for_text_only(argc, argv)) {
    QCoreApplication core(argc, argv);
    name_application();
    QCommandLineParser parser;
    parse(parser, core);  // prints and exits
    return 0;
  }
  QApplication app(argc, argv);
  name_application();
  QApplication::setWindowIcon(QIcon(":/tandem/icons/tandem.svg"));
  QApplication::setDesktopFileName("tandem-gui");
  QCommandLineParser parser;
  parse(parser, app);

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
  if (parser.isSet(kWorkspace)) window.set_workspace(parser.value(kWorkspace));
  if (!args.isEmpty()) {
    window.launch_panel()->open_config(args.front());
    window.show_tab(tandem::gui::MainWindow::launch_tab);
    if (parser.isSet(kStart)) window.launch_panel()->start();
  }
  window.show();
  return QApplication::exec();
}
