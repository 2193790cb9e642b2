// One engine command run for the newest of a stream of requests: the dashboard's live checks of
// a config being edited and of a plugin's options (ConfigChecker, OptionsChecker). A request
// starts a quiet period; when it ends, the request's command runs (one engine process at a
// time); a request made while it runs makes its answer stale: that answer is dropped and the
// newest request runs when the process ends. So answered() always answers the latest request.
// Lives on the GUI thread; the object owns its process and kills it when destroyed.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QPointer>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTimer>

#include <functional>

namespace tandem::gui {

/// What the engine said: its exit code, standard output and standard error; or, when it could
/// not run at all (no engine found, failed to start, the command could not be made), `failure`
/// says why and the rest is empty.
struct EngineAnswer {
  int exit_code = -1;
  QByteArray output;
  QString error_output;
  QString failure;
};

class EngineQuery : public QObject {
  Q_OBJECT
 public:
  /// The command of a request: the engine's arguments and its standard input, or a `failure`
  /// that answers the request without running anything.
  struct Command {
    QStringList arguments;
    QByteArray input;
    QString failure;
  };
  /// Makes the command when the quiet period ends (on the GUI thread), so that it may write
  /// what the command reads (a temporary file) just before it runs.
  using MakeCommand = std::function<Command()>;

  explicit EngineQuery(QObject* parent = nullptr);
  ~EngineQuery() override;

  /// Runs `make`'s command once no newer request came for `delay_ms`.
  void request(MakeCommand make, int delay_ms);
  /// A request is waiting or running.
  bool busy() const;

 Q_SIGNALS:
  void answered(const tandem::gui::EngineAnswer& answer);

 private:
  void start();
  // The running process ended (or failed to start) with `answer`: emits it unless a newer
  // request made it stale, which then runs.
  void finish(const EngineAnswer& answer);

  QTimer debounce_;
  QPointer<QProcess> process_;
  MakeCommand make_;
  bool pending_ = false;
};

}  // namespace tandem::gui
